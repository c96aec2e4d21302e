"""Interactive HTML pages of one serving step (optional extra ``html``: plotly).

Each page function takes the report objects a command already computed and returns one
self-contained page (:func:`costmodel.html.page_html`); no number is computed a second way:

* :func:`phase_page` (``decode``, ``prefill``): the headline as the command prints it, the
  step-time breakdown (weights, KV, compute per unit, collectives; the calibrated prediction
  beside the bound when there is one), the roofline of every node (:func:`node_rows` of the
  same compiled step the report comes from) and the capacity ledger at this batch and at the
  largest batch that fits (:func:`capacity`);
* :func:`analysis_page` (``model analyze``): the same from a :class:`ModelAnalysis`.

The pages of whole runs (``simulate``, ``search``, ``fusion audit``) are in
:mod:`graphs.serving.present.html_studies`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from costmodel import __version__
from costmodel.cost import UNITS
from costmodel.dtypes import get_dtype
from costmodel.errors import CostModelError
from costmodel.expr import to_expr
from costmodel.graph import TENSOR, op_nodes
from costmodel.hardware import get_device
from costmodel.html import Section, page_html, plain, require_plotly, rows_table
from costmodel.html_figures import hbar_figure, ledger_figure, roofline_figure, styled
from costmodel.keys import Phase
from costmodel.roofline import LINK_PREFIX
from costmodel.text import fmt_si, fmt_time

from ..analysis.classify import node_rows
from ..pricing.predict import UNMEASURED
from ..step.compiled import compiled_step
from ..step.ledger_fit import capacity
from .phase_summary import OTHER_DRAM_SHOWN, energy_words, memory_cap

__all__ = [
    "run_header",
    "node_details",
    "phase_page",
    "analysis_page",
]


def _headline_s(prediction: Any) -> float:
    """The prediction a page states as "calibrated prediction": the fits with their shape
    residuals (``corrected_s``, what the text, the JSON's ``corrected_s`` and the served figures
    use), else the fits alone (``predicted_s``) where no residual applies."""
    return prediction.corrected_s if prediction.corrected_s is not None else prediction.predicted_s


def run_header(
    command: str, config: Any = None, device: str | None = None, tp: int | None = None
) -> dict[str, str]:
    """What was run: the command line, model, device, tp, dtypes, engine version.

    Parameters
    ----------
    command : str
        The command line.
    config : ModelConfig, optional
        The model.
    device : str, optional
        The device's name.
    tp : int, optional
        Tensor-parallel degree.

    Returns
    -------
    dict of str to str
        Label -> value, in display order.
    """
    head = {"command": command}
    if config is not None:
        head["model"] = config.name
        head["dtypes"] = f"weights {config.weight_dtype}, KV {config.cache_dtype}, matmul {_matmul(config)}"
    if device is not None:
        head["device"] = device
    if tp is not None:
        head["tp"] = str(tp)
    head["written by"] = f"costmodel {__version__}"
    return head


def node_details(compiled: Any, point: Sequence[float]) -> dict[str, str]:
    """Each op node's input tensors with their shapes at ``point`` (the compiled step's dims).

    Parameters
    ----------
    compiled : CompiledStep
        A compiled step.
    point : sequence of float
        Values of its dims, in order.

    Returns
    -------
    dict of str to str
        Node name -> its inputs and shapes, as text.
    """
    g = compiled.graph
    subs = dict(zip(compiled.forms.symbols, point, strict=True))
    out = {}
    for n in op_nodes(g):
        shapes = []
        for u in g.predecessors(n):
            t = g.edges[u, n].get(TENSOR)
            if t is not None:
                dims = ", ".join(str(to_expr(d, field="tensor dim").subs(subs)) for d in t.shape)
                shapes.append(f"{u.split('.')[-1]}[{dims}] {t.dtype.name}")
        out[n] = "inputs: " + "; ".join(shapes) if shapes else ""
    return out


def _roofline_section(rows: Sequence[Any], hw: Any, details: Mapping[str, str], precision: str) -> Section:
    top = sorted(rows, key=lambda r: -r.total_time_s)
    table = [
        {
            "node": r.node,
            "op": r.op,
            "x": r.repeat,
            "FLOPs": fmt_si(r.flops, "FLOP"),
            "bytes": fmt_si(r.bytes, "B"),
            # no bytes: infinite intensity, or none at all (0/0) for a node that also has no FLOPs
            "I (FLOP/B)": round(r.intensity, 3) if math.isfinite(r.intensity) else "inf" if r.flops else "-",
            "bound": r.kind,
            "T x repeat": fmt_time(r.total_time_s),
            "share %": round(100 * r.share, 2),
        }
        for r in top
    ]
    return Section(
        "roofline of every node",
        (roofline_figure(rows, hw, details=details, show_precisions=(precision, "fp32")), rows_table(table)),
        f"The {len(rows)} nodes' bounds sum to {fmt_time(sum(r.total_time_s for r in rows))}. Point size "
        "grows with the node's share of the step; hover a point for its op, shapes, FLOPs, bytes, bound "
        "and time. Nodes without FLOPs (gathers) and collectives (bound by a link: their bytes cross the "
        "interconnect, not DRAM) appear in the table only.",
    )


def _no_kv_read(report: Any) -> str:
    """Why a step reads no KV cache, in words: a prefill has no cached context before its prompt
    (its K and V are written, not read back); a chunked one's terms are the whole prompt's, the
    chunks' reads of the chunks before them are in its step bound."""
    if report.phase != Phase.PREFILL:
        return "no KV-cache bytes read"
    if getattr(report, "chunks", 1) > 1:
        return "none in the whole prompt's terms; the chunks' reads of earlier chunks are in the step bound"
    return "no cached context before the prompt (its K and V are written, not read back)"


