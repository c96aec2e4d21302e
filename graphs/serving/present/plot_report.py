"""``plot`` as a library call: a checked request in, the figure written, a report out.

:func:`run_plot` draws a :class:`~graphs.serving.analysis.plot_request.PlotRequest`'s figure
(:mod:`costmodel.plots`, the plot extra) to a PNG or SVG file and returns a :class:`PlotReport`
with ``to_text()`` (what ``costmodel plot`` prints), ``to_dict()`` and ``to_html()`` (a page holding
the figure itself, :func:`.html_studies.report_page`). Every figure is of the model on the device
(``measure`` times this machine instead) and its title names them.

What stays with the caller: resolving the model, checking the output path.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costmodel import plots
from costmodel.errors import CostModelError
from costmodel.hardware import get_device
from models.config import ModelConfig

from ..analysis.plot_request import PlotRequest
from ..analysis.sweeps import sweep
from ..step.ledger_fit import capacity

__all__ = ["PlotReport", "run_plot", "BATCHES"]

#: the decode batches the frontier and batch-sweep figures evaluate (the frontier all but the last)
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
#: the ledger figure's batches
_LEDGER_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass(frozen=True)
class PlotReport:
    """One figure written.

    Attributes
    ----------
    request : PlotRequest
        The checked request.
    path : str
        Where the figure was written.
    title : str
        The figure's title.
    """

    request: PlotRequest
    path: str
    title: str

    def to_dict(self) -> dict[str, Any]:
        """The figure's kind, file and title.

        Returns
        -------
        dict
        """
        return {"kind": self.request.kind, "path": self.path, "title": self.title}

    def to_text(self) -> str:
        """What ``costmodel plot`` prints.

        Returns
        -------
        str
        """
        return f"wrote {self.path}"

    def to_html(self, command: str = "") -> str:
        """A page holding the figure written (:func:`graphs.serving.present.html_studies.report_page`).

        Parameters
        ----------
        command : str
            The command line shown in the page's header.

        Returns
        -------
        str
            A self-contained HTML page: the figure as an image, no plotly figure (so neither
            plotly.js inlined nor the ``html`` extra needed).
        """
        from .html_studies import report_page

        data = Path(self.path).read_bytes()
        svg = self.path.lower().endswith(".svg")
        mime = "image/svg+xml" if svg else f"image/{Path(self.path).suffix.lstrip('.').lower()}"
        img = f'<img alt="figure" src="data:{mime};base64,{base64.b64encode(data).decode()}">'
        return report_page(
            self.title, self.to_text(), command=command, headline={"figure": self.path}, figures=[img]
        )


def run_plot(request: PlotRequest, config: ModelConfig | None, path: str) -> PlotReport:
    """Draw ``request``'s figure of ``config`` to ``path`` (module doc).

    Parameters
    ----------
    request : PlotRequest
        The checked request.
    config : ModelConfig or None
        The model (None with ``measure``: this machine is timed).
    path : str
        The PNG or SVG file written (its suffix picks the format).

    Returns
    -------
    PlotReport

    Raises
    ------
    CostModelError
        When no batch of the batch-sweep fits the device.
    """
    req = request
    if req.measure:
        from costmodel.measure.microbench import batch_sweep
        from costmodel.measure.probe import probe

        hw = probe(small=True, use_torch=False).hardware()
        measured = (
            f"batch sweep: numpy GEMM [B, 2048] x [2048, 2048] fp32 measured on this machine ({hw.name})"
        )
        plots.batch_sweep_plot(batch_sweep(hw, d=2048), path, title=measured)
        return PlotReport(req, path, measured)
    if config is None:
        raise CostModelError(f"plot {req.kind} needs a model (config)")
    hw = get_device(req.device_name)
    phase, batch, seq_len, ctx_len, tp = req.step()
    # the step's own length: a prefill's graph holds its prompt (--seq; its KV is the prompt, no
    # --ctx), a decode's its ctx; the roofline and headroom titles name that one only
    seq = seq_len if phase == "prefill" else None
    ctx = ctx_len if phase == "decode" else None

    def title(what: str, **at: Any) -> str:
        return plots.plot_title(what, model=config.name, device=hw.name, tp=tp, **at)

    if req.kind in ("roofline", "headroom"):
        from costmodel.graph import classify_graph
        from graphs.blocks.transformer import build_model

        precision = req.precision_name
        if hw.peak("tensor", precision) is None:  # refused before the graph is built
            raise CostModelError(
                f"--precision {(req.precision or precision)[:40]!r}: {hw.name} has no tensor roof of that precision; "
                f"allowed: {', '.join(hw.precisions('tensor')) or 'none'}"
            )

        from ..step.compiled import device_dims

        g = build_model(
            config,
            phase,
            batch=batch,
            seq=seq_len,
            ctx=ctx_len,
            tp=tp,
            **device_dims(config, hw, tp),
        )
        rows = classify_graph(g, hw)
        where: dict[str, Any] = {"phase": phase, "batch": batch, "seq": seq, "ctx": ctx}
        name = title(f"{req.kind} ({precision})", **where)
        if req.kind == "roofline":
            plots.roofline_plot(rows, hw, path, precision=precision, title=name)
        else:
            plots.headroom_plot(path, rows=rows, hw=hw, precision=precision, title=name)
    elif req.kind == "ledger":
        terms = {b: capacity(config, hw, batch=b, ctx=ctx_len, tp=tp).terms for b in _LEDGER_BATCHES}
        name = title("memory ledger", ctx=ctx_len)
        plots.ledger_plot(terms, float(hw.memory_bytes()), path, title=name)
    elif req.kind == "frontier":
        res = sweep(config, devices=[hw.name], batches=list(BATCHES[:-1]), ctxs=[1024, 4096, 16384], tp=tp)
        name = title("decode frontier, ctx 1024, 4096, 16384")
        plots.frontier_plot(res.rows(), path, title=name)
    else:  # the model's decode step against batch, at the batches that fit
        res = sweep(config, devices=[hw.name], batches=list(BATCHES), ctxs=[ctx_len], tp=tp)
        points = [{"shape": {"B": r["batch"]}, "predicted_s": r["tpot_s"]} for r in res.rows() if r["fits"]]
        if not points:
            raise CostModelError(
                f"{config.name} at ctx {ctx_len} does not fit one {hw.name} at tp {tp} at any batch"
            )
        name = title("decode batch sweep (TPOT bound, batches that fit)", ctx=ctx_len)
        plots.batch_sweep_plot(points, path, title=name)
    return PlotReport(req, path, name)
