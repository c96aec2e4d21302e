"""Which loader family fits a ``config.json``: each family's reading of it, the structural fields, the
nearest family and whether one fits (what ``--assume-family`` requires), and what a reading ignores
or approximates (the report of it all: :mod:`models.check`).

Every list here comes from the loader itself: :func:`read_as` runs
:func:`models.hf_read.read_hf_dict` on a recording view of the config
(:class:`models.fieldlog.RecordingConfig`), so the fields read are exactly the ones the mapping looked
up and found, and the fields ignored are the rest of the file.

Structural fields and the nearest family
----------------------------------------
A field of a config is *structural* when some family's mapping reads it: from this config (the config
read as each family, :func:`read_as`) or from a catalog config of that family
(:data:`models.shipped.MODELS`). Other fields (``rope_theta``, ``bos_token_id``, ``initializer_range``)
change no cost in any family. A field stating ``null``, ``false``, ``0`` or an empty string, list or
object switches nothing on (:func:`neutral`), so it is no evidence for a family.

The nearest family of a config ``C`` is the one whose mapping matches ``C``'s fields best: with ``A``
the structural fields ``C`` states with a value that is not neutral and ``B_F`` the fields of ``C``
that family ``F``'s mapping reads (``text_config.`` stripped, nested keys folded into their top-level
field, neutral ones left out),

.. math:: \\mathrm{sim}(F) = |A \\cap B_F| \\,/\\, |A \\cup B_F|

the Jaccard similarity of the two field-name sets: for a family that reads ``C``, the share of ``A``
it reads. When ``F``'s mapping stops at an error, ``B_F`` also holds every field it looked up and the
fields it reads on its catalog configs, so the fields ``C`` lacks count against it. Families that read
``C`` without an error come first, then by similarity; ties keep the loader's order.

A family fits ``C`` (:func:`family_fit`, what ``--assume-family`` requires) when its mapping reads
``C`` without an error and ignores none of ``A``: such a field describes a part (a window, experts,
a latent rank ...) that the family would leave out without a word.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .fieldlog import FieldLog, RecordingConfig, layered
from .fields import ModelConfigError
from .hf_families import APPROXIMATED_FAMILIES, APPROXIMATED_FIELDS
from .hf_read import SUPPORTED_MODEL_TYPES, read_hf_dict
from .mixers import hf_families
from .shipped import MODELS
from .sources import config_data

__all__ = [
    "FamilyRead",
    "FamilyFit",
    "family_names",
    "read_as",
    "structural_fields",
    "nearest_families",
    "family_fit",
    "ignored_fields",
    "neutral",
    "describe_families",
    "top_field",
    "MIN_SIMILARITY",
    "approximations",
]

#: the similarity below which the nearest family is "not close enough" to suggest (half the fields)
MIN_SIMILARITY = 0.5


@dataclass(frozen=True)
class FamilyRead:
    """A config read as one family (:func:`read_as`): the model or the loader's refusal, and the log.

    ``model`` is the :class:`~models.config.ModelConfig` (None when refused, ``error`` saying why);
    ``log`` the fields looked up."""

    family: str
    model: Any
    error: str | None
    log: FieldLog

    @property
    def read(self) -> tuple[str, ...]:
        """The field paths of the config the mapping read (``text_config.hidden_size``)."""
        return tuple(p for p in self.log.read() if p != "model_type")

    @property
    def looked(self) -> frozenset[str]:
        """Top-level field names the mapping looked up, stated or not (module doc)."""
        return frozenset(top_field(p) for p in self.log.looked if top_field(p) != "model_type")


@dataclass(frozen=True)
class FamilyFit:
    """How well one family matches a config (module doc): its read, similarity, and the structural
    fields with values that it would ignore (``field -> families that read it``)."""

    family: str
    reads: FamilyRead
    similarity: float
    left_out: dict[str, tuple[str, ...]]

    @property
    def fits(self) -> bool:
        return self.reads.error is None and not self.left_out

    def why_not(self, cfg: Mapping[str, Any]) -> str:
        """Why it does not fit, one clause ('' when it fits)."""
        if self.reads.error is not None:
            return f"{self.family} cannot read it ({_after_name(self.reads.error)})"
        if self.left_out:
            parts = [
                f"{f} {_shown(_value(cfg, f))} (read by {describe_families(fams)})"
                for f, fams in self.left_out.items()
            ]
            return f"{self.family} would ignore {'; '.join(parts)}"
        return ""


def describe_families(names: tuple[str, ...], most: int = 4) -> str:
    """``a, b, c, d and 3 more``."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def top_field(path: str) -> str:
    """A field path's top-level name, ``text_config.`` stripped (``rope_scaling.factor`` -> ``rope_scaling``)."""
    if path.startswith("text_config."):
        path = path[len("text_config.") :]
    return path.split(".", 1)[0]


