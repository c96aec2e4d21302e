"""Shared fixtures, and the hypothesis profile every run uses."""

import os

import pytest
from hypothesis import HealthCheck, settings

from costmodel.hardware import Catalog, use_catalog

# Property tests are deterministic everywhere (CI and a user's first run alike): the same examples
# in every run, no example database carried between runs, and no limit on wall time (a deadline or
# the too_slow health check would time this machine, which a loaded machine breaks; STYLE.md 14).
# `COSTMODEL_HYPOTHESIS=explore` draws fresh random examples to search further; a failure it finds
# prints a @reproduce_failure blob to pin.
_DETERMINISTIC = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("deterministic", derandomize=True, **_DETERMINISTIC)
settings.register_profile("explore", derandomize=False, print_blob=True, **_DETERMINISTIC)
settings.load_profile(os.environ.get("COSTMODEL_HYPOTHESIS", "deterministic"))


@pytest.fixture(autouse=True)
def fresh_catalog():
    """Every test runs against its own copy of the shipped hardware catalog, so a device one
    test registers (a --hw-file, a probe, register_device) never reaches another test."""
    with use_catalog(Catalog.shipped()) as cat:
        yield cat


@pytest.fixture(autouse=True, scope="session")
def private_form_cache(tmp_path_factory):
    """The persistent cache of compiled forms goes to a temporary directory, never the user's;
    the shipped cards are set aside (whether they match the sources depends on the last build:
    tests/test_shipped_cards.py builds its own), so every test derives what it checks."""
    old = os.environ.get("COSTMODEL_CACHE_DIR")
    os.environ["COSTMODEL_CACHE_DIR"] = str(tmp_path_factory.mktemp("form-cache"))
    os.environ["COSTMODEL_NO_SHIPPED_CARDS"] = "1"
    yield
    if old is None:
        os.environ.pop("COSTMODEL_CACHE_DIR", None)
    else:
        os.environ["COSTMODEL_CACHE_DIR"] = old
