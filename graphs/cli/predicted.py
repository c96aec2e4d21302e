"""What priced a command's numbers when ``--predict`` is given: one set of lines for every command.

:func:`predicted_lines` prints what ``simulate --predict`` prints (the kernels and corpus that
priced the steps, the coverage line and its notes and warnings, the share clamped to the bound);
:func:`interval_text` formats a point value with its P10-P90 interval.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

__all__ = ["interval_text", "predicted_lines", "step_interval"]

from .predict_option import step_interval  # its home is the --predict option; kept importable here


def predicted_lines(
    framework: str, device: str, coverage: Any, *, what: str, clamped_s: float | None = None
) -> list[str]:
    """What priced ``what`` (e.g. "every iteration's kernels"): ``framework``'s kernels of the
    corpus, what their seconds rest on (the coverage line decode prints) and, when given, the
    share clamped to the bound. ``coverage`` None (nothing was priced): the first line only."""
    from graphs.serving.pricing.predict import calibration_source

    from .predict_option import coverage_lines

    out = [
        f"  predicted, not bound: {what} priced from {framework} kernels "
        f"({calibration_source()}), each at least its roofline bound"
    ]
    if coverage is None:
        return out
    out += coverage_lines(SimpleNamespace(coverage=coverage, device=device, framework=framework))
    if coverage.total_s > 0:
        if clamped_s is None:
            from graphs.serving.pricing.predictor import CLAMPED

            clamped_s = coverage.bounds.get(CLAMPED, 0.0)
        out.append(
            f"  clamped: {100 * clamped_s / coverage.total_s:.1f}% of the time is kernels whose "
            "prediction fell below their bound (the bound priced them)"
        )
    return out


def interval_text(lo: float, hi: float, fmt: str = ".4f") -> str:
    """``[lo, hi]`` of a P10-P90 prediction interval (the ends ordered)."""
    a, b = sorted((lo, hi))
    return f"[{a:{fmt}}, {b:{fmt}}]"


