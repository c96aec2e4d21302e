"""The one in-process cache policy (costmodel.memo): bounded, least recently used dropped first."""

import pytest

from costmodel.errors import CostModelError
from costmodel.memo import BoundedCache, all_caches


def test_least_recently_used_is_dropped_and_the_bound_holds():
    c: BoundedCache[int] = BoundedCache("test_lru", maxsize=3)
    for k in "abc":
        c.get_or_build(k, lambda k=k: ord(k))
    c.get_or_build("a", lambda: -1)  # a hit: "a" becomes the most recent
    c.get_or_build("d", lambda: 100)  # "b" is now the least recent: dropped
    assert sorted(c.keys()) == ["a", "c", "d"]
    assert c.get("a") == ord("a")  # the cached value, not the hit's builder
    for i in range(50):
        c.get_or_build(i, lambda i=i: i)
    assert len(c) == 3 and c.info()["maxsize"] == 3


def test_a_bad_bound_is_refused():
    with pytest.raises(CostModelError, match="maxsize must be a positive integer"):
        BoundedCache("bad", maxsize=0)


def test_the_engine_caches_are_bounded():

    caches = all_caches()

    for name in ("compiled_step", "mixed_step", "ledger", "closed_forms", "predicted_step", "priced_step"):
        assert 1 <= caches[name]["maxsize"] <= 1024, name
