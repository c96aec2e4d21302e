"""One symbol factory: one name is one symbol, whichever module or file asks for it."""

import json
import re
from pathlib import Path

import pytest
import sympy

from costmodel import Hardware, load_hardware_file, parse_expr
from costmodel.errors import InvalidDimensionError
from costmodel.symbols import count, dim, display, quantity, symbol

ROOT = Path(__file__).resolve().parent.parent


def test_p_over_beta_identity(tmp_path):
    """Hardware.symbolic()'s balance minus a file device's P/beta balance is exactly zero.

    Before the factory, the file's names became positive *integer* symbols and the
    difference printed as ``-P/beta + P/beta``.
    """
    path = tmp_path / "abstract.json"
    device = {
        "roofs": [{"unit": "tensor", "precision": "bf16", "peak_flops_per_s": "P"}],
        "memory": [{"name": "dram", "bandwidth_bytes_per_s": "beta"}],
    }
    path.write_text(json.dumps({"devices": {"abstract-pb": device}}))
    (hw,) = load_hardware_file(path)
    assert hw.balance("tensor", "bf16") - Hardware.symbolic().balance("tensor", "*") == 0
    assert parse_expr("P/beta") - Hardware.symbolic().balance("tensor", "*") == 0


def test_kinds_and_assumptions():
    assert dim("batch").is_integer and dim("batch").is_positive
    assert quantity("beta").is_positive and quantity("beta").is_integer is None  # a real, not a count
    assert count("prefix").is_nonnegative and count("prefix").is_positive is None
    assert symbol("P") is quantity("P") and symbol("d_model") is dim("hidden_size")


def test_a_name_keeps_its_kind():
    with pytest.raises(InvalidDimensionError, match="'b' names a quantity"):
        dim("b")
    with pytest.raises(InvalidDimensionError, match="is a dimension, it cannot also be a quantity"):
        quantity("hidden_size")


def test_display_uses_paper_names():
    expr = 2 * dim("H") / (dim("H_kv") * quantity("b"))
    assert str(display(expr)) == "2*H/(H_kv*b)"


def test_no_module_makes_its_own_symbols():
    """sympy.Symbol / sympy.symbols appear only in costmodel/symbols.py."""
    pattern = re.compile(r"sympy\.(Symbol|symbols)\(")
    offenders = [
        f"{p.relative_to(ROOT)}:{i}"
        for pkg in ("costmodel", "graphs", "models")
        for p in (ROOT / pkg).rglob("*.py")
        if p.name != "symbols.py"
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, f"make symbols with costmodel.symbols (dim/quantity/count): {offenders}"


def test_exact_symbols_are_shared_objects():
    assert sympy.Symbol("P", positive=True) == quantity("P")  # sympy equality by name + assumptions


def test_a_symbol_name_is_bounded_and_quoted_short():
    """A dimension name of thousands of characters (an importer's tensor name, a layer file) was
    taken and quoted whole in every error and closed form; the name is now at most 200 characters
    (MAX_NAME) and an error quotes its first 100 with its length."""
    from costmodel.errors import InvalidDimensionError
    from costmodel.symbols import MAX_NAME, dim

    assert MAX_NAME == 200
    assert str(dim("a" * 200)) == "a" * 200
    with pytest.raises(
        InvalidDimensionError, match=r"\.\.\. \(10,000 characters\) is too long: at most 200"
    ) as e:
        dim("b" * 10_000)
    assert len(str(e.value)) < 200
    with pytest.raises(InvalidDimensionError, match=r"\(5,000 characters\) is not a valid identifier") as e:
        dim("-" * 5_000)
    assert len(str(e.value)) < 200