def _breakdown_section(report: Any, prediction: Any = None) -> Section:
    go = require_plotly()
    bars: dict[str, float] = {
        "weights (DRAM read)": report.weight_read_s,
        "KV cache (DRAM read)": report.kv_read_s,
    }
    # the rest of the DRAM traffic (activations between unfused kernels) and the DRAM total the
    # "bound by" verdict counts, as the text's line shows them (phase_summary._other_dram)
    dram = report.terms_s.get("dram", 0.0)
    rest = dram - report.weight_read_s - report.kv_read_s
    if dram > 0 and rest >= OTHER_DRAM_SHOWN * dram:
        bars["activations (DRAM, between unfused kernels)"] = rest
        bars["DRAM in all (weights + KV + activations)"] = dram
    for k, v in report.terms_s.items():
        if k in UNITS:
            bars[f"compute: {k}"] = v
        elif k.startswith(LINK_PREFIX):
            bars[f"collectives: {k[len(LINK_PREFIX) :]}"] = v
    bars["whole step as one roofline"] = report.optimistic_step_s
    bars["step bound (sum of kernel bounds)"] = report.step_s
    if prediction is not None:
        bars[f"calibrated prediction ({prediction.framework})"] = _headline_s(prediction)
        if prediction.corrected_s is not None:
            bars["the fits alone (no shape residuals)"] = prediction.predicted_s
    texts = {k: fmt_time(v) for k, v in bars.items()}
    if report.kv_read_s == 0:  # a bar of no width: its label says why it is 0
        texts["KV cache (DRAM read)"] = f"0: {_no_kv_read(report)}"
    fig = hbar_figure(
        list(bars),
        [v * 1e3 for v in bars.values()],
        list(texts.values()),
        title="step time: what it moves, computes and bounds",
        x_title="ms",
    )
    parts: list[Any] = [fig]
    note = (
        "Weights, KV and compute are whole-step terms (each alone over its roof); the step bound sums "
        "each kernel's roofline, the whole-step roofline assumes perfect overlap across kernels."
    )
    if prediction is not None:
        fams = list(prediction.by_family)
        fam_fig = go.Figure()
        for key, label in (
            ("bound_s", "bound"),
            ("predicted_s", "the fits alone"),
            ("corrected_s", "predicted (with shape residuals)"),
        ):
            fam_fig.add_trace(
                go.Bar(
                    x=[plain(f) for f in fams],
                    y=[prediction.by_family[f].get(key, math.nan) * 1e3 for f in fams],
                    name=label,
                    hovertemplate=f"%{{x}} {label} %{{y:.4g}} ms<extra></extra>",
                )
            )
        styled(
            fam_fig,
            f"bound vs calibrated prediction per kernel family ({prediction.calibrated_from})",
            "",
            "ms",
            barmode="group",
        )
        parts.append(fam_fig)
        uncovered = prediction.by_family.get(UNMEASURED, {}).get("bound_s", 0.0)
        covered = 1 - uncovered / prediction.bound_s if prediction.bound_s else 0.0
        note += (
            f" The prediction covers {100 * covered:.1f}% of the bound with measured kernel families; "
            "the rest (unmeasured ops) keeps its bound, or its kernels' share of the device's shortest "
            "measured kernel where that is longer."
        )
    return Section("step-time breakdown", tuple(parts), note)


