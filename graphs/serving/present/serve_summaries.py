"""``serve disagg`` and ``serve plans`` as library calls: a checked request in, a summary that
renders itself out.

:func:`run_disagg` answers a :class:`~graphs.serving.analysis.serve_requests.DisaggRequest`
(:func:`graphs.serving.analysis.disagg.disaggregated`, where the KV transfer dominates
(:func:`~graphs.serving.analysis.disagg.kv_transfer_range`) and the cost of both pools,
:mod:`graphs.serving.planning.cost`) with a :class:`DisaggSummary`; :func:`run_plans` a
:class:`~graphs.serving.analysis.serve_requests.PlansRequest`
(:func:`graphs.serving.analysis.parallel.plan_frontier`, each plan's $/M output tokens) with a
:class:`PlansSummary`. Each has ``to_text()`` (what the command prints), ``to_dict()`` (its
``--json``) and ``to_html()`` (:func:`.html_studies.report_page`).

What stays with the caller: resolving the model, the predictor and the prices (``rates``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from costmodel.report import fmt_time, format_table
from models.config import ModelConfig

from ..analysis.disagg import DisaggReport, disaggregated, kv_transfer_range
from ..analysis.parallel import PlanPoint, plan_frontier
from ..analysis.serve_requests import DisaggRequest, PlansRequest
from ..planning.cost import NO_PRICE, Rates, decode_cost, disagg_cost, missing_cells, prefill_cost
from ..pricing.predictor import Predictor
from .report_text import (
    cost_text,
    plan_unlike,
    plans_unlike,
    predicted_lines,
    served_error_dicts,
    step_error_pairs,
)

__all__ = ["DisaggSummary", "PlansSummary", "run_disagg", "run_plans", "decode_coverage_lines"]

#: the longest prompt :func:`kv_transfer_range` checks (its ``max_prompt``)
_CHECKED = 1 << 20


def decode_coverage_lines(
    predict: str | None,
    config: ModelConfig,
    device: str,
    batch: int,
    ctx: int,
    predictor: Predictor | None,
    unlike: str | None = None,
    served: Sequence[tuple[str, str]] | None = None,
) -> list[str]:
    """With a predictor: what priced the steps, what the decode step at ``(batch, ctx)`` rests on
    (the coverage lines ``simulate`` prints) and the served expected errors of deployments like
    ``device``'s (:func:`.report_text.served_error_lines`); none without one.

    Parameters
    ----------
    predict : str or None
        The corpus framework (None: the bound, no lines).
    config : ModelConfig
        The model.
    device : str
        The decode device.
    batch, ctx : int
        The decode step whose coverage is shown.
    predictor : Predictor or None
        The predictor that priced the steps.
    unlike : str, optional
        What the deployment is that no validated one was (``disaggregated``, ``speculating``).
    served : sequence of (str, str), optional
        The served expected errors to print (:func:`.report_text.step_error_pairs`); None: the TPOT
        and TTFT ones of ``device``.

    Returns
    -------
    list of str
    """
    if not predict:
        return []
    from ..pricing.priced import priced_step
    from ..pricing.protocols import MeteredPointStep

    step = priced_step(config, device, "decode", predictor=predictor)
    assert isinstance(step, MeteredPointStep)  # a predictor that is not the bound meters its seconds
    cov = step.coverage_array(batch, ctx)
    return predicted_lines(
        predict,
        device,
        cov,
        what=f"every step's kernels (coverage: decode at batch {batch}, ctx {ctx})",
        served=step_error_pairs(predict, [device], config.is_moe) if served is None else served,
        unlike=unlike,
    )


def _kv_sentence(span: tuple[int, int] | None) -> str:
    """Where the KV transfer is the largest TTFT term, as :func:`kv_transfer_range` found it."""
    if span is None:
        return f"  the KV transfer is never the largest TTFT term (prompts up to {_CHECKED:,} tokens checked)"
    first, last = span
    upto = "the longest checked" if last >= _CHECKED else "past that, the prefill is larger"
    return f"  the KV transfer is the largest TTFT term for prompts of {first:,} to {last:,} tokens ({upto})"


@dataclass(frozen=True)
class DisaggSummary:
    """One disaggregated deployment and what ``costmodel serve disagg`` prints of it.

    Attributes
    ----------
    request : DisaggRequest
        The checked question.
    result : DisaggReport
        TTFT, TPOT, the pools and the capacity checks.
    span : (int, int) or None
        Prompts for which the KV transfer is the largest TTFT term (None: none).
    cost : TokenCost, mapping or None
        Both pools' cost at the rate, or each device alone (``prefill``, ``decode``).
    predicted : tuple of str
        What priced the steps (with a predictor).
    served : tuple of (str, str)
        With a predictor: ``(device, statement)``, the served expected errors (TPOT of the decode
        device, TTFT of the prefill device; :func:`.report_text.step_error_pairs`).
    """

    request: DisaggRequest
    result: DisaggReport
    span: tuple[int, int] | None = None
    cost: Any = None
    predicted: tuple[str, ...] = ()
    served: tuple[tuple[str, str], ...] = ()

    @property
    def capacity(self) -> dict[str, Any]:
        """Each pool's memory check: ``decode`` and ``prefill``."""
        return {"decode": self.result.decode_capacity, "prefill": self.result.prefill_capacity}

    def to_dict(self) -> dict[str, Any]:
        """What ``serve disagg --json`` prints.

        Returns
        -------
        dict
        """
        span = self.span
        return {
            **self.result.to_dict(),
            "kv_transfer_dominates_from_prompt": span[0] if span else None,
            "kv_transfer_dominates_to_prompt": span[1] if span else None,
            "cost": self.cost,
            **({"served_expected_error": served_error_dicts(self.served)} if self.served else {}),
        }

    def to_text(self) -> str:
        """What ``costmodel serve disagg`` prints.

        Returns
        -------
        str
        """
        r = self.result
        t = r.ttft
        lines = [
            f"{r.model}: prefill on {r.prefill_device}, decode on {r.decode_device} "
            f"(prompt {r.prompt}, output {r.output}, decode batch {r.decode_batch})",
            f"  TTFT {fmt_time(t.ttft_s)} = prefill {t.prefill_s * 1e3:.2f} + KV transfer "
            f"{t.kv_transfer_s * 1e3:.2f} ({100 * t.kv_share_of_ttft:.1f}%) + first decode "
            f"{t.first_decode_s * 1e3:.2f} (transfer {r.overlap.value})",
            f"  TPOT {fmt_time(r.tpot_s)}; decode fits: {r.decode_fits} (max batch {r.decode_max_batch})",
            _kv_sentence(self.span),
        ]
        c = r.colocated
        if r.rate is not None and c is not None:
            lines.append(
                f"  at {r.rate} req/s: {r.prefill_devices} prefill + {r.decode_devices} decode devices, "
                + (
                    f"{r.energy_per_token_j:.3f} J/output token (busy at TDP: prefill on one, decode steps "
                    "on the other), "
                    if r.energy_per_token_j is not None
                    else "energy not priced (a device without a TDP figure), "
                )
                + f"{r.device_hours_per_million_tokens:.3f} "
                "device-h per M output tokens"
            )
            lines.append(
                f"  colocated on {c.devices} {r.decode_device}: TPOT {fmt_time(c.tpot_s)} "
                f"(prefill takes {100 * c.prefill_share:.0f}% of each device), TTFT {fmt_time(c.ttft_s)} "
                "(its prefill, which samples the first token)"
            )
        if r.rate is not None:
            lines.append(f"  {cost_text(self.cost)}")
        else:
            lines += [f"  {pool} device: {cost_text(pc)}" for pool, pc in self.cost.items()]
            lines.append("  (--rate sizes both pools and prices every device of them)")
        return "\n".join(lines + list(self.predicted))

    def to_html(self, command: str = "") -> str:
        """A page (:func:`graphs.serving.present.html_studies.report_page`): the TTFT's terms, the
        printed lines.

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from costmodel.html_figures import hbar_figure

        from .html_studies import report_page

        r = self.result
        t = r.ttft
        terms = {"prefill": t.prefill_s, "KV transfer": t.kv_transfer_s, "first decode": t.first_decode_s}
        figure = hbar_figure(
            list(terms),
            [v * 1e3 for v in terms.values()],
            [fmt_time(v) for v in terms.values()],
            title=f"TTFT {fmt_time(t.ttft_s)}: its terms (transfer {r.overlap.value})",
            x_title="ms",
        )
        return report_page(
            f"{r.model}: prefill on {r.prefill_device}, decode on {r.decode_device}",
            self.to_text(),
            command=command,
            headline={"TTFT": fmt_time(t.ttft_s), "TPOT": fmt_time(r.tpot_s)},
            figures=[figure],
        )


def run_disagg(
    request: DisaggRequest,
    config: ModelConfig,
    *,
    rates: Mapping[str, Rates],
    predictor: Predictor | None = None,
) -> DisaggSummary:
    """Answer ``request`` for ``config`` (module doc). A point that does not fit its devices'
    memory (unless ``request.ignore_capacity``) is returned with its capacity checks only.

    Parameters
    ----------
    request : DisaggRequest
        The checked question.
    config : ModelConfig
        The model.
    rates : mapping of str to Rates
        Each device's prices (:func:`graphs.serving.planning.cost.device_rates`), by the name
        the request gives.
    predictor : Predictor, optional
        Prices every step (None: the bound).

    Returns
    -------
    DisaggSummary
    """
    req = request
    r = disaggregated(
        config,
        req.prefill_device,
        req.decode_device,
        prompt=req.prompt,
        output=req.output,
        decode_batch=req.decode_batch,
        link_bandwidth=req.link_bandwidth,
        link_latency=req.link_latency,
        rate=req.rate,
        overlap=req.overlap,
        predictor=predictor,
        allow_long_context=req.allow_long_context,
    )
    refused = any(c is not None and not c.fits for c in (r.decode_capacity, r.prefill_capacity))
    if refused and not req.ignore_capacity:
        return DisaggSummary(req, r)
    span = kv_transfer_range(
        config,
        req.prefill_device,
        req.decode_device,
        link_bandwidth=req.link_bandwidth,
        link_latency=req.link_latency,
        decode_batch=req.decode_batch,
        overlap=req.overlap,
        predictor=predictor,
    )
    pf_rates, dec_rates = rates[req.prefill_device], rates[req.decode_device]
    cost: Any
    if r.rate is not None:  # every device of both pools, over the tokens the rate brings
        cost = disagg_cost(r, pf_rates, dec_rates)
    else:  # no pools sized: each device alone, 100 % busy
        cost = {
            "prefill": prefill_cost(pf_rates, devices=1, prompt=r.prompt, prefill_s=r.ttft.prefill_s),
            "decode": decode_cost(dec_rates, devices=1, batch=r.decode_batch, tpot_s=r.tpot_s),
        }
    ctx = r.prompt + r.output // 2 + 1  # the decode step halfway through the output
    served: tuple[tuple[str, str], ...] = ()
    if req.predict:  # the TPOT is the decode device's, the TTFT the prefill device's
        served = step_error_pairs(req.predict, [req.decode_device], config.is_moe, ("TPOT",))
        served += step_error_pairs(req.predict, [req.prefill_device], config.is_moe, ("TTFT",))
    predicted = decode_coverage_lines(
        req.predict, config, req.decode_device, r.decode_batch, ctx, predictor, "disaggregated", served
    )
    return DisaggSummary(req, r, span, cost, tuple(predicted), served)


@dataclass(frozen=True)
class PlansSummary:
    """The plans compared and what ``costmodel serve plans`` prints of them.

    Attributes
    ----------
    request : PlansRequest
        The checked comparison.
    rows : tuple of dict
        Each evaluated plan: its report's fields, $/M output tokens, J/token, on the frontier
        or not, and with a skewed routing its step over the same plan's uniform one.
    errors : tuple of PlanPoint
        The plans that are invalid or do not fit, with why.
    unpriced : tuple of str
        Devices without a price.
    balanced : bool
        The rows hold ``x_balanced`` (a skewed routing, compared with uniform).
    expected_errors : tuple of (str, str)
        With a predictor: ``(device, statement)``, the served expected errors of deployments like
        each device's (:func:`.report_text.step_error_pairs`).
    """

    request: PlansRequest
    rows: tuple[dict[str, Any], ...]
    errors: tuple[PlanPoint, ...] = ()
    unpriced: tuple[str, ...] = ()
    balanced: bool = False
    expected_errors: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> list[dict[str, Any]]:
        """What ``serve plans --json`` prints: one row per point (a list, as it always has), the
        invalid ones with their ``error``. With a predictor, each row also carries its device's
        ``served_expected_error`` (:func:`.report_text.served_error_dicts`) and, for a plan no
        validated deployment was like, ``served_unlike`` (:func:`.report_text.plan_unlike`).

        Returns
        -------
        list of dict
        """
        errors = [
            {"device": p.device, "plan": p.plan, "batch": p.batch, "error": p.error} for p in self.errors
        ]
        if not self.expected_errors:
            return list(self.rows) + errors
        rows = []
        for row in self.rows:
            mine = [pair for pair in self.expected_errors if pair[0] == row["device"]]
            unlike = plan_unlike(row["pp"], row["ep"], row["microbatches"])
            rows.append(
                {
                    **row,
                    "served_expected_error": served_error_dicts(mine),
                    **({"served_unlike": unlike} if unlike else {}),
                }
            )
        return rows + errors

    def group_notes(self) -> tuple[str, ...]:
        """One note for each group of the rows that spans scale-up domains (a tp group, or the
        ``tp x ep`` devices an expert all-to-all spans), whose collectives are priced on the
        scale-out link (:meth:`costmodel.hardware.Hardware.group_notes`), as ``decode`` says it.

        Returns
        -------
        tuple of str
        """
        from costmodel.hardware import get_device

        notes: dict[str, None] = {}
        for r in self.rows:
            hw = get_device(r["device"])
            for n in (r["tp"], r["tp"] * r["ep"] if r["ep"] > 1 else 0):
                for note in hw.group_notes(n) if n else ():
                    notes.setdefault(note)
        return tuple(notes)

    def to_text(self) -> str:
        """What ``costmodel serve plans`` prints.

        Returns
        -------
        str
        """
        req = self.request
        skewed = self.balanced
        text = format_table(  # no TDP, no price: words in their cells (missing_cells), not nan
            *missing_cells(
                list(self.rows),
                (
                    ("device", "device", "s"),
                    ("plan", "plan", "s"),
                    ("batch", "batch", "s"),
                    ("devices", "devices", "s"),
                    ("tokens_per_s_per_user", "tok/s/user", ".1f"),
                    ("tokens_per_s_per_device", "tok/s/device", ".1f"),
                    ("energy_per_token_j", "J/token", ".3f"),
                    ("device_hours_per_million_tokens", "dev-h/M tok", ".3f"),
                    ("usd_per_m_output", "$/M out 100% busy", ".4g"),
                    *((("x_balanced", "x balanced", ".3f"),) if skewed else ()),
                    ("front", "frontier", "s"),
                ),
            )
        )
        if skewed:
            text += f"\n  {self._routing_line()}"
        for note in self.group_notes():
            text += f"\n  note: {note}"
        for line in self._missing_lines():
            text += f"\n  {line}"
        for pt in self.errors:
            text += f"\n  skipped {pt.device} {pt.plan} batch {pt.batch}: {pt.error}"
        if req.predict:
            text += "\n" + "\n".join(self._predicted())
        return text

    def notes(self) -> list[str]:
        """What the text says beside its table that no row holds: the skewed routing's meaning, a
        group across scale-up domains, a device without a price or a TDP, and with a predictor
        what priced the steps (each device's expected errors are its rows'
        ``served_expected_error``). The ``--json`` list has no place for them: the command line
        says them on stderr.

        Returns
        -------
        list of str
        """
        out = [self._routing_line()] if self.balanced else []
        out += [*self.group_notes(), *self._missing_lines()]
        if self.request.predict:  # the lines about every row, not one device's (those are in the rows)
            out += [line.strip() for line in self._predicted() if not line.startswith("    ")]
        return out

    def _routing_line(self) -> str:
        """What a skewed routing's rows are (``x balanced``)."""
        req = self.request
        return (
            f"routing {req.routing.label}: step of the busiest EP rank; 'x balanced' is the step over the "
            "same plan with uniform routing (its busiest rank too: above the mean at a finite batch)"
            + ("; replicas' extra weights are not in the memory check" if req.routing.replicate else "")
        )

    def _missing_lines(self) -> list[str]:
        """A device without a price, or without a TDP: why its cells say so."""
        out = [f"$/M out for {dev}: {NO_PRICE}" for dev in self.unpriced]
        out += [
            f"J/token for {dev}: no power figure (TDP) in the catalog"
            for dev in sorted({r["device"] for r in self.rows if math.isnan(r["energy_per_token_j"])})
        ]
        return out

    def _predicted(self) -> list[str]:
        """With a predictor, what priced every plan's steps and the served expected errors."""
        req = self.request
        return predicted_lines(
            str(req.predict),
            ",".join(req.devices),
            None,
            what="every plan's decode kernels",
            served=self.expected_errors,
            unlike=plans_unlike(self.rows),
        )

    def to_html(self, command: str = "") -> str:
        """A page (:func:`graphs.serving.present.html_studies.report_page`): every plan's tokens/s
        per user against per device, the printed lines, the rows.

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from costmodel.html import plain, require_plotly
        from costmodel.html_figures import styled

        from .html_studies import report_page

        go = require_plotly()
        fig = go.Figure()
        for dev in sorted({r["device"] for r in self.rows}):
            pts = [r for r in self.rows if r["device"] == dev]
            fig.add_trace(
                go.Scatter(
                    x=[r["tokens_per_s_per_device"] for r in pts],
                    y=[r["tokens_per_s_per_user"] for r in pts],
                    mode="markers",
                    name=plain(dev),
                    text=[
                        plain(f"{r['plan']}, batch {r['batch']}{' (frontier)' if r['pareto'] else ''}")
                        for r in pts
                    ],
                    hovertemplate="%{text}<extra></extra>",
                )
            )
        # the frontier the headline counts and the table stars, drawn over the points
        front = sorted((r for r in self.rows if r["pareto"]), key=lambda r: r["tokens_per_s_per_device"])
        fig.add_trace(
            go.Scatter(
                x=[r["tokens_per_s_per_device"] for r in front],
                y=[r["tokens_per_s_per_user"] for r in front],
                mode="lines+markers",
                name="frontier",
                line={"color": "crimson", "width": 1},
                marker={"symbol": "circle-open", "size": 12, "color": "crimson"},
                text=[plain(f"{r['device']} {r['plan']}, batch {r['batch']}") for r in front],
                hovertemplate="frontier: %{text}<extra></extra>",
            )
        )
        req = self.request
        model = self.rows[0]["model"] if self.rows else ""
        where = f"{model} on {', '.join(req.devices)}, ctx {req.ctx}".strip()
        styled(
            fig,
            f"plans: tokens/s per user against tokens/s per device ({where})",
            "tokens/s per device",
            "tokens/s per user",
        )
        return report_page(
            f"parallel plans: {where}",
            self.to_text(),
            command=command,
            headline={"frontier": f"{len(front)} of {len(self.rows)} points"},
            figures=[fig],
            tables=[("plans", list(self.rows))],
        )


def run_plans(
    request: PlansRequest,
    config: ModelConfig,
    *,
    rates: Mapping[str, Rates],
    predictor: Predictor | None = None,
) -> PlansSummary:
    """Compare ``request``'s plans for ``config`` (module doc); with a skewed routing, each plan's
    step over the same plan's with uniform routing (what the skew costs).

    Parameters
    ----------
    request : PlansRequest
        The checked comparison.
    config : ModelConfig
        The model.
    rates : mapping of str to Rates
        Each device's prices, by its catalog name.
    predictor : Predictor, optional
        Prices every step (None: the bound).

    Returns
    -------
    PlansSummary
    """
    req = request
    grid: dict[str, Any] = {"batches": list(req.batches), "ctx": req.ctx, "plans": list(req.plans)}
    devices = list(req.devices)
    points = plan_frontier(config, devices, routing=req.routing, predictor=predictor, **grid)
    balanced: dict[tuple[str, str, int], float] = {}
    if req.skewed:  # the same plans, uniform: what skew costs
        for pt in plan_frontier(config, devices, predictor=predictor, **grid):
            if pt.report is not None:
                balanced[(pt.device, pt.plan, pt.batch)] = pt.report.step_s

    def usd_out(rep: Any) -> float:
        """USD per million output tokens, the plan 100 % busy decoding at its batch
        (:func:`graphs.serving.planning.cost.decode_cost`; nan without a price: JSON null, and a note)."""
        c = decode_cost(rates[rep.device], devices=rep.devices, batch=rep.batch, tpot_s=rep.step_s)
        return c.usd_per_m_output if c is not None and c.usd_per_m_output is not None else float("nan")

    rows = tuple(
        {
            **pt.report.to_dict(),
            "usd_per_m_output": usd_out(pt.report),
            **(
                {"x_balanced": pt.report.step_s / balanced[(pt.device, pt.plan, pt.batch)]}
                if balanced
                else {}
            ),
            # nan without a TDP (JSON null, and a note), as the cost without a price
            "energy_per_token_j": float("nan") if pt.energy_per_token_j is None else pt.energy_per_token_j,
            "pareto": pt.pareto,
            "front": "*" if pt.pareto else "",
        }
        for pt in points
        if pt.report is not None
    )
    unpriced = tuple(sorted({r.device for r in rates.values() if r.price_usd_per_hour is None}))
    errors = tuple(pt for pt in points if pt.error is not None)
    served: tuple[tuple[str, str], ...] = ()
    if req.predict and predictor is not None and not predictor.is_bound:
        served = step_error_pairs(req.predict, devices, config.is_moe)
    return PlansSummary(req, rows, errors, unpriced, bool(balanced), served)
