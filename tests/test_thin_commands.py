"""Issue 43 item 3: each command parses, builds a request the library checks, runs a library
function and prints its report: the command itself stays under 60 lines."""

from __future__ import annotations

import ast
import inspect

import pytest

from graphs.cli import fusion, measure, phases, plot, search, serve, size

COMMANDS = [
    (fusion, "cmd_plan"),
    (fusion, "cmd_audit"),
    (measure, "cmd_probe"),
    (serve, "cmd_disagg"),
    (serve, "cmd_plans"),
    (phases, "cmd_sweep"),
    (plot, "cmd_plot"),
    (search, "cmd_search"),
    (size, "cmd_size"),
]


@pytest.mark.parametrize(("module", "name"), COMMANDS, ids=[n for _, n in COMMANDS])
def test_the_command_is_thin(module: object, name: str) -> None:
    tree = ast.parse(inspect.getsource(module))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
    assert fn.end_lineno is not None and fn.end_lineno - fn.lineno + 1 < 60


@pytest.mark.parametrize("report", ["SearchReport", "SizeReport"])
def test_search_and_size_reports_render_three_ways(report: str) -> None:
    from graphs.serving.present import planning_reports

    cls = getattr(planning_reports, report)
    assert all(callable(getattr(cls, m, None)) for m in ("to_text", "to_dict", "to_html"))
