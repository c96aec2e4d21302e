"""What the loader makes of a ``config.json``: the family that maps it, the fields that mapping reads
and ignores, what it approximates, and (for an unknown ``model_type``) the nearest family
(:func:`inspect_config`, behind ``costmodel model check``).

The family readings, the structural fields and the nearest family are :mod:`models.family_fit`'s
(re-exported here); every list comes from the loader itself, run on a recording view of the config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .family_fit import (
    MIN_SIMILARITY,
    FamilyFit,
    FamilyRead,
    approximations,
    describe_families,
    family_fit,
    family_names,
    ignored_fields,
    nearest_families,
    neutral,
    read_as,
    structural_fields,
    top_field,
)
from .fieldlog import RecordingConfig
from .fields import ModelConfigError
from .hf import config_from_hf_dict
from .hf_families import unwrap_text_config
from .layer_file import LAYER_FILE_FAMILY, config_from_layer_file, is_layer_file

__all__ = [
    "FamilyRead",
    "FamilyFit",
    "family_names",
    "read_as",
    "structural_fields",
    "nearest_families",
    "family_fit",
    "assumed_family_note",
    "ignored_fields",
    "neutral",
    "describe_families",
    "MIN_SIMILARITY",
    "approximations",
    "ConfigReport",
    "inspect_config",
]


def assumed_family_note(model_type: Any, family: str) -> str:
    """The line every output says when a config is read as ``family`` (``--assume-family``)."""
    return f"assumed family {family} for model_type {str(model_type)[:80]!r} (--assume-family)"


@dataclass(frozen=True)
class ConfigReport:
    """What the loader makes of one ``config.json`` (:func:`inspect_config`).

    ``family`` is the mapping that reads it (None: refused, ``refused`` the loader's one-line reason);
    ``assumed`` says it came from ``--assume-family``; ``why`` says why this family; ``nearest`` the
    closest families (:func:`nearest_families`); ``read`` the field paths read, ``defaulted`` the
    ones looked up and absent, ``ignored`` the rest of the file (path, value, the families that read
    it); ``approximated`` :func:`approximations`; ``model`` the ModelConfig (None when refused)."""

    name: str
    model_type: Any
    family: str | None
    assumed: bool
    why: str
    refused: str | None
    nearest: tuple[FamilyFit, ...]
    read: tuple[str, ...]
    defaulted: tuple[str, ...]
    ignored: tuple[tuple[str, Any, tuple[str, ...]], ...]
    approximated: tuple[str, ...]
    model: Any


def inspect_config(
    cfg: Mapping[str, Any], name: str = "model", *, assume_family: str | None = None, mtp: bool = False
) -> ConfigReport:
    """The loader's reading of ``cfg`` (module doc): the family, why, the fields read and ignored,
    what is approximated, and the nearest families.

    Parameters
    ----------
    cfg : a parsed ``config.json``
    name : the model's name
    assume_family : read an unknown ``model_type`` as this family (:func:`models.hf.config_from_hf_dict`)
    mtp : keep multi-token-prediction modules (catalog entries that serve them)

    Returns
    -------
    ConfigReport
    """
    if not isinstance(cfg, Mapping):  # None was a bare TypeError
        raise ModelConfigError(f"{name}: config must be a JSON object, got {type(cfg).__name__} {cfg!r:.40}")
    if is_layer_file(cfg):
        return _layer_file_report(cfg, name)
    mt = cfg.get("model_type")
    fits = nearest_families(cfg, name)
    by_family = {f.family: f for f in fits}
    view = RecordingConfig(cfg)
    refused = None
    try:
        model = config_from_hf_dict(view, name, mtp=mtp, assume_family=assume_family)
    except ModelConfigError as exc:
        model, refused = None, str(exc)
    family = None
    if model is not None:
        family = assume_family or str(unwrap_text_config(cfg).get("model_type"))
    assumed = model is not None and assume_family is not None and assume_family != mt
    best = fits[0]
    if model is None:
        why = refused or ""
    elif assumed:
        why = (
            f"{assumed_family_note(mt, str(family))}: its fields fit {family} (similarity "
            f"{by_family[str(family)].similarity:.2f}; it reads every field with a value that some family reads)"
        )
    else:
        why = f"model_type {mt!r} is a type the loader maps"
    structural = structural_fields({f.family: f.reads for f in fits})
    log = view.log
    if model is None:  # what the nearest family would read
        log = best.reads.log
    ignored = tuple(
        (
            p,
            _value_at(cfg, p),
            structural.get(top_field(p), ()) if "." not in p.removeprefix("text_config.") else (),
        )
        for p in ignored_fields(cfg, log)
    )
    approx: tuple[str, ...] = ()
    if family is not None:
        approx = approximations(cfg, family, by_family.get(family) or family_fit(cfg, family, name))
    return ConfigReport(
        name=name,
        model_type=mt,
        family=family,
        assumed=assumed,
        why=why,
        refused=refused,
        nearest=tuple(fits[:5]),
        read=tuple(p for p in log.read() if p != "model_type"),
        defaulted=log.absent(),
        ignored=ignored,
        approximated=approx,
        model=model,
    )


def _value_at(cfg: Mapping[str, Any], path: str) -> Any:
    cur: Any = cfg
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return cur


def _layer_file_report(cfg: Mapping[str, Any], name: str) -> ConfigReport:
    """A layer file's report (:mod:`models.layer_file`): every key is read (an unknown one refuses
    the file), nothing is approximated, and no family applies."""
    model = None
    refused = None
    try:
        model = config_from_layer_file(cfg, name)
    except ModelConfigError as exc:
        refused = str(exc)
    return ConfigReport(
        name=name,
        model_type=None,
        family=None if model is None else LAYER_FILE_FAMILY,
        assumed=False,
        why=refused or "a layer file (layer_types and no model_type): its layers and fields as given",
        refused=refused,
        nearest=(),
        read=tuple(cfg),
        defaulted=(),
        ignored=(),
        approximated=(),
        model=model,
    )
