"""Presenting results: report cards cached between processes (:mod:`.cards`), the ``--html``
pages (:mod:`.html_views`, :mod:`.html_studies`), side-by-side comparisons (:mod:`.comparison`)
and the reports that render themselves (``to_text``, ``to_dict``, ``to_html``): ``simulate``'s
(:mod:`.simulation_report`), ``decode``'s and ``prefill``'s (:mod:`.phase_summary`), ``search``'s and
``size``'s (:mod:`.planning_reports`), ``fusion audit|plan``'s (:mod:`.fusion_report`), ``serve
disagg|plans``' (:mod:`.serve_summaries`), ``sweep``'s (:mod:`.sweep_summary`) and ``plot``'s
(:mod:`.plot_report`), with the lines they share (:mod:`.report_text`).

The top wing: it imports every wing below (``planning`` and down), so that a report runs its study
and renders it (:mod:`.simulation_report`). An import-linter ``layers`` contract in
``pyproject.toml`` keeps the order. The public names are re-exported, lazily, by
:mod:`graphs.serving`; this package imports nothing, so importing one of its modules stays cheap.
"""

__all__: list[str] = []
