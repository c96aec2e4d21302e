"""Every function ``costmodel``, ``models`` and ``graphs`` export documents its arguments (review
finding 11: 48 of them had no Parameters section), as :mod:`tests.test_wing_docstrings` asks of
the serving wings (``graphs.serving``, which it covers).

An exported function (a name in the package's ``__all__`` that is a plain function, a decorator
or a context manager) has a numpy-style docstring with

* a ``Parameters`` section naming each parameter and no name the signature lacks;
* a ``Returns`` section (``Yields`` for a generator or context manager) unless it returns None.

Read from the source with :mod:`ast` through the wings test's helpers (the same rules).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap

import pytest

from tests.test_wing_docstrings import problems

PACKAGES = ("costmodel", "models", "graphs")


def _exported() -> list[tuple[str, object]]:
    out = []
    for pkg in PACKAGES:
        mod = importlib.import_module(pkg)
        for name in mod.__all__:
            obj = inspect.unwrap(getattr(mod, name))
            if inspect.isfunction(obj):
                out.append((f"{pkg}.{name}", obj))
    return out


def _node(fn: object) -> ast.FunctionDef:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    node = tree.body[0]
    assert isinstance(node, ast.FunctionDef)
    return node


EXPORTED = _exported()


def test_the_packages_export_functions():
    assert len(EXPORTED) >= 60  # costmodel's, models' and graphs' functions


@pytest.mark.parametrize(("name", "fn"), EXPORTED, ids=[n for n, _ in EXPORTED])
def test_an_exported_function_documents_its_parameters_and_result(name, fn):
    node = _node(fn)
    wrapped = any(
        (isinstance(d, ast.Name) and d.id == "contextmanager")
        or (isinstance(d, ast.Attribute) and d.attr == "contextmanager")
        for d in node.decorator_list
    )
    bad = [
        p
        for p in problems(node)
        if not p.startswith("raises")  # Raises: asked of the wings only
        and not (wrapped and p == "no Returns section" and "Yields" in (ast.get_docstring(node) or ""))
    ]
    assert not bad, f"{name}: " + "; ".join(bad)
