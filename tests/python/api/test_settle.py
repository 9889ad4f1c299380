"""Settling clears caches without changing what the code under test can
observe: after a snapshot, attribute lookups move None's reference count
no more than they do without leakcheck."""

import sys

import leakcheck


def test_lookups_after_a_snapshot_leave_none_alone():
    class Fresh:
        pass

    obj = Fresh()
    leakcheck.snapshot()
    names = [f"name{i}" for i in range(2000)]
    before = sys.getrefcount(None)
    leakcheck.snapshot()
    for name in names:
        getattr(obj, name, None)
    after = sys.getrefcount(None)
    assert after == before
