"""Predictions that meet real GPUs: bounds checked and efficiencies fitted on
published kernel measurements (the ``aiconfigurator-core`` wheel, optional
extra ``[measured]``).

* :mod:`.corpus` finds and loads the measured tables (package version recorded);
* :mod:`.kernels` costs every row with the rule registry;
* :mod:`.validity` checks measured >= bound, with an L2-residency model;
* :mod:`.efficiency` fits an interpretable per-family efficiency model;
* :mod:`.heldout` evaluates it on held-out shapes, devices and frameworks.
"""

from .corpus import FAMILIES, SYSTEMS, CorpusInfo, MeasuredDataError, corpus_info, load, systems_with_data
from .kernels import KernelTerms, kernel_terms, wave_factor
from .validity import Bounds, Violations, l2_resident, lower_bounds, violations

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
    "Bounds",
    "Violations",
    "l2_resident",
    "lower_bounds",
    "violations",
]
