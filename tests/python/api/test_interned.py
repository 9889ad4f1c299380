"""The immortal interned strings that blocks and py_allocs leave out
(CPython 3.12 on): on 3.13 and later the engine counts them as they are
added to the interpreter's dict of interned strings, found once
(leakcheck.cpython._find_interned), rather than asking
sys.getunicodeinternedsize(_only_immortal=True), which walks them all.
A new immortal string is counted; a mortal one made immortal is not (it
was allocated before: no block is new)."""

import sys
import time

import pytest

import leakcheck
from leakcheck import _core, cpython

pytestmark = pytest.mark.skipif(
    not cpython.COUNTS_INTERNED or
    getattr(sys, "_is_gil_enabled", lambda: True)() is False,
    reason="counted from the dict of interned strings on CPython 3.13 "
           "and later, with the GIL, on Linux")


def unique(what):
    return "".join((what, "_", str(time.monotonic_ns())))


@pytest.fixture
def interned():
    """The dict the engine counts from (found by the first snapshot)."""
    import ctypes
    leakcheck.snapshot()
    found = cpython._find_interned(ctypes)
    assert found is not None, "the dict of interned strings was not found"
    return found


def immortal_counts(interned):
    """(the engine's count, sys's count) now."""
    compile("", "<test>", "exec")       # the file name interned beforehand
    ours = _core.interned_count()
    assert ours is not None and ours >= 0
    return ours, sys.getunicodeinternedsize(_only_immortal=True)


def test_a_new_immortal_string_is_counted(interned):
    before = immortal_counts(interned)
    name = unique("compiled_name")
    # A code object's names are interned immortal.
    compile(name + " = 1", "<test>", "exec")
    after = immortal_counts(interned)
    assert after[0] - before[0] == after[1] - before[1] == 1


def test_a_mortal_string_made_immortal_is_not(interned):
    name = sys.intern(unique("mortal_first"))
    before = immortal_counts(interned)
    compile(name + " = 1", "<test>", "exec")    # now immortal, same object
    after = immortal_counts(interned)
    assert after[1] - before[1] == 1            # sys counts it
    assert after[0] - before[0] == 0            # no new block: not here


def test_code_compiled_afresh_each_run_reads_as_nothing():
    """Each run makes a new immortal name (a new block that stays): the
    count takes it out of blocks and py_allocs, as before."""
    leakcheck.snapshot()
    for _ in range(5):
        with leakcheck.scope(probes=["blocks", "py_allocs"]):
            compile(unique("fresh") + " = 1", "<test>", "exec")


def test_immortalizing_older_strings_reads_as_nothing():
    """A run that makes existing interned strings immortal allocates
    nothing: subtracting them read as a drop of one block each (a module's
    first test on 3.13 read -15), which could hide as much growth."""
    def assignments(names):
        return "\n".join(f"{name} = 1" for name in names)

    # The same compilation once before: the scope is one run, with no
    # warm-up, so whatever compile() keeps from its first use of a shape
    # would read as growth.
    compile(assignments([unique(f"warm{i}") for i in range(15)]), "<test>",
            "exec")
    leakcheck.snapshot()
    names = [sys.intern(unique(f"older{i}")) for i in range(15)]
    with leakcheck.scope(probes=["blocks", "py_allocs"]) as scope:
        compile(assignments(names), "<test>", "exec")
    assert scope.deltas["blocks"] >= 0, scope.deltas


def test_a_resized_dict_is_unreadable_once(interned):
    """A resize moves every entry: what is new cannot be told, so that
    reading is -1 (the snapshot then reads no blocks and no py_allocs),
    and the count goes on from the next one."""
    assert _core.interned_count() >= 0
    table = type(interned).__sizeof__(interned)
    grown = []
    while type(interned).__sizeof__(interned) == table:
        grown.append(sys.intern(unique(f"grow{len(grown)}")))
    assert _core.interned_count() == -1
    before = immortal_counts(interned)
    compile(unique("after_the_resize") + " = 1", "<test>", "exec")
    after = immortal_counts(interned)
    assert after[0] - before[0] == after[1] - before[1] == 1
