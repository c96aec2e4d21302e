"""Predictions that meet real GPUs: bounds checked and efficiencies fitted on
published kernel measurements (the ``aiconfigurator-core`` wheel, optional
extra ``[measured]``).

* :mod:`.corpus` finds and loads the measured tables (package version recorded);
* :mod:`.kernels` costs every row with the rule registry;
* :mod:`.validity` checks measured >= bound, with an L2-residency model;
* :mod:`.efficiency` fits an interpretable per-family efficiency model;
* :mod:`.heldout` evaluates it on held-out shapes, devices and frameworks;
* :mod:`.report` writes the report tables, the calibrated hardware file and plots.
"""

from .corpus import FAMILIES, SYSTEMS, CorpusInfo, MeasuredDataError, corpus_info, load, systems_with_data
from .efficiency import Features, Fit, features, fit, predict
from .heldout import HeldOut, evaluate, fit_groups
from .kernels import KernelTerms, kernel_terms, wave_factor, work_waves
from .report import build_report, calibrated_spec, scatter_plot, to_markdown
from .validity import Bounds, Violations, explain, l2_resident, lower_bounds, violations

__all__ = [
    "FAMILIES",
    "SYSTEMS",
    "CorpusInfo",
    "MeasuredDataError",
    "corpus_info",
    "load",
    "systems_with_data",
    "KernelTerms",
    "kernel_terms",
    "wave_factor",
    "work_waves",
    "Features",
    "Fit",
    "features",
    "fit",
    "predict",
    "HeldOut",
    "evaluate",
    "fit_groups",
    "build_report",
    "calibrated_spec",
    "scatter_plot",
    "to_markdown",
    "explain",
    "Bounds",
    "Violations",
    "l2_resident",
    "lower_bounds",
    "violations",
]
