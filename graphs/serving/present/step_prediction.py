"""What ``decode`` and ``prefill`` print beside the bound with ``--predict`` and ``--predict-file``.

:func:`predict_step_report` prices one step with a framework's measured kernels
(:func:`graphs.serving.pricing.predict.predict_step`), its P10-P90 interval (:func:`step_interval`)
and, with a ``calibrate serving`` fit, the fit's engine overheads on that step
(:class:`FittedStep`); the :class:`StepPrediction` it returns renders the lines printed after the
step's summary (``to_text``) and the ``"prediction"`` / ``"engine_overheads"`` entries of its
``--json`` (``to_dict``). The ``--html`` page draws the same object's prediction beside the bound
(:meth:`graphs.serving.present.phase_summary.DecodeSummary.to_html`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from costmodel.errors import CostModelError

from ..pricing.overheads import scaled_kernels_s
from .report_text import coverage_lines, predict_file_line

if TYPE_CHECKING:
    from models.config import ModelConfig

    from ..planning.serving_fit import ServingFit
    from ..pricing.predict import Prediction
    from ..sim.served_step import ServedStep

__all__ = ["FittedStep", "StepPrediction", "predict_step_report", "prediction_label", "step_interval"]


def _what(phase: str) -> str:
    """The latency a step of ``phase`` is: a decode step is a TPOT, a prefill step a TTFT."""
    return "TPOT" if phase == "decode" else "TTFT"


def prediction_label(p: Any) -> str:
    """How a prediction was priced: ``calibrated`` only when kernels were priced from the device's
    own measurements.

    Parameters
    ----------
    p : Prediction
        A :func:`graphs.serving.pricing.predict.predict_step` result (``calibrated``, ``coverage``,
        ``device``).

    Returns
    -------
    str
    """
    if p.calibrated and p.coverage is not None and p.coverage.measured_s == 0:
        return f"calibrated on {p.device}'s measurements of neighbouring kernels only"
    if p.calibrated:
        return "calibrated"
    return f"predicted, not calibrated: no kernel measured on {p.device} prices it"


def step_interval(
    config: Any,
    device: str,
    phase: str,
    framework: str,
    *,
    tp: int,
    point: tuple[int, int],
    fp8_scales: str = "dynamic",
) -> tuple[float, float]:
    """One step's time (s) at the optimistic and pessimistic ends of its prediction interval
    (:meth:`graphs.serving.pricing.predictor.Predictor.interval`, each kernel clamped to its bound).

    Parameters
    ----------
    config : ModelConfig or str
        The model.
    device : str
        The device.
    phase : str
        ``"decode"`` or ``"prefill"``.
    framework : str
        The engine whose measured kernels price the step.
    tp : int
        Tensor-parallel degree.
    point : tuple of int
        (batch, ctx) for decode, (batch, seq) for prefill.
    fp8_scales : str
        How FP8 activations are scaled (``dynamic`` or ``static``).

    Returns
    -------
    tuple of float
        (P10, P90) step time, seconds.
    """
    from ..pricing.predictor import Predictor  # numpy and the corpus: only when a step is priced
    from ..pricing.priced import priced_step

    lo, hi = Predictor.of(framework, fp8_scales=fp8_scales).interval()
    return tuple(  # type: ignore[return-value]
        priced_step(config, device, phase, tp=tp, predictor=p).step(*point) for p in (lo, hi)
    )


@dataclass(frozen=True)
class FittedStep:
    """One step with a ``calibrate serving`` fit's engine overheads:
    ``max(kernel_scale x kernels, bound) + a + b B + c T`` (:func:`scaled_kernels_s`: never below
    the step's roofline; ``a + b B + c T`` is :meth:`EngineOverheads.cpu_s` with ``B`` sequences and
    ``T`` tokens in the step).

    Attributes
    ----------
    path : str
        The fit file, as given.
    fit : ServingFit
        The fit read from it.
    phase : str
        ``"decode"`` or ``"prefill"``.
    batch, tokens : int
        Sequences and tokens in the step (decode: one token per sequence; prefill: batch x seq).
    kernels_s, bound_s : float
        The step's kernels (predicted, or the bound for a fit made on the bound) and its roofline
        bound, seconds.
    model, device : str
        Where the fit is applied (its note says when it was made elsewhere).
    tp : int
        The tensor-parallel degree it is applied at (said when the fit's differs).
    config : ModelConfig, optional
        The model as applied: its formats against the fit's (said where they differ).
    """

    path: str
    fit: ServingFit
    phase: str
    batch: int
    tokens: int
    kernels_s: float
    bound_s: float
    model: str
    device: str
    tp: int = 1
    config: Any = None

    def to_dict(self) -> dict[str, Any]:
        """The ``"engine_overheads"`` entry of ``--json``: kernels, scale, floor, CPU and step (s).

        Returns
        -------
        dict
        """
        ov = self.fit.overheads
        cpu = ov.cpu_s(self.batch, self.tokens)
        scaled, floored = scaled_kernels_s(ov.kernel_scale, self.kernels_s, self.bound_s)
        return {
            "file": self.path,
            "kernels_s": self.kernels_s,
            "kernel_scale": ov.kernel_scale,
            "bound_s": self.bound_s,
            "scaled_kernels_s": scaled,
            "floored_at_bound": floored,
            "cpu_s": cpu,
            "step_s": scaled + cpu,
            "request_s": ov.request_s,
            "output_token_s": ov.output_token_s,
        }

    def to_text(self) -> str:
        """The lines printed under ``--predict-file``: the fit, its overheads and the step they make.

        Returns
        -------
        str
        """
        d, ov = self.to_dict(), self.fit.overheads
        out = [
            f"{_what(self.phase)} with the engine overheads of --predict-file {self.path[:200]}:",
            predict_file_line(self.path, self.fit, self.model, self.device, self.tp, self.config),
            f"  {ov.summary()}",
        ]
        extra = (
            f" + {ov.output_token_s * 1e3:.4g} ms per output token as the client sees it"
            if self.phase == "decode"
            else f" + {(ov.request_s + ov.output_token_s) * 1e3:.4g} ms request path"
        )
        floor = (
            f" = {d['kernel_scale'] * self.kernels_s * 1e3:.3f} ms, held at the roofline bound {self.bound_s * 1e3:.3f} ms"
            if d["floored_at_bound"]
            else ""
        )
        out.append(
            f"  {d['kernel_scale']:.4g} x {self.kernels_s * 1e3:.3f} ms kernels{floor} + {d['cpu_s'] * 1e3:.4g} ms CPU = "
            f"{d['step_s'] * 1e3:.3f} ms per step{extra}"
        )
        if d["floored_at_bound"]:
            out.append(
                f"  note: kernel_scale {d['kernel_scale']:.4g} would price the kernels below their roofline "
                "bound; physics is a floor, so the bound prices them"
            )
        return "\n".join(out)


@dataclass(frozen=True)
class StepPrediction:
    """One step priced with measured kernels and/or a fit's engine overheads.

    Attributes
    ----------
    phase : str
        ``"decode"`` or ``"prefill"``.
    prediction : Prediction, optional
        The calibrated prediction (None: a fit made on the bound, which predicts no kernel).
    interval_s : tuple of float, optional
        Its (P10, P90) step time, seconds.
    fitted : FittedStep, optional
        The fit's engine overheads on the step (None without a fit).
    served : ServedStep, optional
        The step as the framework's engine profile serves it, with its calibrated band and
        expected error (:mod:`graphs.serving.sim.served_step`; None: not asked, or a fit's
        overheads price it instead).
    """

    phase: str
    prediction: Prediction | None = None
    interval_s: tuple[float, float] | None = None
    fitted: FittedStep | None = None
    served: ServedStep | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``"prediction"`` (with its ``"interval_s"``) and ``"engine_overheads"`` entries that
        ``--json`` adds to the step's summary.

        Returns
        -------
        dict
        """
        doc: dict[str, Any] = {}
        if self.prediction is not None:
            # a step priced without its interval (model analyze) has none
            span = {} if self.interval_s is None else {"interval_s": list(self.interval_s)}
            doc["prediction"] = {**self.prediction.to_dict(), **span}
        if self.fitted is not None:
            doc["engine_overheads"] = self.fitted.to_dict()
        if self.served is not None:
            doc["served"] = self.served.to_dict()
        return doc

    def brief_text(self) -> str:
        """The prediction in one line and what it rests on, then the step as served (when priced
        so): what ``model analyze`` prints after the step's totals (empty without a prediction).

        Returns
        -------
        str
        """
        p = self.prediction
        if p is None:
            return ""
        head = (
            f"prediction ({prediction_label(p)}; {p.framework} kernels, {p.calibrated_from}): "
            f"{p.corrected_s * 1e3:.3f} ms, {p.corrected_s / p.bound_s:.2f}x the bound; "
            f"the fits alone {p.predicted_s * 1e3:.3f} ms"
        )
        served = [] if self.served is None else [self.served.to_text()]
        return "\n".join([head, "\n".join(coverage_lines(p)), *served])

    def to_text(self) -> str:
        """The lines printed after the step's summary, each block after a blank line.

        Returns
        -------
        str
        """
        out: list[str] = []
        p = self.prediction
        if p is not None:
            out += [
                "",
                f"{_what(self.phase)} ({prediction_label(p)}; {p.framework} kernels, {p.calibrated_from}):",
                f"  bound {p.bound_s * 1e3:.3f} ms   predicted {p.corrected_s * 1e3:.3f} ms   "
                f"({p.corrected_s / p.bound_s:.2f}x the bound)   the fits alone {p.predicted_s * 1e3:.3f} ms",
            ]
            # no interval when priced without it (predict_step_report's interval=False)
            if self.interval_s is not None:
                lo, hi = self.interval_s
                out.append(
                    f"  P10-P90 interval [{lo * 1e3:.3f}, {hi * 1e3:.3f}] ms (every kernel at that quantile of its "
                    "held-out error)"
                )
            for fam, e in p.by_family.items():
                pred = f"   predicted {e['corrected_s'] * 1e3:9.3f} ms" if "corrected_s" in e else ""
                if "predicted_s" in e:
                    pred += f"   the fits alone {e['predicted_s'] * 1e3:9.3f} ms"
                out.append(f"    {fam:24s} bound {e['bound_s'] * 1e3:9.3f} ms{pred}")
            out.append("\n".join(coverage_lines(p)))
        if self.fitted is not None:
            out += ["", self.fitted.to_text()]
        if self.served is not None:
            out += ["", self.served.to_text()]
            out += self._tables_line()
        return "\n".join(out)

    def _tables_line(self) -> list[str]:
        """Why the served decode's kernels differ from the predicted step above at the same batch:
        the simulator prices an iteration from tables over (batch, context) grid points,
        interpolated between them (:class:`~graphs.serving.pricing.predictor.PredictedStep`),
        where the step above prices each kernel at its exact shape. Said when the two print apart."""
        s, p = self.served, self.prediction
        if s is None or p is None or s.phase != "decode" or s.value_s is None or s.padded_batch != s.batch:
            return []
        a, b = s.kernels_s * 1e3, p.corrected_s * 1e3
        if f"{a:.3f}" == f"{b:.3f}":
            return []
        return [
            f"  its kernels {a:.3f} ms are the simulator's, from tables over batch and context grid points "
            f"interpolated between them; the step above prices each kernel at its exact shape: {b:.3f} ms"
        ]


def predict_step_report(
    config: ModelConfig,
    device: str,
    phase: str,
    *,
    batch: int,
    ctx: int | None = None,
    seq: int | None = None,
    tp: int = 1,
    framework: str | None = None,
    fp8_scales: str = "dynamic",
    fit: ServingFit | None = None,
    fit_path: str = "",
    interval: bool = True,
    served: bool = False,
) -> StepPrediction:
    """Price one decode or prefill step with ``framework``'s measured kernels and/or a fit's engine
    overheads: what ``decode`` and ``prefill`` print beside the bound.

    Parameters
    ----------
    config : ModelConfig
        The model.
    device : str
        The device.
    phase : str
        ``"decode"`` (give ``ctx``) or ``"prefill"`` (give ``seq``).
    batch : int
        Sequences in the step.
    ctx, seq : int, optional
        Cached context of a decode step, prompt length of a prefill step (tokens).
    tp : int
        Tensor-parallel degree.
    framework : str, optional
        The engine whose measured kernels price the step (None: a fit made on the bound).
    fp8_scales : str
        How FP8 activations are scaled (``dynamic`` or ``static``), with ``framework``.
    fit : ServingFit, optional
        A ``calibrate serving`` fit whose engine overheads apply to the step; its ``predict`` must
        be ``framework``.
    fit_path : str
        The file the fit was read from, as the user gave it.
    interval : bool
        Also price the P10-P90 interval (:func:`step_interval`: two more priced steps); False
        leaves :attr:`StepPrediction.interval_s` None.
    served : bool
        Also the step as ``framework``'s engine profile serves it, with the expected error of
        deployments like it (:func:`graphs.serving.sim.served_step.served_step`); only without a
        fit, whose overheads are not those the validation tables were measured with.

    Returns
    -------
    StepPrediction

    Raises
    ------
    CostModelError
        Neither a framework nor a fit, or a fit made for another framework.
    """
    if phase not in ("decode", "prefill"):
        raise CostModelError(f"phase {phase!r}: a step prediction is of 'decode' or 'prefill'")
    x = ctx if phase == "decode" else seq
    if x is None:
        raise CostModelError(f"a {phase} step prediction needs {'ctx' if phase == 'decode' else 'seq'}")
    if framework is None and fit is None:
        raise CostModelError("a step prediction needs a framework's kernels or a fit's engine overheads")
    if fit is not None and fit.predict != framework:
        raise CostModelError(
            f"framework {framework} but the fit {fit_path[:200]!r} was fitted with {fit.predict or 'the bound'}"
        )
    if fit is not None and framework is not None:  # the step runs the framework's default engine
        from ..engines import get_engine
        from ..planning.serving_fit import check_fit_kernel

        check_fit_kernel(
            fit, get_engine(framework), config, str(device), tp=tp, where=f"the fit {fit_path[:200]!r}"
        )
    prediction, span = None, None
    if framework is not None:
        from ..pricing.predict import predict_step  # numpy and the corpus: only when a step is priced

        prediction = predict_step(
            config,
            device,
            phase,
            batch=batch,
            ctx=ctx if phase == "decode" else None,
            seq=seq if phase == "prefill" else None,
            tp=tp,
            framework=framework,
            fp8_scales=fp8_scales,
        )
        if interval:
            span = step_interval(
                config, device, phase, framework, tp=tp, point=(batch, x), fp8_scales=fp8_scales
            )
    fitted = None
    if fit is not None:
        from costmodel.hardware import get_device  # the catalog loads sympy: the module stays light

        if prediction is not None:
            kernels, bound = prediction.corrected_s, prediction.bound_s
        else:  # a fit made on the bound: its kernels are the step's roofline bound
            from ..analysis.phases import decode_report, prefill_report

            # the command checked the context and the capacity: the step's seconds alone are read
            if phase == "decode":
                step = decode_report(
                    config, device, batch=batch, ctx=x, tp=tp, allow_long_context=True, check_memory=False
                ).step_s
            else:
                step = prefill_report(
                    config, device, batch=batch, seq=x, tp=tp, allow_long_context=True, check_memory=False
                ).step_s
            kernels = bound = float(step)
        fitted = FittedStep(
            fit_path,
            fit,
            phase,
            batch,
            batch if phase == "decode" else batch * x,
            kernels,
            bound,
            config.name,
            get_device(device).name,
            tp,
            config,
        )
    as_served = None
    if served and framework is not None and fit is None:
        from ..pricing.predictor import Predictor
        from ..sim.served_step import served_step

        as_served = served_step(
            config,
            device,
            phase,
            batch=batch,
            tokens=x,
            tp=tp,
            predictor=Predictor.of(framework, fp8_scales=fp8_scales),
        )
    return StepPrediction(phase, prediction, span, fitted, as_served)
