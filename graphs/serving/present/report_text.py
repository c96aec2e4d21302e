"""The lines every serving report prints about what priced its numbers: the measured kernels and
what their seconds rest on (:func:`coverage_lines`, :func:`predicted_lines`), a P10-P90 interval
(:func:`interval_text`), a ``calibrate serving`` fit applied (:func:`predict_file_line`) and the
cost line (:func:`cost_text`).

One home, so that a report object renders itself (``to_text()``) with the words the command line
has always printed; the command line's option modules re-export them.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

__all__ = [
    "SERVED_APPLIES_TO",
    "coverage_lines",
    "cost_text",
    "interval_text",
    "plan_unlike",
    "plans_unlike",
    "predict_file_line",
    "predicted_lines",
    "served_error_dicts",
    "served_error_lines",
    "step_error_pairs",
]

#: what a step command's served expected error applies to, in its ``--json``
SERVED_APPLIES_TO = "the served TPOT and light-load TTFT of such a deployment, not these steps"


def coverage_lines(p: Any) -> list[str]:
    """What a printed prediction (``p.corrected_s``, the grey-box total) rests on, each neighbour
    and bound reason, and the warnings.

    Parameters
    ----------
    p : StepPrediction or namespace
        Anything with ``coverage`` (a :class:`~graphs.serving.pricing.kernel_sources.Coverage`,
        or ``corrected_coverage`` preferred), ``device`` and ``framework``.

    Returns
    -------
    list of str
        The lines, each indented two spaces; none when nothing was priced.
    """
    from graphs.serving.pricing.kernel_sources import unmeasured_device_families

    cov = getattr(p, "corrected_coverage", None) or p.coverage
    if cov is None or cov.total_s <= 0:
        return []
    pct = lambda t: f"{100 * t / cov.total_s:.1f}%"  # noqa: E731
    out = [
        f"  rests on: {pct(cov.measured_s)} measured {p.device} {p.framework} kernels, "
        f"{pct(cov.neighbour_s)} neighbours, {pct(cov.bound_s)} the bound alone"
    ]
    for kind, parts in (("neighbour", cov.neighbours), ("bound", cov.bounds)):
        for why, t in sorted(parts.items(), key=lambda kv: -kv[1]):
            out.append(f"  note: {pct(t)} from {kind}: {why}")
    out += [f"  warning: {w}" for w in cov.warnings]
    families = unmeasured_device_families(cov)
    if families:  # a device the corpus does not measure: how far such kernels have been off
        from costmodel.hardware import get_device
        from graphs.serving.sim.served_errors import served_errors

        hw = get_device(p.device)
        for fam in families:
            line = served_errors().neighbour(fam, hw)
            if line:
                out.append(f"  expected: {line}")
    return out


def step_error_pairs(
    framework: str, devices: Sequence[str], moe: bool, metrics: Sequence[str] = ("TPOT", "TTFT")
) -> tuple[tuple[str, str], ...]:
    """``(device, statement)`` for each of ``devices`` (by catalog name, each once, in order): the
    expected error of a served TPOT and light-load TTFT on deployments like it
    (:func:`graphs.serving.sim.served_step.step_expected_errors`).

    Parameters
    ----------
    framework : str
        The corpus framework whose kernels priced the steps.
    devices : sequence of str
        Catalog device names.
    moe : bool
        Whether the model routes tokens to experts.
    metrics : sequence of str
        Which of ``TPOT`` and ``TTFT``.

    Returns
    -------
    tuple of (str, str)
    """
    from costmodel.hardware import get_device
    from graphs.serving.sim.served_step import step_expected_errors

    names = dict.fromkeys(get_device(d).name for d in devices)  # an alias and its name: once
    return tuple(
        (d, statement) for d in names for statement in step_expected_errors(framework, d, moe, metrics)
    )


def plan_unlike(pp: int, ep: int, microbatches: int, dp: int = 1) -> str | None:
    """What a parallel plan is that no validated deployment was: every deployment whose served
    TPOT and TTFT calibrate :func:`step_error_pairs` ran one pipeline stage, no micro-batches, no
    expert parallelism and no attention data parallelism (``benchmarks/data/published_serving.csv``'s
    ``pp`` is 1 or blank on every row and its replayed expert-parallel rows are throughput only; the
    silicon sample states only ``tp`` and ``ep`` 1). ``None`` for a plan like them.

    Parameters
    ----------
    pp : int
        Pipeline stages.
    ep : int
        Expert-parallel ranks.
    microbatches : int
        Micro-batches in flight through the stages.
    dp : int
        Attention data-parallel ranks per replica.

    Returns
    -------
    str or None
        The words, e.g. ``pipelined (pp 2) and micro-batched (4)``.

    Examples
    --------
    >>> plan_unlike(2, 1, 4)
    'pipelined (pp 2) and micro-batched (4)'
    >>> plan_unlike(1, 1, 1) is None
    True
    """
    parts = [
        f"{word} ({label}{n})"
        for word, label, n in (
            ("pipelined", "pp ", pp),
            ("expert-parallel", "ep ", ep),
            ("attention data-parallel", "dp ", dp),
            ("micro-batched", "", microbatches),
        )
        if n > 1
    ]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def plans_unlike(rows: Sequence[Any]) -> str | None:
    """What the plans of ``rows`` are that no validated deployment was (:func:`plan_unlike`), and
    how many of them: the ``unlike`` words of :func:`served_error_lines`.

    Parameters
    ----------
    rows : sequence of mapping
        Each with ``plan`` and the integers ``pp``, ``ep``, ``microbatches`` (``dp`` optional).

    Returns
    -------
    str or None
        None when every plan is like a validated deployment.

    Examples
    --------
    >>> plans_unlike([{"plan": "tp8", "pp": 1, "ep": 1, "microbatches": 1},
    ...               {"plan": "tp4 pp2", "pp": 2, "ep": 1, "microbatches": 1}])
    'pipelined, as 1 of the 2 plans is (tp4 pp2)'
    """
    plans = {r["plan"]: r for r in rows}
    odd = [r for r in plans.values() if plan_unlike(r["pp"], r["ep"], r["microbatches"], r.get("dp", 1))]
    if not odd:
        return None
    kinds = [
        word
        for word, key in (
            ("pipelined", "pp"),
            ("expert-parallel", "ep"),
            ("attention data-parallel", "dp"),
            ("micro-batched", "microbatches"),
        )
        if any(r.get(key, 1) > 1 for r in odd)
    ]
    words = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]
    shown = ", ".join(r["plan"] for r in odd[:4]) + (", ..." if len(odd) > 4 else "")
    if len(odd) == len(plans):
        share = "the plan is" if len(plans) == 1 else "every plan is"
    else:
        share = f"{len(odd)} of the {len(plans)} plans " + ("is" if len(odd) == 1 else "are")
    return f"{words}, as {share} ({shown})"


def served_error_dicts(errors: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """``errors`` (:func:`step_error_pairs`) as ``--json`` gives them, each saying what it applies to.

    Parameters
    ----------
    errors : sequence of (str, str)
        ``(device, statement)`` pairs.

    Returns
    -------
    list of dict
    """
    return [{"device": d, "statement": st, "applies_to": SERVED_APPLIES_TO} for d, st in errors]


def served_error_lines(errors: Sequence[tuple[str, str]], unlike: str | None = None) -> list[str]:
    """What a command whose TTFT and TPOT are steps, not served runs, says beside them: that they
    are steps, and the served expected errors ``errors`` (:func:`step_error_pairs`) of deployments
    like its devices (none: nothing).

    Parameters
    ----------
    errors : sequence of (str, str)
        ``(device, statement)`` pairs.
    unlike : str, optional
        What the deployment is that no validated one was (``disaggregated``, ``speculating``): said
        once, after the statements.

    Returns
    -------
    list of str
    """
    if not errors:
        return []
    out = [
        "  these figures rest on the GPU's steps alone: an engine adds its CPU terms, request path and "
        "streaming (`decode` / `prefill --predict` print a step as served); served, deployments like "
        "these have been off by:",
        *(f"    {d}: {statement}" for d, statement in errors),
    ]
    if unlike:
        out.append(
            f"    no validated deployment was {unlike}: these are the errors of aggregated deployments "
            "decoding plainly on the same devices"
        )
    return out


def predicted_lines(
    framework: str,
    device: str,
    coverage: Any,
    *,
    what: str,
    clamped_s: float | None = None,
    served: Sequence[tuple[str, str]] = (),
    unlike: str | None = None,
) -> list[str]:
    """What priced ``what`` (e.g. "every iteration's kernels"): ``framework``'s kernels of the
    corpus, what their seconds rest on (:func:`coverage_lines`) and the share clamped to the bound;
    for steps, not served runs, the served expected errors ``served`` (:func:`served_error_lines`).

    Parameters
    ----------
    framework : str
        The corpus framework whose kernels priced the steps.
    device : str
        The catalog device name.
    coverage : Coverage or None
        What the priced seconds rest on (None: nothing was priced; the first line only).
    what : str
        What was priced, in words.
    clamped_s : float, optional
        Seconds of kernels whose prediction fell below their bound (None: from ``coverage``).
    served : sequence of (str, str)
        ``(device, statement)`` pairs (:func:`step_error_pairs`; empty: a served run's report,
        which states its own).
    unlike : str, optional
        What the steps' deployment is that no validated one was (:func:`served_error_lines`).

    Returns
    -------
    list of str
    """
    from graphs.serving.pricing.predict import calibration_source

    out = [
        f"  predicted, not bound: {what} priced from {framework} kernels "
        f"({calibration_source()}), each at least its roofline bound"
    ]
    if coverage is None:
        return out + served_error_lines(served, unlike)
    out += coverage_lines(SimpleNamespace(coverage=coverage, device=device, framework=framework))
    if coverage.total_s > 0:
        if clamped_s is None:
            from graphs.serving.pricing.predictor import CLAMPED

            clamped_s = coverage.bounds.get(CLAMPED, 0.0)
        out.append(
            f"  clamped: {100 * clamped_s / coverage.total_s:.1f}% of the time is kernels whose "
            "prediction fell below their bound (the bound priced them)"
        )
    return out + served_error_lines(served, unlike)


def interval_text(lo: float, hi: float, fmt: str = ".4f") -> str:
    """``[lo, hi]`` of a P10-P90 prediction interval, the ends ordered.

    Parameters
    ----------
    lo, hi : float
        The interval's ends (either order).
    fmt : str
        Their format spec.

    Returns
    -------
    str
    """
    a, b = sorted((lo, hi))
    return f"[{a:{fmt}}, {b:{fmt}}]"


def predict_file_line(
    path: str, fit: Any, model: str, device: str, tp: int | None = None, config: Any = None
) -> str:
    """What a ``calibrate serving`` fit file set, and a note when it was fitted elsewhere.

    Parameters
    ----------
    path : str
        The fit file's path, as given.
    fit : ServingFit
        The fit read from it (:func:`graphs.serving.planning.serving_fit.read_fit`).
    model, device : str
        Where it is applied.
    tp : int, optional
        The tensor-parallel degree it is applied at (None: not known here).
    config : ModelConfig, optional
        The model as it is applied (its formats against the fit's: a note where they differ;
        None: not compared).

    Returns
    -------
    str
        One line, or two with the note.
    """
    line = f"  --predict-file {path[:200]}: kernels priced by {fit.predict or 'the roofline bound'}"
    if (fit.model, fit.device) != (model, device) or (tp is not None and tp != fit.tp):
        at = f" (tp {tp})" if tp is not None else ""
        line += (
            f"\n  note: the fit was made for {fit.model} on {fit.device} (tp {fit.tp}), applied here to "
            f"{model} on {device}{at}"
        )
    if config is not None:
        from ..planning.serving_fit import dtypes_note, served_dtypes

        note = dtypes_note(fit, served_dtypes(config))
        if note:
            line += f"\n  note: {note}"
    return line


def cost_text(cost: Any) -> str:
    """A report's cost line, or :data:`graphs.serving.planning.cost.NO_PRICE` without a price.

    Parameters
    ----------
    cost : TokenCost or None
        :func:`graphs.serving.planning.cost.sim_cost` and its kin.

    Returns
    -------
    str
    """
    from graphs.serving.planning.cost import NO_PRICE

    return cost.line() if cost is not None else f"cost: {NO_PRICE}"
