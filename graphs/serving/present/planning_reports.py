"""``search`` and ``size`` as library calls: a checked request in, a report that renders itself out.

:func:`run_search` runs a :class:`~graphs.serving.planning.search_request.SearchRequest` into a
:class:`SearchReport`; :func:`run_size` a :class:`~graphs.serving.planning.size_request.SizeRequest`
into a :class:`SizeReport`. Each report has ``to_text()`` (what the command prints), ``to_dict()``
(its ``--json``) and ``to_html()`` (the page ``--html`` writes: :func:`.html_studies.search_page`,
:func:`.html_studies.report_page`). They sit in ``present`` because a page is drawn here, above the
planning wing that computes the results.

What stays with the caller: resolving the model, the predictor and the executor, ``--csv``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..planning.design_search import SearchResult
from ..planning.search_request import SearchRequest
from ..planning.size_request import SizeRequest
from ..planning.sizing import SizingResult
from .report_text import (
    plans_unlike,
    predicted_lines,
    served_error_dicts,
    served_error_lines,
    step_error_pairs,
)

__all__ = ["SearchReport", "SizeReport", "run_search", "run_size"]

#: ``progress(done, total)``
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class SearchReport:
    """One design search and what ``costmodel search`` prints of it.

    Attributes
    ----------
    request : SearchRequest
        The checked design space.
    result : SearchResult
        Its points and Pareto frontier.
    top : int
        Frontier rows the text shows (0: all).
    expected_errors : tuple of (str, str)
        With ``--predict``: ``(device, statement)``, the expected error of the served TPOT and
        light-load TTFT on deployments like each frontier device's
        (:func:`graphs.serving.sim.served_step.step_expected_errors`).
    """

    request: SearchRequest
    result: SearchResult
    top: int = 20
    expected_errors: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """What ``search --json`` prints: the result's fields.

        Returns
        -------
        dict
        """
        doc = self.result.to_dict()
        verdict = self.verdict()
        if verdict:  # what the text says under an empty frontier: a program must not lose it
            doc["notes"] = verdict
        if self.expected_errors:
            doc["served_expected_error"] = served_error_dicts(self.expected_errors)
            unlike = plans_unlike(self.result.frontier)
            if unlike:
                doc["served_unlike"] = f"no validated deployment was {unlike}"
        return doc

    def to_text(self) -> str:
        """What ``costmodel search`` prints: the frontier, with ``predict``'s lines.

        Returns
        -------
        str
        """
        res, req = self.result, self.request
        predicted: list[str] = []
        if res.coverage is not None:
            what = "every step's kernels" + (
                ", each at the pessimistic end (P90) of its held-out error"
                if req.rank_by == "pessimistic"
                else ""
            )
            predicted = predicted_lines(str(req.predict), ",".join(req.devices), res.coverage, what=what)
            predicted.append("  (coverage of the frontier's decode steps)")
        predicted += served_error_lines(self.expected_errors, plans_unlike(self.result.frontier))
        text = res.to_text(top=self.top, predicted=predicted, spec=req.spec())
        return "\n".join([text, *(f"  {line}" for line in self.verdict())])

    def verdict(self) -> list[str]:
        """Why the frontier is empty (none when it is not): :meth:`SearchResult.verdict` at the
        request's SLOs.

        Returns
        -------
        list of str
        """
        return self.result.verdict(self.request.slo_ttft, self.request.slo_tpot)

    def to_html(self, command: str = "") -> str:
        """The ``search --html`` page (:func:`graphs.serving.present.html_studies.search_page`),
        with the lines :meth:`to_text` prints.

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page (needs the ``html`` extra: plotly).
        """
        from .html_studies import search_page, with_notes

        return search_page(self.result, command=command, text=with_notes(self.to_text()))


def run_search(
    request: SearchRequest,
    config: Any,
    *,
    predictor: Any = None,
    client: Any = None,
    progress: Progress | None = None,
    top: int = 20,
) -> SearchReport:
    """Search ``config`` over ``request``'s design space (:meth:`SearchRequest.run`).

    Parameters
    ----------
    request : SearchRequest
        The checked design space.
    config : ModelConfig
        The model.
    predictor : Predictor, optional
        Prices every step (None: the bound).
    client : dask.distributed.Client, optional
        Runs the grid's blocks on its workers.
    progress : callable, optional
        ``progress(done, total)`` as blocks complete.
    top : int
        Frontier rows the text shows (0: all).

    Returns
    -------
    SearchReport
    """
    res = request.run(config, predictor=predictor, client=client, progress=progress)
    errors: tuple[tuple[str, str], ...] = ()
    if res.coverage is not None and request.predict:  # a predicted search: its served errors
        errors = step_error_pairs(
            str(request.predict), [str(r["device"]) for r in res.frontier], config.is_moe
        )
    return SearchReport(request, res, top, errors)


@dataclass(frozen=True)
class SizeReport:
    """One sizing and what ``costmodel size`` prints of it.

    Attributes
    ----------
    request : SizeRequest
        The checked question (rate, SLOs, devices, engine ...).
    result : SizingResult
        The winner, the runners-up and what was simulated.
    """

    request: SizeRequest
    result: SizingResult

    def to_dict(self) -> dict[str, Any]:
        """What ``size --json`` prints: the sizing and the engine every candidate ran.

        Returns
        -------
        dict
        """
        return {**self.result.to_dict(), "engine": self.request.engine.to_dict()}

    def to_text(self) -> str:
        """What ``costmodel size`` prints.

        Returns
        -------
        str
        """
        return self.result.to_text(engine=self.request.engine, max_simulations=self.request.max_simulations)

    def to_html(self, command: str = "") -> str:
        """The ``size --html`` page (:func:`graphs.serving.present.html_studies.report_page`): each
        simulated candidate's latencies at the percentile as shares of the SLOs, the printed lines, the candidates' table.

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

        from .html_studies import report_page, with_notes

        res = self.result
        winner = (
            res.winner.line(res.slo_ttft, res.slo_tpot) if res.winner is not None else "none meets the SLOs"
        )
        # each candidate's latency at the request's percentile over its SLO, in %: 100 is at the SLO
        shares = [
            (100 * d.ttft_at_percentile_s / res.slo_ttft, 100 * d.tpot_at_percentile_s / res.slo_tpot)
            for d in res.candidates
        ]
        figures = []
        if res.candidates:  # none simulated (all pruned by the bounds): no empty axes
            fig = hbar_figure(
                [d.label for d in res.candidates],
                [max(s) for s in shares],
                [
                    f"TTFT {t:.0f}%, TPOT {p:.0f}% of its SLO"
                    if d.has_tpot
                    else f"TTFT {t:.0f}% of its SLO, no TPOT"
                    for d, (t, p) in zip(res.candidates, shares, strict=True)
                ],
                title=(
                    f"simulated candidates: P{res.percentile:g} latency as a share of its SLO "
                    "(dotted line: at it; red: misses the SLOs)"
                ),
                x_title="the larger of the two shares (%)",
            )
            # a candidate that misses stands out (the bars run bottom up: the first label on top)
            fig.data[0].marker.color = [_MEETS if d.meets else _MISSES for d in res.candidates][::-1]
            fig.add_vline(x=100, line_dash="dot", line_color="gray", layer="below")
            figures.append(fig)
        # in the words and units the text's lines use (Deployment.line), not the fields' names
        rows = [d.cells(res.slo_ttft, res.slo_tpot) for d in res.candidates]
        return report_page(
            f"{res.model}: sizing at {res.rate:g} requests/s",
            with_notes(self.to_text()),
            command=command,
            headline={"winner": winner, "simulated": str(res.simulated)},
            figures=figures,
            tables=[("simulated candidates", rows)],
        )


#: the size page's bar colours: a candidate that meets the SLOs, one that misses them
_MEETS, _MISSES = "#636efa", "#ef553b"


def run_size(
    request: SizeRequest,
    config: Any,
    *,
    executor: Any = None,
    lookahead: int = 1,
    progress: Progress | None = None,
) -> SizeReport:
    """Size ``request``'s deployment of ``config`` (:meth:`SizeRequest.run`), each candidate's run
    kept as a card (a question asked again simulates only what is new).

    Parameters
    ----------
    request : SizeRequest
        The checked question.
    config : ModelConfig
        The model.
    executor : Executor or dask.distributed.Client, optional
        Runs the candidates' simulations.
    lookahead : int
        Candidates simulated at once.
    progress : callable, optional
        ``progress(done, total)`` as candidates finish.

    Returns
    -------
    SizeReport
    """
    res = request.run(config, executor=executor, lookahead=lookahead, progress=progress, run_cards=True)
    return SizeReport(request, res)
