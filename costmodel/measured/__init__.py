"""Predictions that meet real GPUs: bounds checked and efficiencies fitted on
published kernel measurements (the ``aiconfigurator-core`` wheel, optional
extra ``[measured]``).

* :mod:`.corpus` finds and loads the measured tables (package version recorded);
* :mod:`.kernels` costs every row with the rule registry;
* :mod:`.validity` checks measured >= bound, with an L2-residency model;
* :mod:`.efficiency` fits an interpretable per-family efficiency model;
* :mod:`.residual` corrects it by its residuals at the nearest measured shapes (grey-box);
* :mod:`.heldout` evaluates both on held-out shapes, devices and frameworks;
* :mod:`.applied` fits the groups users apply, prices the fastest kernel, with residuals;
* :mod:`.moe` prices fused-MoE kernels from the measurements themselves (no fit);
* :mod:`.stored` keeps those fits across processes (the persistent cache of :mod:`costmodel.formcache`);
* :mod:`.shipped` reads the corpus's fits from the package (built once, verified at load);
* :mod:`.shipped_tables` reads the tables every unmeasured device shares (its fits, residuals and
  held-out errors) from the package, so its first run reads no corpus row;
* :mod:`.report` writes the report tables, the calibrated hardware file and plots.

Names load on first use (``costmodel.lazy``): the command line reads
:data:`FRAMEWORKS` without importing numpy, pandas or sympy.
"""

from costmodel.lazy import lazy_exports

#: public name -> the submodule that defines it
_LAZY: dict[str, str] = {
    "FAMILIES": "corpus",
    "SYSTEMS": "corpus",
    "CorpusInfo": "corpus",
    "MeasuredDataError": "corpus",
    "corpus_info": "corpus",
    "load": "corpus",
    "systems_with_data": "corpus",
    "Features": "efficiency",
    "Fit": "efficiency",
    "features": "efficiency",
    "fit": "efficiency",
    "predict": "efficiency",
    "HeldOut": "heldout",
    "evaluate": "heldout",
    "fit_groups": "applied",
    "fastest": "applied",
    "group_residuals": "applied",
    "KernelTerms": "kernels",
    "kernel_terms": "kernels",
    "wave_factor": "kernels",
    "work_waves": "kernels",
    "build_report": "report",
    "calibrated_spec": "report",
    "scatter_plot": "report",
    "to_markdown": "report",
    "ShapeResiduals": "residual",
    "Bounds": "validity",
    "Violations": "validity",
    "explain": "validity",
    "l2_resident": "validity",
    "lower_bounds": "validity",
    "violations": "validity",
    "FRAMEWORKS": "corpus",
    "Bridge": "moe",
    "MoECurve": "moe",
    "MoEShape": "moe",
    "distribution_for": "moe",
    "device_bridge": "moe",
    "moe_curve": "moe",
}

__all__ = list(_LAZY)

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())
