"""What priced a command's numbers when ``--predict`` is given: one set of lines for every command.

:func:`predicted_lines` prints what ``simulate --predict`` prints (the kernels and corpus that
priced the steps, the coverage line and its notes and warnings, the share clamped to the bound);
:func:`interval_text` formats a point value with its P10-P90 interval.
"""

from __future__ import annotations

__all__ = ["interval_text", "predicted_lines", "step_interval"]

from graphs.serving.present.report_text import interval_text, predicted_lines  # reports render them
from graphs.serving.present.step_prediction import step_interval  # its home: the step prediction report
