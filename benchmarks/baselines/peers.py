"""Where a peer tool lives: llm-analysis may be installed in another interpreter (its
``transformers`` pin need not match ours). ``LLM_ANALYSIS_PYTHON`` names that interpreter;
the default is this one."""

from __future__ import annotations

import os
import subprocess
import sys


def llm_analysis_python() -> str | None:
    """An interpreter that can ``import llm_analysis``, or None (the benchmark then says so)."""
    py = os.environ.get("LLM_ANALYSIS_PYTHON", sys.executable)
    ok = subprocess.run([py, "-c", "import llm_analysis"], capture_output=True).returncode == 0
    return py if ok else None


HOW = "pip install llm-analysis (or set LLM_ANALYSIS_PYTHON to an interpreter that has it)"
