"""What one iteration costs: a model's graphs built once (:mod:`.workload`), their totals and
closed forms (:mod:`.totals`), a phase's step compiled once (:mod:`.compiled`), a mixed batch's
step (:mod:`.mixed`), skewed expert routing (:mod:`.expert_routing`), the capacity ledger and its
verdict (:mod:`.ledger_fit`, :mod:`.fit_check`), the report numbers (:mod:`.reports`) and the
cards' text format (:mod:`.card_format`).

The bottom wing of :mod:`graphs.serving`: it imports the core, ``models`` and ``graphs.blocks``
only, never another wing. An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
