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


_PROBE = """
import json, sys
import costmodel.rules as rules
from costmodel.rules import get_rule, rule_names
print(json.dumps({
    "imported": sorted(m for m in sys.modules if m.startswith("costmodel.rules.")),
    "registered": {n: get_rule(n).fn.__module__ for n in rule_names()},
}))
"""


def test_rule_modules_are_discovered():
    """Every module in costmodel/rules is imported by the package (pkgutil), so none can be forgotten:
    in a fresh interpreter (this process has imported them all by now), ``import costmodel.rules``
    alone registers every ``@register_rule("name")`` written in the package's files, each from the
    module that defines it."""
    import json
    import subprocess
    import sys

    import costmodel.rules as rules

    written = {
        f"costmodel.rules.{p.stem}": set(re.findall(r'^@register_rule\("([^"]+)"\)', p.read_text(), re.M))
        for p in Path(rules.__file__).parent.glob("*.py")
    }
    written = {m: names for m, names in written.items() if names}
    assert len(written) >= 10, sorted(written)  # attention, comm, linear, moe, norms, softmax, ssm, ...
    root = Path(rules.__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, cwd=root, timeout=120
    )
    fresh = json.loads(out.stdout)
    assert set(written) <= set(fresh["imported"]), sorted(set(written) - set(fresh["imported"]))
    found = {m: {n for n, mod in fresh["registered"].items() if mod == m} for m in written}
    assert found == written
    assert set(fresh["registered"].values()) == set(written)  # no rule registered from elsewhere
