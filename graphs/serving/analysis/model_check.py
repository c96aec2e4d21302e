"""``costmodel model check``: what the engine will get right about a ``config.json`` and what it
approximates, before a user trusts its numbers.

:func:`check_model` composes

* the loader's reading (:func:`models.check.inspect_config`): the family that maps the config and
  why, every field read and every field ignored (recorded from the loader itself), what the graph
  approximates, the nearest families and, for a ``model_type`` the loader does not know, why it is
  refused or (with ``assume_family``) read as a known family;
* what is exact for the structure built: the parameter counts (:func:`models.param_counts`), the KV
  bytes per token and per sequence and the FLOPs per token of a decode and a prefill step, as closed
  forms in ``ctx`` and ``S`` (:func:`graphs.serving.step.totals.closed_forms`);
* what ``--predict`` prices from measured kernels: for each framework of the corpus, a decode step
  (batch 1 at ``ctx``) and a prefill step (batch 1 at ``seq``) priced by
  :func:`graphs.serving.pricing.predict.predict_step` on ``device``, summarised per kernel family by where
  its time comes from (``measured``, ``neighbour``, ``bound``: :mod:`graphs.serving.pricing.kernel_sources`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from costmodel.errors import CostModelError
from costmodel.results import Result

__all__ = ["ModelCheck", "check_model", "kernel_coverage", "DECODE_CTX", "PREFILL_SEQ"]

#: the decode context and prefill length the kernel coverage is priced at (capped by the model's limit)
DECODE_CTX, PREFILL_SEQ = 4096, 1024
_SOURCES = ("measured", "neighbour", "bound")


def _shown(v: Any) -> str:
    """A field's value as ``model check`` shows it: its repr, cut at 40 characters."""
    return f"{v!r:.40}"


@dataclass(frozen=True)
class ModelCheck(Result):
    """The answer of :func:`check_model` (module doc); ``to_dict`` is the ``--json`` output.

    Attributes
    ----------
    config : str
        The model's name (the catalog name or the file's stem).
    model_type : object
        The file's ``model_type`` as written (None: a layer file).
    family : str or None
        The loader's mapping that reads it (None: refused).
    assumed : bool
        The family came from ``--assume-family``.
    why : str
        Why this family, in words.
    refused : str or None
        The loader's one-line reason when refused.
    nearest : list of dict
        The closest families: ``family``, ``similarity`` (Jaccard of field names), ``fits``,
        ``why_not``.
    fields_read, fields_defaulted : list of str
        Field paths read, and those looked up and absent.
    fields_ignored : list of dict
        The rest of the file: ``field``, ``value``, ``read_by`` (the families that read it).
    exact : dict
        Parameter counts and the decode/prefill closed forms (KV bytes, FLOPs per token).
    approximated : list of str
        What the engine approximates for this model, in words.
    device : str
        The device the kernel coverage is priced on.
    kernels : dict
        Per framework and phase, the priced step's share of time by source and per kernel family.
    """

    config: str
    model_type: Any
    family: str | None
    assumed: bool
    why: str
    refused: str | None
    nearest: list[dict[str, Any]]
    fields_read: list[str]
    fields_defaulted: list[str]
    fields_ignored: list[dict[str, Any]]
    exact: dict[str, Any] = field(default_factory=dict)
    approximated: list[str] = field(default_factory=list)
    device: str = ""
    kernels: dict[str, Any] = field(default_factory=dict)

    def to_text(self) -> str:
        """What ``costmodel model check`` prints: the family and why, the nearest families when
        refused, the fields read, defaulted and ignored, the exact closed forms, what is
        approximated and the ``--predict`` kernels' sources.

        Returns
        -------
        str
        """
        from costmodel.report import fmt_si
        from models.check import describe_families

        out: list[str] = []
        state = f"family {self.family}" + (" (assumed)" if self.assumed else "") if self.family else "refused"
        if self.model_type is None and not self.nearest:  # a layer file: no model_type, no family near
            what = "a layer file"
            state = "read as given" if self.family else "refused"
        elif self.model_type is None:
            what = "no model_type"
        else:
            what = f"model_type {str(self.model_type)[:80]!r}"
        out.append(f"{self.config}: {what} -> {state}")
        out.append(f"  why: {self.why}")
        best = self.nearest[0] if self.nearest else None  # a layer file has no family to be near
        if self.family is None and best is not None:
            out.append(
                "  nearest families (Jaccard similarity of field names; `costmodel model check --help`):"
            )
            for n in self.nearest[:3]:
                out.append(
                    f"    {n['family']:12s} {n['similarity']:.2f}  {n['why_not'] or 'fits: --assume-family ' + n['family']}"
                )
        elif best is not None:
            same = [
                n["family"]
                for n in self.nearest
                if n["family"] != self.family and n["similarity"] == best["similarity"]
            ]
            if same and best["family"] in (self.family, *same):
                out.append(
                    f"  equally near by fields: {', '.join(same)} (they differ in parts no field states)"
                )
        whose = "" if self.family or best is None else f" (as the nearest family, {best['family']}, reads it)"
        out.append(f"fields read{whose} ({len(self.fields_read)}): {', '.join(self.fields_read)}")
        if self.fields_defaulted:
            out.append(f"looked up, not stated (defaults): {', '.join(self.fields_defaulted)}")
        out.append(f"fields ignored ({len(self.fields_ignored)}):")
        for f in self.fields_ignored:
            who = f"read by {describe_families(tuple(f['read_by']))}" if f["read_by"] else "read by no family"
            out.append(f"  {f['field']:34s} {_shown(f['value']):24s} {who}")
        if self.family is None:
            return "\n".join(out)
        e = self.exact
        out.append("exact for the structure built:")
        out.append(
            f"  parameters {fmt_si(e['params_total'])} total, {fmt_si(e['params_non_embedding'])} non-embedding, "
            f"{fmt_si(e['params_active_per_token'])} active per token"
        )
        out.append(
            f"  KV cache {e['kv_bytes_per_token']} B per token; one sequence {e['kv_bytes_per_sequence']} B"
        )
        out.append(
            f"  FLOPs per token: decode {e['decode_flops_per_token']}; prefill {e['prefill_flops_per_token']}"
        )
        out.append("approximated:" + ("" if self.approximated else " nothing the loader knows of"))
        for a in self.approximated:
            out.append(f"  {a}")
        out.append(f"--predict kernels on {self.device} (batch 1; shares of the predicted step time):")
        for fw, phases in self.kernels.items():
            for phase, k in phases.items():
                where = ", ".join(f"{a} {b}" for a, b in k["point"].items() if a != "batch")
                out.append(
                    f"  {fw:7s} {phase:8s} ({where}): {100 * k['measured_share']:.1f}% measured, "
                    f"{100 * k['neighbour_share']:.1f}% neighbour, {100 * k['bound_share']:.1f}% bound"
                )
                for g in k["families"]:
                    what = g["family"] or "unmeasured ops"
                    basis = f": {g['basis']}" if g["basis"] else ""
                    out.append(f"      {what}: {g['source']}{basis} ({g['nodes']} graph nodes)")
        return "\n".join(out)