def _ledger_section(
    config: Any, device: str, *, batch: int, ctx: int, phase: str, seq: int | None, tp: int, ep: int = 1
) -> Section:
    cap = capacity(config, device, batch=batch, ctx=ctx, phase=phase, seq=seq, tp=tp, ep=ep)
    bars = {f"batch {batch} (this run)": cap.terms}
    fit = cap.max_batch
    if fit.value > 0:
        bars[f"batch {fit.value} (largest that fits)"] = fit.at_value
        bars[f"batch {fit.value + 1} (overflows on {fit.overflowing_term})"] = fit.at_next
    where = f"ctx {ctx}" if phase == Phase.DECODE else f"seq {seq}"
    degrees = f"tp={tp}" + (f", ep={ep}: the routed experts spread over the {ep} EP ranks" if ep > 1 else "")
    title = f"capacity ledger at {where} on {cap.device} ({degrees}): largest batch that fits = {fit.value}"
    return Section(
        "capacity ledger",
        (ledger_figure(bars, cap.capacity_bytes, title=title),),
        "Weights, KV cache, live activations and overhead (none by default; see costmodel ledger "
        "--overhead) stacked against the device's memory, as costmodel ledger computes them.",
    )


def phase_page(
    report: Any,
    config: Any,
    *,
    command: str,
    ctx: int | None = None,
    seq: int | None = None,
    limits: Any = None,
    prediction: Any = None,
    routing: Any = None,
    verdict: str | None = None,
) -> str:
    """A ``decode`` (``ctx``) or ``prefill`` (``seq``) page from its :class:`PhaseReport`: its
    nodes and ledger are the report's own step (its ``tp``, its ``ep`` and ``routing``).

    Parameters
    ----------
    report : DecodeReport or PrefillReport
        The phase's report.
    config : ModelConfig
        The model.
    command : str
        The command line that ran it.
    ctx : int, optional
        Cached tokens per sequence (decode: required).
    seq : int, optional
        Prompt tokens (prefill: required).
    limits : DecodeLimits, optional
        The batching limits, drawn with a decode page.
    prediction : Prediction, optional
        Per-node calibrated predictions, shown beside the bound.
    routing : Routing, optional
        The expert routing the report was priced with (:mod:`graphs.serving.step.expert_routing`;
        None: uniform).
    verdict : str, optional
        The capacity verdict of a point that does not fit (``--ignore-capacity``), as the text's
        first line: the page's first headline.

    Returns
    -------
    str
        A self-contained HTML page.

    Raises
    ------
    CostModelError
        When a decode page lacks ``ctx`` or a prefill page ``seq``.
    """
    hw = get_device(report.device)
    decode = report.phase == Phase.DECODE
    dim = ctx if decode else seq
    if dim is None:
        raise CostModelError(f"a {report.phase} page needs {'ctx' if decode else 'seq'}, got None")
    point = (report.batch, dim)
    ep = getattr(report, "ep", 1)
    c = compiled_step(config, hw, report.phase, tp=report.tp, ep=ep, routing=routing)
    rows, _totals = node_rows(c, *point)
    compute = max((v for k, v in report.terms_s.items() if k in UNITS), default=0.0)
    headline: dict[str, str] = {"does not fit": verdict} if verdict else {}
    if decode:
        title = f"{report.model} decode on {report.device}: batch {report.batch}, ctx {ctx}, tp={report.tp}"
        headline |= {
            "TPOT bound": fmt_time(report.step_s),
            "tokens/s per user": f"{report.tokens_per_s_per_user:.1f}",
            "tokens/s per device": f"{report.tokens_per_s_per_device:.1f}",
            "weight read": fmt_time(report.weight_read_s),
            "KV read": fmt_time(report.kv_read_s),
            "compute": fmt_time(compute),
        }
        if limits is not None:
            over = f" over the {report.tp} devices" if report.tp > 1 else ""
            headline["throughput ceiling"] = (
                f"{limits.throughput_ceiling_tokens_per_s or 0.0:,.0f} tokens/s{over}"
            )
            if (cap := memory_cap(limits, dim, report.tp)) is not None:  # as the text caps it
                headline["capped by memory"] = cap
    else:
        title = (
            f"{report.model} prefill on {report.device}: batch {report.batch} x {seq} tokens, tp={report.tp}"
        )
        headline |= {
            "TTFT lower bound": fmt_time(report.step_s),
            "whole prompt as one roofline": fmt_time(report.optimistic_step_s),
            "throughput": f"{report.tokens_per_s:,.0f} tokens/s",
            "attention share of FLOPs": f"{100 * report.attention_flop_share:.1f}%",
        }
        if getattr(report, "chunk", None):
            headline["chunks"] = f"{report.chunks} of {report.chunk} tokens (the nodes show the whole prompt)"
    if (energy := energy_words(report)) is not None and (decode or report.energy_per_token_j):
        headline["energy"] = energy  # as the text says it
    if prediction is not None:
        best = _headline_s(prediction)
        headline["calibrated prediction"] = (
            f"{best * 1e3:.3f} ms ({best / prediction.bound_s:.2f}x the bound)"
        )
    sections = [
        _breakdown_section(report, prediction),
        *_step_sections(
            rows, hw, node_details(c, point), config, report.phase, report.batch, dim, report.tp, ep
        ),
    ]
    return page_html(title, run_header(command, config, report.device, report.tp), headline, sections)


