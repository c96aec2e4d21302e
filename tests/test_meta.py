"""Meta-tests: every registered rule and catalog device has a test."""

from costmodel import rule_names
from costmodel.hardware import shipped_devices

from . import test_hardware, test_rules


def test_every_rule_is_covered():
    missing = set(rule_names()) - test_rules.COVERS
    assert not missing, f"rules without a test in tests/test_rules.py: {sorted(missing)}"


def test_every_catalog_device_is_pinned():
    missing = set(shipped_devices()) - set(test_hardware.PINNED)
    assert not missing, f"catalog devices without pinned numbers in tests/test_hardware.py: {sorted(missing)}"