def _nearest_row(fit: Any, cfg: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "family": fit.family,
        "similarity": round(fit.similarity, 4),
        "fits": fit.fits,
        "why_not": fit.why_not(cfg) or None,
    }


def _exact(model: Any) -> dict[str, Any]:
    """Parameter counts and the closed forms of a decode and a prefill step (module doc)."""
    # loaded on use: importing the check (the command's start-up) stays light
    from costmodel.cost import as_float
    from models import param_counts

    from ..step.totals import closed_forms

    pc = param_counts(model)
    dec, pre = closed_forms(model, "decode"), closed_forms(model, "prefill")
    return {
        "params_total": as_float(pc.total),
        "params_non_embedding": as_float(pc.non_embedding),
        "params_active_per_token": as_float(pc.active),
        "kv_bytes_per_token": str(dec["kv_bytes_per_token_bound"]),
        "kv_bytes_per_sequence": str(dec["kv_bytes_per_sequence_bound"]),
        "decode_flops_per_token": str(dec["flops_per_token_bound"]),
        "prefill_flops_per_token": str(pre["flops_per_token_bound"]),
    }


def kernel_coverage(model: Any, device: str, frameworks: tuple[str, ...]) -> dict[str, Any]:
    """Per framework, per phase: the priced step's share of time by source and, per kernel family
    (None: the ops no measured family prices), each source with its basis and its node count.

    Parameters
    ----------
    model : ModelConfig
    device : the device the steps are priced on
    frameworks : the corpus frameworks to ask (:data:`costmodel.measured.corpus.FRAMEWORKS`)

    Returns
    -------
    dict
        ``{framework: {phase: {"point", "measured_share", "neighbour_share", "bound_share",
        "families": [{"family", "source", "basis", "nodes"}]}}}``
    """
    # loaded on use: importing the check (the command's start-up) stays light
    from ..pricing.predict import predict_step

    limit = model.max_context
    ctx = min(DECODE_CTX, limit) if limit else DECODE_CTX
    seq = min(PREFILL_SEQ, limit) if limit else PREFILL_SEQ
    out: dict[str, Any] = {}
    for fw in frameworks:
        per: dict[str, Any] = {}
        for phase, kw in (("decode", {"ctx": ctx}), ("prefill", {"seq": seq})):
            p = predict_step(model, device, phase, batch=1, framework=fw, **kw)  # type: ignore[arg-type]
            cov = p.coverage
            groups: dict[tuple[Any, str, str], int] = {}
            for nd in p.nodes.values():
                key = (nd["family"], nd["source"], nd["basis"])
                groups[key] = groups.get(key, 0) + 1
            total = cov.total_s if cov is not None and cov.total_s > 0 else 0.0
            parts = (cov.measured_s, cov.neighbour_s, cov.bound_s) if cov is not None and total else (0, 0, 0)
            per[phase] = {
                "point": p.point,
                **{
                    f"{k}_share": round(t / total, 4) if total else 0.0
                    for k, t in zip(_SOURCES, parts, strict=True)
                },
                "families": [
                    {"family": f, "source": s, "basis": b, "nodes": n}
                    for (f, s, b), n in sorted(groups.items(), key=lambda kv: (kv[0][0] is None, str(kv[0])))
                ],
            }
        out[fw] = per
    return out


