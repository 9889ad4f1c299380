"""refcounts(), watch() with assert_finalized(), assert_no_garbage()."""

import gc
import sys

import pytest

import leakcheck

IMMORTAL = sys.version_info >= (3, 12)


class Thing:
    pass


class Slotted:
    __slots__ = ("x",)


def finalized_error(*handles):
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.assert_finalized(*handles)
    return info.value


# ---- refcounts ---------------------------------------------------------------

def test_refcounts_catches_a_reference_kept_by_c(leaky):
    obj = Thing()
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.refcounts(obj):
            leaky.leak_ref(obj)
    error = info.value
    assert error.report.startswith(
        "leakcheck: reference counts grew in the refcounts() block "
        "(1 of 1 object)")
    assert f"{__name__}.Thing object at {id(obj):#x}: " in error.report
    assert "(+1)" in error.report
    assert error.diagnosis.refcounts == [
        {"object": f"{__name__}.Thing object at {id(obj):#x}",
         "type": f"{__name__}.Thing", "delta": 1}]
    chain = error.diagnosis.chains[0]
    assert chain["unseen_refs"] == 1
    assert chain["kind"] == "frame" and "local variable 'obj'" in chain["root"]
    assert "1 reference that no object the garbage collector sees holds" \
        in error.report


def test_refcounts_passes_a_clean_twin_and_records_counts(leaky):
    obj, other = Thing(), [1, 2]
    for _ in range(20):
        with leakcheck.refcounts(obj, other) as counts:
            leaky.clean_ref(obj)
            leaky.borrow(other)
        assert counts.before == counts.after
        assert len(counts.before) == 2
        del counts          # it holds obj and other: the next block's start


def test_refcounts_names_only_the_objects_that_grew(leaky):
    a, b, c = Thing(), Thing(), Thing()
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.refcounts(a, b, c):
            leaky.leak_ref(b)
            leaky.leak_ref(b)
    assert "(1 of 3 objects)" in info.value.report
    assert info.value.diagnosis.refcounts[0]["delta"] == 2
    assert f"at {id(b):#x}" in info.value.diagnosis.refcounts[0]["object"]


def test_refcounts_counts_references_python_code_keeps():
    obj, keep = Thing(), []
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.refcounts(obj):
            keep.append(obj)
    chain = info.value.diagnosis.chains[0]
    assert chain["unseen_refs"] == 0
    assert chain["kind"] == "frame"


@pytest.mark.skipif(not IMMORTAL, reason="immortal objects: 3.12+")
def test_refcounts_skips_immortal_objects(leaky):
    with leakcheck.refcounts(None, True, 5, "interned"):
        leaky.leak_ref(None)
        leaky.leak_ref(5)


def test_refcounts_makes_no_verdict_when_the_block_raises(leaky):
    obj = Thing()
    with pytest.raises(KeyError):
        with leakcheck.refcounts(obj) as counts:
            leaky.leak_ref(obj)
            raise KeyError
    assert counts.after is None


# ---- watch and assert_finalized ---------------------------------------------

def test_a_dead_object_passes():
    obj = Thing()
    handle = leakcheck.watch(obj)
    assert handle.alive
    del obj
    leakcheck.assert_finalized(handle)
    assert not handle.alive
    assert "finalized" in repr(handle)


def test_an_object_in_a_collectable_cycle_passes():
    a, b = Thing(), Thing()
    a.other, b.other = b, a
    handles = leakcheck.watch(a), leakcheck.watch(b)
    del a, b
    leakcheck.assert_finalized(*handles)


KEPT = []


def test_a_module_global_is_the_root():
    obj = Thing()
    KEPT.append({"key": obj})
    handle = leakcheck.watch(obj)
    line = sys._getframe().f_lineno - 1
    del obj
    try:
        error = finalized_error(handle)
    finally:
        KEPT.clear()
    chain = error.diagnosis.chains[0]
    assert chain["kind"] == "module"
    assert chain["root"] == f"a global of module {__name__}"
    assert chain["expression"] == f"{__name__}.KEPT[0]['key']"
    assert [step["type"] for step in chain["path"]] == [
        "list", "dict", f"{__name__}.Thing"]
    assert chain["watched_at"] == f"{__file__}:{line}"
    assert chain["unseen_refs"] == 0
    report = error.report
    assert report.startswith("leakcheck: 1 watched object was not finalized")
    assert f"path: {__name__}.KEPT[0]['key']" in report


class Registry:
    entries = {}


def test_a_class_attribute_is_the_root():
    obj = Thing()
    Registry.entries["mine"] = obj
    handle = leakcheck.watch(obj)
    del obj
    try:
        chain = finalized_error(handle).diagnosis.chains[0]
    finally:
        Registry.entries.clear()
    assert chain["kind"] == "class"
    assert chain["root"] == f"an attribute of class {__name__}.Registry"
    assert chain["expression"] == f"{__name__}.Registry.entries['mine']"