def _after_name(msg: str) -> str:
    """A loader error without its leading ``name: ``."""
    return msg.split(": ", 1)[1] if ": " in msg else msg


def _shown(v: Any) -> str:
    return f"{v!r:.40}"


def _fields_of(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The config's top-level fields, a multimodal ``text_config``'s folded in (the loader reads those)."""
    out = {k: v for k, v in cfg.items() if k != "text_config"}
    text = cfg.get("text_config")
    if isinstance(text, Mapping):
        out.update({k: v for k, v in text.items() if k not in out or v is not None})
    return out


def _value(cfg: Mapping[str, Any], field: str) -> Any:
    """A field's value as the file states it (a nested mapping that a recording config wraps is
    shown as its plain data, not as the wrapper's repr)."""
    value = _fields_of(cfg).get(field)
    return getattr(value, "data", value) if isinstance(value, Mapping) else value


def neutral(value: Any) -> bool:
    """True for a value that switches nothing on: ``null``, ``false``, ``0``, ``""``, ``[]``, ``{}``."""
    return (
        value is None
        or value is False
        or (type(value) in (int, float) and value == 0)
        or value in ("", [], {})
    )


def family_names() -> tuple[str, ...]:
    """Every ``model_type`` the loader maps (:data:`models.hf_read.SUPPORTED_MODEL_TYPES` and the mixer
    plug-ins'), in the loader's order."""
    return (*SUPPORTED_MODEL_TYPES, *hf_families())


def read_as(cfg: Mapping[str, Any], family: str, name: str = "model") -> FamilyRead:
    """``cfg`` read by the mapping of ``family`` (its ``model_type`` replaced when it differs), every
    look-up recorded (:class:`~models.fieldlog.RecordingConfig`).

    Parameters
    ----------
    cfg : a parsed ``config.json``
    family : a ``model_type`` the loader maps (:func:`family_names`)
    name : the model's name in the loader's messages

    Returns
    -------
    FamilyRead
        The ModelConfig, or the loader's one-line refusal, and the fields looked up.
    """
    view = RecordingConfig(cfg)
    data: Mapping[str, Any] = view
    if cfg.get("model_type") != family:
        data = layered(view, overrides={"model_type": family})
    try:
        model = read_hf_dict(data, name)
    except ModelConfigError as exc:
        return FamilyRead(family, None, str(exc), view.log)
    return FamilyRead(family, model, None, view.log)


@functools.cache
def _catalog_reads() -> dict[str, frozenset[str]]:
    """model_type -> the top-level fields its mapping reads on the catalog configs of that type."""
    out: dict[str, set[str]] = {}
    for key in MODELS:
        data = config_data(key)
        mt = data.get("model_type")
        if isinstance(mt, str):
            got = read_as(data, mt, key)
            out.setdefault(mt, set()).update(top_field(p) for p in got.read)
    return {k: frozenset(v) for k, v in out.items()}


def structural_fields(reads: Mapping[str, FamilyRead]) -> dict[str, tuple[str, ...]]:
    """Field name -> the families whose mapping reads it (module doc): from ``reads`` (one config read
    as each family) and from the catalog configs."""
    out: dict[str, list[str]] = {}
    for fam, r in reads.items():
        for f in dict.fromkeys(top_field(p) for p in r.read):
            out.setdefault(f, []).append(fam)
    for fam, fields in _catalog_reads().items():
        for f in fields:
            if fam not in out.setdefault(f, []):
                out[f].append(fam)
    out.pop("model_type", None)
    return {f: tuple(v) for f, v in out.items()}


def _fit(cfg: Mapping[str, Any], r: FamilyRead, structural: Mapping[str, tuple[str, ...]]) -> FamilyFit:
    fields = _fields_of(cfg)
    stated = {f for f in fields if f in structural and not neutral(fields[f])}
    read = {top_field(p) for p in r.read}
    looked = set(read)
    if r.error is not None:  # the mapping stopped early: what it looked up, and reads on its catalog configs
        looked |= r.looked | _catalog_reads().get(r.family, frozenset())
    looked = {f for f in looked if not (f in fields and neutral(fields[f]))}
    union = stated | looked
    sim = len(stated & looked) / len(union) if union else 0.0
    left = (
        {}
        if r.error
        else {f: tuple(x for x in structural[f] if x != r.family) for f in sorted(stated - read)}
    )
    return FamilyFit(r.family, r, sim, {f: fams for f, fams in left.items() if fams})


def nearest_families(cfg: Mapping[str, Any], name: str = "model") -> list[FamilyFit]:
    """Every family's fit to ``cfg``, nearest first (module doc): the ones that read it without an
    error, then by similarity, ties in the loader's order.

    Parameters
    ----------
    cfg : a parsed ``config.json``
    name : the model's name in the loader's messages

    Returns
    -------
    list of FamilyFit
    """
    names = family_names()
    reads = {f: read_as(cfg, f, name) for f in names}
    structural = structural_fields(reads)
    fits = [_fit(cfg, reads[f], structural) for f in names]
    order = {f: i for i, f in enumerate(names)}
    return sorted(fits, key=lambda x: (x.reads.error is not None, -round(x.similarity, 9), order[x.family]))


def family_fit(cfg: Mapping[str, Any], family: str, name: str = "model") -> FamilyFit:
    """``family``'s fit to ``cfg`` (module doc); refused when ``family`` is not one the loader maps.

    Parameters
    ----------
    cfg : a parsed ``config.json``
    family : the family assumed
    name : the model's name in the loader's messages

    Returns
    -------
    FamilyFit
    """
    names = family_names()
    if family not in names:
        raise ModelConfigError(
            f"{name}: --assume-family {family!r} is not a family the loader maps; families: {', '.join(names)}"
        )
    reads = {f: read_as(cfg, f, name) for f in names}
    return _fit(cfg, reads[family], structural_fields(reads))


def ignored_fields(cfg: Mapping[str, Any], log: FieldLog) -> tuple[str, ...]:
    """The field paths of ``cfg`` the load did not read: the top-level fields never looked at, and
    inside an object it entered (``text_config``, ``rope_scaling``, ``quantization_config``) the keys
    it did not read."""
    read = set(log.read())
    out: list[str] = []

    def walk(m: Mapping[str, Any], prefix: str) -> None:
        for k, v in m.items():
            path = prefix + str(k)
            if path == "model_type":
                continue
            if path not in read:
                out.append(path)
            elif isinstance(v, Mapping) and any(p.startswith(path + ".") for p in read):
                walk(v, path + ".")

    walk(cfg, "")
    return tuple(out)


def approximations(cfg: Mapping[str, Any], family: str, fit: FamilyFit) -> tuple[str, ...]:
    """What the graph of ``cfg`` read as ``family`` approximates, one line each: the fields of
    :data:`models.hf_families.APPROXIMATED_FIELDS` the config states (not neutral), the family's
    :data:`~models.hf_families.APPROXIMATED_FAMILIES` notes, and every structural field with a value
    that this family's mapping ignores (another family reads it: a part not built)."""
    fields = _fields_of(cfg)
    out = [
        f"{f} {_shown(v)}: {APPROXIMATED_FIELDS[f]}"
        for f, v in fields.items()
        if f in APPROXIMATED_FIELDS and not neutral(v)
    ]
    out += list(APPROXIMATED_FAMILIES.get(family, ()))
    out += [
        f"{f} {_shown(fields[f])}: not read by {family}, though {describe_families(fams)} read it: what it sets "
        "is not in this model"
        for f, fams in fit.left_out.items()
        if f not in APPROXIMATED_FIELDS
    ]
    return tuple(out)
