"""Request-level serving simulation: requests (:mod:`.requests`), a replica's scheduler
(:mod:`.engine`, its steady decodes in closed form: :mod:`.skipping`), the simulator
(:mod:`.simulator`), data-parallel groups of ranks stepping together (:mod:`.data_parallel`), routing across replicas
(:mod:`.replica_routing`), speculation (:mod:`.specdec_sim`, :mod:`.specdec_batch`), KV tiers
(:mod:`.kv_tiers`) and the prediction intervals of a served run (:mod:`.intervals`,
:mod:`.served_errors`, calibrated by the methods of :mod:`.conformal`).

It imports the wings below it (``analysis``, ``pricing``, ``engines``, ``step``), never one above. An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
