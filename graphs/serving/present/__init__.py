"""Presenting results: report cards cached between processes (:mod:`.cards`), the ``--html``
pages (:mod:`.html_views`, :mod:`.html_studies`) and side-by-side comparisons (:mod:`.comparison`).

A top wing beside ``planning``: it imports every wing below (``sim`` and down), never ``planning``. An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
