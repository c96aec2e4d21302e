"""Meta-tests: every registered rule and catalog device has a test.

Both lists come from the registries themselves (the rule registry, the shipped
catalog), so a new rule or device without a test fails here; nothing is kept
by hand.
"""

import re
from pathlib import Path

import pytest

from costmodel import rule_names
from costmodel.hardware import shipped_devices

from . import test_hardware

TESTS = Path(__file__).resolve().parent
_SOURCES = "\n".join(p.read_text() for p in TESTS.glob("test_*.py"))


@pytest.mark.parametrize("rule", rule_names())
def test_every_rule_is_called_by_a_test(rule):
    """Some test evaluates the rule through the public entry point, ``op_cost("<rule>", ...)``."""
    assert re.search(rf'op_cost\(\s*"{re.escape(rule)}"', _SOURCES), (
        f"rule {rule!r} is registered but no test calls op_cost({rule!r}, ...); pin it in tests/test_rules.py"
    )


def test_every_catalog_device_is_pinned():
    missing = set(shipped_devices()) - set(test_hardware.PINNED)
    assert not missing, f"catalog devices without pinned numbers in tests/test_hardware.py: {sorted(missing)}"


def test_rule_modules_are_discovered():
    """Every module in costmodel/rules is imported by the package (pkgutil): none can be forgotten."""
    import sys

    import costmodel.rules as rules

    names = {p.stem for p in Path(rules.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert all(f"costmodel.rules.{n}" in sys.modules for n in names)
