"""Planning a deployment: the design search (:mod:`.design_search`, :mod:`.search_plans`), the
highest rate within SLOs (:mod:`.capacity_search`), sizing (:mod:`.sizing`), dollars per token
(:mod:`.cost`), and fitting the engine overheads to a user's runs (:mod:`.serving_fit`,
:mod:`.bench_results`).

A wing over ``sim``: it imports every wing below (``sim`` and down), never ``present``, which renders
what it computes. An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
