"""Analyses of a step on a device: phase reports (:mod:`.phases`), where batching stops paying
(:mod:`.limits`), sweeps (:mod:`.sweeps`), per-node rows (:mod:`.classify`, :mod:`.node_analysis`),
speculative decoding (:mod:`.specdec`), disaggregation (:mod:`.disagg`), parallel plans
(:mod:`.parallel`), split placement (:mod:`.split`) and a config's check (:mod:`.model_check`).

It imports the ``step``, ``engines`` and ``pricing`` wings below it, never one above. An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