def check_model(
    model: str | os.PathLike[str] | Mapping[str, Any],
    *,
    assume_family: str | None = None,
    device: str = "h100-sxm",
    frameworks: tuple[str, ...] | None = None,
    name: str | None = None,
) -> ModelCheck:
    """What the engine makes of a ``config.json`` (module doc).

    Parameters
    ----------
    model : a catalog name, a ``config.json`` path or folder, or a parsed ``config.json``
    assume_family : read a ``model_type`` the loader does not know as this family, when its fields fit
    device : the device ``--predict``'s kernel coverage is priced on
    frameworks : the corpus frameworks asked (default: all)
    name : the model's name (default: the catalog name or the file's stem)

    Returns
    -------
    ModelCheck
        A refused config has ``family`` None, ``refused`` the loader's one-line reason and no
        ``exact`` or ``kernels``.

    Raises
    ------
    CostModelError
        When ``model`` is none of the three (None was a bare TypeError), or the device is unknown.
    """
    # loaded on use: importing the check (the command's start-up) stays light
    from costmodel.hardware import get_device
    from costmodel.measured.corpus import FRAMEWORKS
    from models.catalog import MODELS
    from models.check import inspect_config
    from models.resolver import config_data

    hw = get_device(device)
    mtp = False
    if isinstance(model, Mapping):
        data, label = dict(model), name or "model"
    elif not isinstance(model, str | os.PathLike):  # None was a bare TypeError from os.fspath
        raise CostModelError(
            "model must be a catalog name, a config.json path or folder, or a parsed config.json, got "
            f"{type(model).__name__} {model!r:.40}"
        )
    else:
        text = os.fspath(model)
        data = config_data(text)
        entry = MODELS.get(text.lower())
        mtp = entry.mtp if entry is not None else False
        label = name or (text.lower() if entry is not None else _stem(text))
    rep = inspect_config(data, label, assume_family=assume_family, mtp=mtp)
    exact: dict[str, Any] = {}
    kernels: dict[str, Any] = {}
    if rep.model is not None:
        exact = _exact(rep.model)
        kernels = kernel_coverage(rep.model, hw.name, tuple(frameworks or FRAMEWORKS))
    return ModelCheck(
        config=label,
        model_type=rep.model_type,
        family=rep.family,
        assumed=rep.assumed,
        why=rep.why,
        refused=rep.refused,
        nearest=[_nearest_row(f, data) for f in rep.nearest],
        fields_read=list(rep.read),
        fields_defaulted=list(rep.defaulted),
        fields_ignored=[{"field": p, "value": v, "read_by": list(fams)} for p, v, fams in rep.ignored],
        exact=exact,
        approximated=list(rep.approximated),
        device=hw.name,
        kernels=kernels,
    )


def _stem(path: str) -> str:
    """A config path's model name: the file's stem, or the folder's name for a ``config.json``."""
    p = Path(path)
    if p.name == "config.json" and p.parent.name:
        return p.parent.name
    return p.stem if p.suffix == ".json" else p.name
