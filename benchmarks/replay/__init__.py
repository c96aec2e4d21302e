"""The replay of a published serving measurement, shared by the validation benchmarks.

A row (:mod:`.rows`: ``benchmarks/data/published_serving.csv``, or :mod:`.silicon`: NVIDIA's
silicon sample in the same shape) becomes a workload (:mod:`.workload`: the model with its dtypes,
the topology, the engine profile the row's engine column names with only the overrides its source
states, the requests and the load), is simulated in a mode and read back as the source's client
read it (:mod:`.run`), and lands in a table (:mod:`.tables`, :mod:`.reasons`) or a CSV appendix
(:mod:`.results`) that :mod:`.pages` writes into ``docs/`` or the README's generated sections.

The scripts import it as a package: run them from the repository root as
``python -m benchmarks.<script>`` (``docs/contributing.md``).
"""

from .pages import replace_section, strip_home, wrap, write_csv
from .reasons import ROW_LIMIT, reason
from .results import read_results, simulated_errors, write_results
from .rows import CSV_PATH, ENGINE, FRAMEWORK, error, excluded, load_rows, metric_group
from .run import MODES, Run, run_row, simulate_row, steady_rate
from .tables import INTERVAL_MODE, TARGETS, Line, evaluate, fmt, interval_coverage, medians, pct, rank, table
from .workload import RowWorkload, predictor, row_workload

__all__ = [
    "CSV_PATH",
    "ENGINE",
    "FRAMEWORK",
    "INTERVAL_MODE",
    "MODES",
    "ROW_LIMIT",
    "TARGETS",
    "Line",
    "RowWorkload",
    "Run",
    "error",
    "evaluate",
    "excluded",
    "fmt",
    "interval_coverage",
    "load_rows",
    "medians",
    "metric_group",
    "pct",
    "predictor",
    "rank",
    "read_results",
    "reason",
    "replace_section",
    "row_workload",
    "run_row",
    "simulate_row",
    "simulated_errors",
    "steady_rate",
    "strip_home",
    "table",
    "wrap",
    "write_csv",
    "write_results",
]
