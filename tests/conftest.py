"""Shared fixtures."""

import pytest

from costmodel.hardware import Catalog, use_catalog


@pytest.fixture(autouse=True)
def fresh_catalog():
    """Every test runs against its own copy of the shipped hardware catalog, so a device one
    test registers (a --hw-file, a probe, register_device) never reaches another test."""
    with use_catalog(Catalog.shipped()) as cat:
        yield cat
