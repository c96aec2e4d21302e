"""Load a Hugging Face ``config.json`` (a parsed dict) into a ModelConfig: the public entry.

:func:`config_from_hf_dict` reads every ``model_type`` the loader maps
(:data:`SUPPORTED_MODEL_TYPES` and the families the plug-ins bring: :mod:`models.hf_read`
states each family's fields), reads an unknown ``model_type`` as a family whose fields fit it
when asked (``assume_family``), and refuses one otherwise naming the nearest family
(:mod:`models.family_fit`). Files go through :func:`models.resolver.load_hf_config`.

No network access: pass a path or an already-parsed dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from costmodel.notes import ASSUMED_FLOAT, say

from .family_fit import MIN_SIMILARITY, family_fit, nearest_families
from .fieldlog import RecordingConfig, layered
from .fields import ModelConfigError
from .hf_families import NEW_ARCHITECTURES
from .hf_read import MISSING_MODEL_TYPE, SUPPORTED_MODEL_TYPES, read_hf_dict
from .mixers import hf_families
from .quantization import assumed_float_note

if TYPE_CHECKING:
    from .config import ModelConfig

__all__ = ["config_from_hf_dict", "SUPPORTED_MODEL_TYPES"]


def config_from_hf_dict(
    cfg: Mapping[str, Any],
    name: str = "model",
    source: str = "",
    *,
    mtp: bool = False,
    assume_family: str | None = None,
) -> ModelConfig:
    """Map a parsed ``config.json`` onto :class:`ModelConfig` (:func:`models.hf_read.read_hf_dict`).

    ``mtp``: keep DeepSeek's multi-token-prediction modules (``num_nextn_predict_layers``)
    with the model, as speculative decoding with them serves it.

    ``assume_family``: read a config of a ``model_type`` the loader does not know as this family,
    when its fields fit the family's (:func:`models.family_fit.family_fit`); refused otherwise, and
    for a known ``model_type`` other than the family. An unknown ``model_type`` without it is refused
    naming its nearest family (:func:`models.family_fit.nearest_families`).

    Parameters
    ----------
    cfg : the parsed ``config.json``
    name : the model's name
    source : where the config came from
    mtp : keep the multi-token-prediction modules
    assume_family : read an unknown ``model_type`` as this family

    Returns
    -------
    ModelConfig
    """
    if not isinstance(cfg, Mapping):
        raise ModelConfigError(f"{name}: config must be a JSON object")
    if assume_family is not None and _assumed(cfg, assume_family, name):
        cfg = layered(cfg, overrides={"model_type": assume_family})
    built = read_hf_dict(cfg, name, source, mtp=mtp, hint=_nearest)
    # a config of no torch_dtype is read as bf16 (models.quantization.float_dtype): said once,
    # of a config that builds (a refused one gets its one-line error alone)
    say(assumed_float_note(cfg, built.name), topic=ASSUMED_FLOAT)
    return built


def _assumed(cfg: Mapping[str, Any], family: str, name: str) -> bool:
    """Whether ``cfg`` is read as ``family`` (``assume_family``): True for an unknown ``model_type``
    whose fields fit it, False for the family's own ``model_type``; refused otherwise, one line."""
    mt = cfg.get("model_type")
    if mt == family:
        return False
    if isinstance(mt, str) and mt in NEW_ARCHITECTURES:
        raise ModelConfigError(
            f"{name}: model_type {mt!r} is a known architecture the layer specs lack "
            f"({NEW_ARCHITECTURES[mt].split(':')[0]}); --assume-family {family} cannot read it"
        )
    if isinstance(mt, str) and (mt in SUPPORTED_MODEL_TYPES or mt in hf_families()):
        raise ModelConfigError(
            f"{name}: model_type {mt!r} is mapped as itself; --assume-family ({family}) applies only to "
            "a model_type the loader does not know"
        )
    fit = family_fit(cfg.data if isinstance(cfg, RecordingConfig) else cfg, family, name)  # not logged
    if not fit.fits:
        what = f"{MISSING_MODEL_TYPE} and it" if mt is None else f"model_type {str(mt)[:80]!r}"
        raise ModelConfigError(f"{name}: {what} does not fit family {family}: {fit.why_not(cfg)}")
    return True


def _nearest(cfg: Mapping[str, Any], name: str) -> str:
    """The refusal's clause naming the nearest family (:func:`models.check.nearest_families`)."""
    best = nearest_families(cfg.data if isinstance(cfg, RecordingConfig) else cfg, name)[0]  # not logged
    if best.fits and best.similarity >= MIN_SIMILARITY:
        return (
            f"its fields fit family {best.family} (similarity {best.similarity:.2f}): pass --assume-family "
            f"{best.family} (assume_family={best.family!r}) to read it as {best.family}"
        )
    why = best.why_not(cfg) or f"similarity {best.similarity:.2f} < {MIN_SIMILARITY}"
    return f"nearest family {best.family} (similarity {best.similarity:.2f}) is not close enough: {why}"