def _step_sections(
    rows: Sequence[Any],
    hw: Any,
    details: Mapping[str, str],
    config: Any,
    phase: str,
    batch: int,
    dim: int,
    tp: int,
    ep: int = 1,
) -> list[Section]:
    """The roofline of the step's nodes and the ledger at its point (``dim``: ctx or seq)."""
    seq = dim if phase == Phase.PREFILL else None
    return [
        _roofline_section(rows, hw, details, _roof_precision(_matmul(config))),
        _ledger_section(config, hw.name, batch=batch, ctx=dim, phase=phase, seq=seq, tp=tp, ep=ep),
    ]


def _matmul(config: Any) -> str:
    """The matmul operand dtype: ``matmul_dtype``, else the activations' (the tensor roof used)."""
    return config.matmul_dtype or config.activation_dtype


def _roof_precision(dtype: str) -> str:
    return get_dtype(dtype).roof


def analysis_page(
    analysis: Any, config: Any, *, command: str, prediction: Any = None, verdict: str | None = None
) -> str:
    """A ``model analyze`` page from its :class:`ModelAnalysis` (and per-node predictions).

    Parameters
    ----------
    analysis : ModelAnalysis
        The per-node analysis (its ``tp``: the rows are one device's share, and the page draws
        that device: title, header, hover shapes, ledger).
    config : ModelConfig
        The model.
    command : str
        The command line that ran it.
    prediction : Prediction, optional
        Per-node calibrated predictions.
    verdict : str, optional
        The capacity verdict of a point that does not fit (``--ignore-capacity``), as the text's
        first line: the page's first headline.

    Returns
    -------
    str
        A self-contained HTML page.
    """
    hw = get_device(analysis.device)
    decode = analysis.phase == Phase.DECODE
    dim = analysis.ctx if decode else analysis.seq
    assert dim is not None, "analyze sets ctx for decode and seq for prefill"
    point = (analysis.batch, dim)
    tp = analysis.tp  # the rows are one device's share at tp: the hover shapes and the ledger too
    details = node_details(compiled_step(config, hw, analysis.phase, tp=tp), point)
    if prediction is not None:
        for n, p in prediction.nodes.items():
            if n in details:
                details[n] += f"; predicted {fmt_time(p['predicted_s'])} ({prediction.framework})"
    t = analysis.totals
    where = f"ctx {analysis.ctx}" if decode else f"seq {analysis.seq}"
    headline = {"does not fit": verdict} if verdict else {}
    headline |= {
        "bound (sum over nodes)": f"{t.sum_of_node_bounds_s * 1e3:.3f} ms",
        "tokens/s": f"{t.tokens_per_s:.1f}" + (f" over the {tp} devices" if tp > 1 else ""),
        "whole step as one roofline": f"{t.whole_step_bound_s * 1e3:.3f} ms ({t.whole_step_kind})",
        "step traffic": f"{fmt_si(t.flops, 'FLOP')}, {fmt_si(t.dram_bytes, 'B')} DRAM",
        "attention share of FLOPs": f"{100 * t.attention_flop_share:.1f}%",
    }
    if prediction is not None:
        headline["calibrated prediction"] = f"{_headline_s(prediction) * 1e3:.3f} ms"
    forms = rows_table(
        [
            {"quantity": k[:-6], "closed form": str(v)}
            for k, v in analysis.closed_forms.items()
            if k.endswith("_bound")
        ]
    )
    sections = [
        *_step_sections(analysis.rows, hw, details, config, analysis.phase, analysis.batch, dim, tp),
        Section("closed forms (the whole model, not divided by tp; B, S, ctx free)", (forms,)),
    ]
    title = (
        f"{analysis.model} {analysis.phase} on {analysis.device}: batch {analysis.batch}, {where}, tp={tp}"
    )
    return page_html(title, run_header(command, config, analysis.device, tp), headline, sections)