def test_a_frame_local_is_the_root():
    def holder():
        mine = Thing()
        inner = {"deep": [mine]}
        handle = leakcheck.watch(mine)
        del mine
        return finalized_error(handle), inner

    error, _ = holder()
    chain = error.diagnosis.chains[0]
    assert chain["kind"] == "frame"
    assert chain["root"].startswith("local variable 'inner' of holder() (")
    assert chain["expression"] == "inner['deep'][0]"


def test_an_instance_attribute_reads_as_an_attribute():
    class Owner:
        pass

    owner = Owner()
    owner.child = Thing()
    handle = leakcheck.watch(owner.child)
    chain = finalized_error(handle).diagnosis.chains[0]
    assert chain["expression"] == "owner.child"


def test_a_closure_cell_is_followed():
    obj = Thing()

    def make():
        captured = obj

        def inner():
            return captured
        return inner

    keep = make()
    handle = leakcheck.watch(obj)
    del obj
    chain = finalized_error(handle).diagnosis.chains[0]
    assert chain["expression"] == "keep.__closure__[0].cell_contents"
    assert keep() is not None


def test_an_object_kept_by_a_c_static_list(leaky):
    obj = Thing()
    leaky.keep(obj)
    handle = leakcheck.watch(obj)
    del obj
    try:
        chain = finalized_error(handle).diagnosis.chains[0]
    finally:
        leaky.release_kept()
    assert chain["kind"] == "c"
    assert chain["root"].startswith("C code: nothing the garbage collector "
                                    "sees refers to the list [<")
    assert [step["type"] for step in chain["path"]] == [f"{__name__}.Thing"]
    assert chain["path"][0]["edge"] == "[0]"
    assert chain["unseen_refs"] == 0
    leakcheck.assert_finalized(handle)


def test_an_object_with_a_leaked_reference(leaky):
    obj = Thing()
    leaky.leak_ref(obj)
    handle = leakcheck.watch(obj)
    del obj
    error = finalized_error(handle)
    chain = error.diagnosis.chains[0]
    assert chain["kind"] == "c" and chain["path"] == []
    assert chain["unseen_refs"] == 1
    assert f"the {__name__}.Thing object at " in chain["root"]


def test_several_handles_report_only_the_survivors():
    kept, gone = Thing(), Thing()
    handles = [leakcheck.watch(kept), leakcheck.watch(gone)]
    del gone
    error = finalized_error(*handles)
    assert len(error.diagnosis.chains) == 1
    assert error.report.startswith("leakcheck: 1 watched object was")


def test_watch_needs_weak_references():
    for obj in (1, "text", (1, 2), Slotted()):
        with pytest.raises(TypeError, match="supports weak references"):
            leakcheck.watch(obj)


def test_assert_finalized_takes_only_handles():
    with pytest.raises(TypeError, match="takes the handles"):
        leakcheck.assert_finalized(Thing())


def test_a_chain_is_found_under_gc_freeze():
    obj = Thing()
    KEPT.append(obj)
    handle = leakcheck.watch(obj)
    del obj
    gc.freeze()
    try:
        chain = finalized_error(handle).diagnosis.chains[0]
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        KEPT.clear()
    assert chain["expression"] == f"{__name__}.KEPT[0]"


# ---- assert_no_garbage -----------------------------------------------------

def test_no_garbage_passes(leaky, garbage_cleanup):
    leaky.make_collectable()
    leakcheck.assert_no_garbage()


def test_uncollectable_cycles_are_listed_by_type(leaky, garbage_cleanup):
    before = len(gc.garbage)
    leaky.make_uncollectable()
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.assert_no_garbage()
    garbage = info.value.diagnosis.garbage
    assert {"type": "leakylib.Legacy", "count": before + 2, "new": 0} in \
        garbage
    assert info.value.report.startswith(
        f"leakcheck: gc.garbage holds {before + 2} uncollectable objects")
    assert "leakylib.Legacy: " in info.value.report
    assert len(gc.garbage) == before + 2      # left as it was


def test_debug_saveall_is_left_alone(garbage_cleanup):
    # What earlier tests left in cycles is freed first: under DEBUG_SAVEALL
    # the collection would save it too, and it would outnumber the types
    # this test looks for in the diagnosis's top.
    gc.collect()
    flags = gc.get_debug()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        a = [Thing()]
        a.append(a)
        del a
        with pytest.raises(leakcheck.LeakError) as info:
            leakcheck.assert_no_garbage()
        assert gc.get_debug() == gc.DEBUG_SAVEALL
    finally:
        gc.set_debug(flags)
        gc.garbage.clear()
    types = {entry["type"] for entry in info.value.diagnosis.garbage}
    assert {"list", f"{__name__}.Thing"} <= types
