"""Prices of a step: the predictor (the roofline bound, or a framework's measured kernels:
:mod:`.predictor`, :mod:`.predict`, :mod:`.kernel_sources`, :mod:`.measured_grid`), a compiled
step priced by it (:mod:`.priced`), the one protocol per step level every step type satisfies
(:mod:`.protocols`), and the engines' overheads as the registry gives them (:mod:`.overheads`).

It imports the ``step`` and ``engines`` wings below it, never one above. An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
