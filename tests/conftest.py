"""Shared fixtures."""

import pytest

from costmodel.hardware import Catalog, use_catalog


@pytest.fixture(autouse=True)
def fresh_catalog():
    """Every test runs against its own copy of the shipped hardware catalog, so a device one
    test registers (a --hw-file, a probe, register_device) never reaches another test."""
    with use_catalog(Catalog.shipped()) as cat:
        yield cat


@pytest.fixture(autouse=True, scope="session")
def private_form_cache(tmp_path_factory):
    """The persistent cache of compiled forms goes to a temporary directory, never the user's."""
    import os

    old = os.environ.get("COSTMODEL_CACHE_DIR")
    os.environ["COSTMODEL_CACHE_DIR"] = str(tmp_path_factory.mktemp("form-cache"))
    yield
    if old is None:
        os.environ.pop("COSTMODEL_CACHE_DIR", None)
    else:
        os.environ["COSTMODEL_CACHE_DIR"] = old
