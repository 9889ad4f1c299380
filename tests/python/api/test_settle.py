"""Settling clears caches without changing what the code under test can
observe: after a snapshot, attribute lookups move None's reference count
no more than they do without leakcheck."""

import importlib
import subprocess
import sys
import textwrap
import warnings
import weakref

import pytest

import leakcheck
from leakcheck import _core, _settle, cpython


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


# ---- the type attribute cache, trimmed after each collection

def _trimmed_table():
    """The type cache leakcheck trims after each snapshot's collection, or
    None where it clears the whole cache instead (the table not found, or
    code compiled to executors)."""
    leakcheck.snapshot()
    cache = cpython._typecache
    return cache if cache is not None and cache.filled else None


needs_trimmed_table = pytest.mark.skipif(
    not cpython.type_cache_trimmable(),
    reason="the type cache is trimmed on CPython with the GIL, on Linux, "
           "without a JIT, and not on a debug build of 3.12 or later")


def cacheable(name):
    """`name` as the type cache caches it: from 3.13 on, only interned
    names are."""
    return sys.intern(name) if sys.version_info >= (3, 13) else name


@needs_trimmed_table
def test_the_type_cache_keeps_the_names_something_else_holds():
    import ctypes
    import struct
    cache = _trimmed_table()
    assert cache is not None
    classes = [type(f"Kept{i}", (), {f"attribute{i}": i}) for i in range(40)]
    names = [cacheable(f"attribute{i}") for i in range(40)]    # held by us
    for cls, name in zip(classes, names):
        getattr(cls, name)
    leakcheck.snapshot()
    table = ctypes.string_at(cache.address, cache.ENTRIES * cache.STRIDE)
    kept = sum(struct.pack("<Q", id(name)) in table for name in names)
    # A few may have been pushed out by the snapshot's own lookups.
    assert kept >= 30, kept


@needs_trimmed_table
def test_a_name_that_garbage_and_the_type_cache_held_reads_as_nothing():
    """The name lives on in a cycle and in the cache; the cycle dies in
    the collection, so only a trim after it finds the name the cache's
    alone (one before it would leave a block and an allocation a run)."""
    assert _trimmed_table() is not None

    class Holder:
        pass

    def run(i):
        name = cacheable("".join(["looked_up_", str(i), "_once"]))
        getattr(Holder, name, None)
        getattr(Holder(), name, None)
        cycle = [name]
        cycle.append(cycle)

    run(0)
    for i in range(1, 8):
        with leakcheck.scope(probes=["blocks", "py_allocs", "py_bytes",
                                     "objects"]):
            run(i)


@needs_trimmed_table
def test_the_trim_counts_every_entry_of_a_name():
    cache = _trimmed_table()
    assert cache is not None

    class Meta(type):
        pass

    class Twice(metaclass=Meta):
        pass

    name = cacheable("".join(["in_two_entries_", str(id(Twice))]))
    getattr(Twice, name, None)      # the metaclass's lookup, then the class's
    getattr(Twice(), name, None)
    held = sys.getrefcount(name)
    assert _core.type_cache_trim(cache.address, cache.ENTRIES,
                                 cache.FILLER) == 0     # we hold it
    assert sys.getrefcount(name) == held
    del name
    assert _core.type_cache_trim(cache.address, cache.ENTRIES,
                                 cache.FILLER) >= 2


def _names_in(cache):
    """The address of the name each entry of the table holds."""
    import ctypes
    import struct
    table = ctypes.string_at(cache.address, cache.ENTRIES * cache.STRIDE)
    return {struct.unpack_from("<Q", table, at + 8)[0]
            for at in range(0, len(table), cache.STRIDE)}


@needs_trimmed_table
def test_the_trim_reads_the_entries_that_held_a_name_until_one_is_taken():
    """The engine's trim reads only the entries that held a name after the
    last trim, while no empty entry was taken since; a name it kept there
    that the cache alone holds now goes all the same.  A clear of the
    cache takes every empty entry: the next trim reads them all."""
    cache = _trimmed_table()
    assert cache is not None

    class Kept:
        pass

    name = cacheable("".join(["kept_then_the_caches_", str(id(Kept))]))
    getattr(Kept, name, None)
    address = id(name)
    # The same steps each time: their own lookups take no slot the last.
    for _ in range(3):
        leakcheck.snapshot()            # kept: this frame holds it
        read = _core.type_cache_trim_read()
        names = _names_in(cache)
    assert read < cache.ENTRIES
    assert address in names
    del name
    leakcheck.snapshot()
    read = _core.type_cache_trim_read()
    names = _names_in(cache)
    assert read < cache.ENTRIES
    assert address not in names

    sys._clear_type_cache()
    leakcheck.snapshot()
    assert _core.type_cache_trim_read() == cache.ENTRIES


@needs_trimmed_table
def test_the_type_cache_is_found_when_a_search_misses(tmp_path):
    """A lookup between a search's probe and its reading of memory can take
    the probe's slot (cpython.TYPE_CACHE_SEARCHES): here every slot of the
    first search is taken, and the table is found all the same, so that
    lookups after a snapshot leave None's count alone (on 3.10 the
    process that missed cleared the whole cache before every snapshot:
    None's count moved by a lookup's worth each)."""
    code = textwrap.dedent("""
        import sys
        from leakcheck import cpython
        searches = []
        real_find = cpython._TypeCache.find
        real_lookup = cpython._TypeCache._lookup

        def find(self):
            searches.append(self)
            real_find(self)

        def lookup(self, ctypes, lo, hi):
            name, hits = real_lookup(self, ctypes, lo, hi)
            return name, (hits if len(searches) > 1 else [])

        cpython._TypeCache.find, cpython._TypeCache._lookup = find, lookup
        import leakcheck
        leakcheck.snapshot()
        cache = cpython._typecache
        class Fresh:
            pass
        obj = Fresh()
        names = [f"name{i}" for i in range(2000)]
        before = sys.getrefcount(None)
        leakcheck.snapshot()
        for name in names:
            getattr(obj, name, None)
        print(len(searches), cache is not None and cache.filled,
              sys.getrefcount(None) - before)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "True", "0"]


# ---- what settling clears: every ABC cache and warning registry it finds

def abc_cache_sizes(cls):
    from _abc import _get_dump
    _, cache, negative, _ = _get_dump(cls)
    return len(cache), len(negative)


def fill_abc_caches():
    """isinstance/issubclass on ABCs of several hierarchies, with types they
    have not seen: entries in their caches and negative caches."""
    import collections.abc
    import io
    import numbers

    class Fresh:
        pass

    class FreshMapping(dict):
        pass

    for abc in (collections.abc.Mapping, collections.abc.Iterable,
                collections.abc.Hashable, collections.abc.Sized,
                numbers.Number, numbers.Integral, io.IOBase):
        isinstance(Fresh(), abc)
        issubclass(FreshMapping, abc)
    return Fresh, FreshMapping


def plan_abcs():
    return [cls for cls in map(weakref.ref.__call__, _settle._plan.abcs)
            if cls is not None]


@pytest.mark.parametrize("readable", [True, False])
def test_settle_empties_every_abc_cache_it_knows(readable, monkeypatch):
    leakcheck.snapshot()
    if readable and not _settle._abc_readable:
        pytest.skip("the C abc module's layout is not readable here")
    monkeypatch.setattr(_settle, "_abc_readable", readable)
    kept = fill_abc_caches()
    filled = [cls for cls in plan_abcs() if abc_cache_sizes(cls) != (0, 0)]
    assert len(filled) >= 7
    _settle.settle()
    assert [cls for cls in plan_abcs()
            if abc_cache_sizes(cls) != (0, 0)] == []
    del kept


def test_a_series_leaves_the_abc_caches_a_scope_empties():
    """A series' snapshots leave the ABC caches as they are (its warm-up
    absorbs their first fills); the next settle() outside a series, a
    scope's, empties them again."""
    import collections.abc
    leakcheck.snapshot()
    kept = fill_abc_caches()
    filled = [cls for cls in plan_abcs() if abc_cache_sizes(cls) != (0, 0)]
    assert len(filled) >= 7
    sizes = [abc_cache_sizes(cls) for cls in filled]
    series = leakcheck.Series(warmup=1, repeat=2)
    while series.next():
        pass
    assert [abc_cache_sizes(cls) for cls in filled] == sizes
    assert not series.leaked, series.report
    with leakcheck.scope():
        pass
    assert abc_cache_sizes(collections.abc.Mapping) == (0, 0)
    del kept


def test_a_series_without_warmup_empties_the_abc_caches():
    """With no warm-up run to absorb a first fill, a series' snapshots
    empty the ABC caches, as a scope's do."""
    import collections.abc
    leakcheck.snapshot()
    kept = fill_abc_caches()
    assert abc_cache_sizes(collections.abc.Mapping) != (0, 0)
    series = leakcheck.Series(warmup=0, repeat=1)
    while series.next():
        pass
    assert abc_cache_sizes(collections.abc.Mapping) == (0, 0)
    del kept


def test_a_series_around_an_abc_first_use_is_clean():
    """Each run checks a type the ABCs have not seen (a class made in the
    run, which dies with it): the series is clean, its caches kept."""
    import collections.abc

    def run():
        class Fresh:
            pass
        isinstance(Fresh(), collections.abc.Mapping)
        issubclass(Fresh, collections.abc.Iterable)

    run()
    for _ in range(3):
        series = leakcheck.repeat(run, repeat=4)
        assert not series.leaked, series.report


def test_keeping_the_abc_caches_lasts_one_settle():
    leakcheck.snapshot()
    kept = fill_abc_caches()
    _settle.keep_abc_caches_next()
    _settle.settle()
    assert any(abc_cache_sizes(cls) != (0, 0) for cls in plan_abcs())
    _settle.settle()
    assert [cls for cls in plan_abcs()
            if abc_cache_sizes(cls) != (0, 0)] == []
    del kept


def test_the_abc_layout_is_read_as_get_dump_shows_it():
    pytest.importorskip("_abc")
    assert _settle._abc_layout_known()
    import collections.abc
    leakcheck.snapshot()

    class Fresh:
        pass

    isinstance(Fresh(), collections.abc.Sequence)
    assert _core.abc_cache_sizes(collections.abc.Sequence) == \
        abc_cache_sizes(collections.abc.Sequence) != (0, 0)


def test_abc_reset_skips_only_the_empty_caches():
    import collections.abc
    leakcheck.snapshot()
    if not _settle._abc_readable:
        pytest.skip("the C abc module's layout is not readable here")

    class Fresh:
        pass

    isinstance(Fresh(), collections.abc.Sequence)
    refs = (weakref.ref(collections.abc.Sequence),
            weakref.ref(collections.abc.Awaitable))
    assert abc_cache_sizes(collections.abc.Awaitable) == (0, 0)
    reset = []
    seen = bytearray(2)
    assert _core.abc_reset(refs, reset.append, seen, False) == 1
    assert reset == [collections.abc.Sequence]
    assert seen == bytearray([1, 0])


def test_a_light_abc_reset_looks_only_at_the_abcs_seen_filled():
    import collections.abc
    leakcheck.snapshot()
    if not _settle._abc_readable:
        pytest.skip("the C abc module's layout is not readable here")

    class Fresh:
        pass

    refs = (weakref.ref(collections.abc.Sequence),
            weakref.ref(collections.abc.Awaitable))
    isinstance(Fresh(), collections.abc.Awaitable)
    reset = []
    assert _core.abc_reset(refs, reset.append, bytearray(2), True) == 0
    assert abc_cache_sizes(collections.abc.Awaitable) != (0, 0)
    seen = bytearray([0, 1])
    assert _core.abc_reset(refs, reset.append, seen, True) == 1
    assert reset == [collections.abc.Awaitable]
    with pytest.raises(TypeError):
        _core.abc_reset(refs, reset.append, bytearray(1), False)


WARNING_MODULE = '''
import warnings


def warn(text):
    warnings.warn(text, UserWarning)
'''


@pytest.fixture
def warning_module(tmp_path, monkeypatch, request):
    """A module that warns, imported under a name of the test's own (a
    module removed and another added would leave the count of modules as
    it was, which is how settling sees that modules came)."""
    name = "lc_settle_warner_" + request.node.callspec.id
    (tmp_path / f"{name}.py").write_text(WARNING_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(name)


@pytest.mark.parametrize("imported", ["before", "after"])
def test_settle_empties_warning_registries(warning_module, imported):
    if imported == "before":
        leakcheck.snapshot()            # the plan knows the module
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("default")
        warning_module.warn("once here")
    assert len(shown) == 1
    registry = vars(warning_module)["__warningregistry__"]
    assert registry
    others = [ns["__warningregistry__"] for ns in
              (vars(m) for m in list(sys.modules.values())
               if type(getattr(m, "__dict__", None)) is dict)
              if type(ns.get("__warningregistry__")) is dict]
    _settle.settle()
    assert registry == {}
    assert vars(warning_module)["__warningregistry__"] is registry
    assert [r for r in others if r] == []


def test_clear_registries_counts_what_it_emptied():
    first = {"__warningregistry__": {"version": 1, ("a", Warning, 1): True}}
    second = {"x": 1}
    third = {"__warningregistry__": "not a dict"}
    seen = bytearray(3)
    assert _core.clear_registries((first, second, third), seen, False) == 1
    assert first == {"__warningregistry__": {}}
    assert third == {"__warningregistry__": "not a dict"}
    assert seen == bytearray([1, 0, 0])


def test_call_each_calls_every_clear_past_one_that_raises():
    called = []

    def failing():
        called.append("failing")
        raise RuntimeError("a renamed stdlib internal")

    clears = (lambda: called.append("first"), failing,
              lambda: called.append("last"))
    assert _core.call_each(clears) == 2
    assert called == ["first", "failing", "last"]


def test_call_each_lets_an_interrupt_through():
    called = []

    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _core.call_each((interrupted, lambda: called.append("after")))
    assert called == []
    with pytest.raises(TypeError, match="tuple"):
        _core.call_each([interrupted])


def test_a_light_clear_empties_only_the_registries_seen_before():
    seen_one = {"__warningregistry__": {("a", Warning, 1): True}}
    new_one = {"__warningregistry__": {("b", Warning, 2): True}}
    seen = bytearray([1, 0])
    assert _core.clear_registries((seen_one, new_one), seen, True) == 1
    assert seen_one == {"__warningregistry__": {}}
    assert new_one["__warningregistry__"]
    assert seen == bytearray([1, 0])
    assert _core.clear_registries((seen_one, new_one), seen, False) == 2
    assert new_one == {"__warningregistry__": {}}
    assert seen == bytearray([1, 1])


# Where settling looks for the filters list warn() holds.
_WHERE_WARN_HOLDS_IS_LOOKED_FOR = pytest.mark.skipif(
    getattr(sys.flags, "context_aware_warnings", False) or
    sys.implementation.name != "cpython" or
    not sys.platform.startswith("linux"),
    reason="the list warn() holds is looked for on CPython on Linux, where "
    "catch_warnings() swaps warnings.filters")


def _warned_in_a_block():
    """Warns in a catch_warnings() block whose filter ignores the
    warning's own category; returns a weak reference to that category,
    which only the block's copy of the filters list holds (and the C
    warn(), which keeps that copy)."""
    import gc

    class Ignored(UserWarning):
        pass

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Ignored)
        warnings.warn("ignored", Ignored)
    ref = weakref.ref(Ignored)
    del Ignored
    gc.collect()
    return ref


@pytest.mark.skipif(getattr(sys.flags, "context_aware_warnings", False),
                    reason="context-aware warnings: catch_warnings() leaves "
                    "warnings.filters alone")
def test_settle_frees_the_filters_a_warning_in_catch_warnings_left():
    """The C warn() keeps the filters list it read last: the copy of a
    catch_warnings() block it warned in, and the filters only that copy
    holds, outlive the block until the next warning, or settling."""
    import gc
    ref = _warned_in_a_block()
    assert ref() is not None            # the block's filter, still held
    filters = list(warnings.filters)
    _settle.settle()
    gc.collect()
    assert ref() is None
    # The list as it was: the filter settling put first is gone.
    assert warnings.filters == filters
    assert not any(f[2] is _settle._FiltersSynced for f in warnings.filters)


@_WHERE_WARN_HOLDS_IS_LOOKED_FOR
def test_the_filters_list_warn_holds_is_read_where_it_is():
    """Settling syncs the list warn() holds only when it is another list
    than warnings.filters: the address it reads must follow every list
    warn() takes up."""
    import functools
    from leakcheck import _core
    address = cpython.filters_warn_holds(
        warnings, functools.partial(_settle._sync_now, warnings))
    assert address is not None

    def held():
        return _core.pointer_at(address)

    assert held() == id(warnings.filters)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inner = warnings.filters
        assert held() != id(inner)          # no warning yet in the block
        warnings.warn("taken up", UserWarning)
        assert held() == id(inner)
    assert held() == id(inner)              # stale: the block is over
    _settle._sync_warning_filters(warnings)
    assert held() == id(warnings.filters)
    _settle.settle()
    assert _settle._filters_held, "settling found no address to read"


@_WHERE_WARN_HOLDS_IS_LOOKED_FOR
def test_where_the_word_is_found_the_stale_list_goes_without_a_warning(
        monkeypatch):
    """Once settling found the word that holds the list warn() keeps, it
    points that word at warnings.filters itself: the stale copy of a block
    and the filters only it held are freed, and no warning is issued."""
    import gc
    _settle.settle()
    assert _settle._filters_held, "settling found no address to read"

    def no_warning(warnings):
        raise AssertionError("a warning was issued to sync the filters")

    monkeypatch.setattr(_settle, "_sync_now", no_warning)
    ref = _warned_in_a_block()
    assert ref() is not None            # the block's filter, still held
    filters = list(warnings.filters)
    _settle._sync_warning_filters(warnings)
    gc.collect()
    assert ref() is None
    assert warnings.filters == filters
    _settle._sync_warning_filters(warnings)     # the same list: nothing
    # warn() works on with the list the word now holds.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.warn("after", UserWarning)
    assert [str(w.message) for w in seen] == ["after"]


def test_looking_for_the_filters_list_is_no_runs_growth(tmp_path):
    """Settling looks for the list warn() holds when it makes its plan,
    before it clears the caches: what looking filled is cleared in that
    snapshot, not in the next."""
    code = textwrap.dedent("""
        import warnings
        import leakcheck
        with warnings.catch_warnings():
            s = leakcheck.Series(warmup=1, repeat=4,
                                 probes=["blocks", "py_allocs", "objects"])
            while s.next():
                pass
        print(s.warmup_measured, s.warmup_growth)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout
    assert out.split() == ["True", "{}"], out


def test_settling_the_filters_leaves_what_warnings_do():
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        _settle.settle()
        warnings.warn("shown", UserWarning)
    assert [str(w.message) for w in shown] == ["shown"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _settle.settle()                # its own warning is ignored
        with pytest.raises(UserWarning):
            warnings.warn("raised", UserWarning)


# ---- the frames a code object keeps (3.9, 3.10)

@pytest.mark.skipif(not cpython.ZOMBIE_FRAMES,
                    reason="from 3.11 on a code object keeps no frame")
def test_made_frames_cover_comprehensions_and_inner_functions():
    """A function's first call leaves a frame for each code object it ran
    (its comprehension, generator expression and inner function too):
    made by make_frames() before, the call reads as nothing."""
    def body(xs):
        def inner(y):
            return y + 1
        return [inner(x) for x in xs] + list(x for x in xs)

    cpython.make_frames(body)
    before = leakcheck.snapshot(["blocks"])
    body([1, 2])
    after = leakcheck.snapshot(["blocks"])
    assert (after - before)["blocks"] == 0


def _running(work):
    """Runs `work`: the function running while the snapshots below read,
    which `work` calls again, nested in that call."""
    return work()


def _running_twice():
    """A call of _running nested in one nested in the running one."""
    return _running(int)


def _wide(depth):
    """A function of many locals (a large frame), called inside itself."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = depth
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = b8 = b9 = depth
    c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = c8 = c9 = depth
    d0 = d1 = d2 = d3 = d4 = d5 = d6 = d7 = d8 = d9 = depth
    if depth:
        _wide(depth - 1)
    return depth


@pytest.mark.skipif(not cpython.ZOMBIE_FRAMES,
                    reason="from 3.11 on a code object keeps no frame")
def test_a_running_functions_nested_calls_read_as_nothing():
    """Two calls of a function nested in a call of it that is running (a
    hook called inside a hook inside the hook that runs the test): the
    inner one takes a frame from the frame free list, a large one that
    _wide() left there, and leaves it behind as the function's own.  Read
    with that frame, the C heap and py_bytes grew by its size (+736 and
    +728 bytes on 3.10.13).  The engine frees the frames the running
    functions keep, so the calls read as nothing."""
    probes = ["blocks", "py_allocs", "native_bytes"]
    deltas = []

    def measured():
        _wide(1)
        _running(_running_twice)
        before = leakcheck.snapshot(probes)
        _wide(1)                    # its outer frame goes to the free list
        _running(_running_twice)
        after = leakcheck.snapshot(probes)
        deltas.append(after - before)

    _running(measured)
    assert deltas == [dict.fromkeys(probes, 0)]


def _raise():
    raise ValueError("kept in a cycle")


def _garbage_holding_a_frame_of_running():
    """A reference cycle, unreachable on return, that holds the frame of a
    call of _running (in the traceback of an exception it let through)."""
    try:
        _running(_raise)
    except ValueError as e:
        cycle = [e]
        cycle.append(cycle)


@pytest.mark.skipif(not cpython.ZOMBIE_FRAMES,
                    reason="from 3.11 on a code object keeps no frame")
def test_a_frame_the_collection_frees_hides_no_leak(leaky):
    """A frame of a running function that dies in a snapshot's collection
    becomes that function's own (its zombie): freed before the collection
    of the snapshot after, it read there as a block less, and a leak of
    one block as nothing.  Freed after each collection, it reads as
    nothing, and the leak as itself."""
    leaky.clean_pymem(64)
    deltas = []

    def measured():
        _garbage_holding_a_frame_of_running()
        before = leakcheck.snapshot(["blocks"])
        leaky.leak_pymem(64)
        after = leakcheck.snapshot(["blocks"])
        deltas.append(after - before)

    _running(measured)
    assert deltas == [{"blocks": 1}]


# ---- the instrumentation a code object makes after a trace (3.12 on)

def _fresh_functions(count):
    """A module-like namespace of `count` functions none has run yet."""
    namespace = {}
    exec("".join(f"def f{n}(x):\n    return [x, {n}]\n\n"
                 for n in range(count)), namespace)
    return namespace


def _first_call_blocks(func):
    before = leakcheck.snapshot(["blocks"])
    func(1)
    after = leakcheck.snapshot(["blocks"])
    return (after - before)["blocks"]


@pytest.mark.skipif(not hasattr(sys, "monitoring"),
                    reason="before 3.12 tracing instruments no code")
def test_code_instrumented_after_a_trace_runs_first_as_nothing():
    """After a trace, a code object's first run allocates its
    instrumentation data: a block its caller reads as growth.  Given it by
    instrument_code() first, the code's first run reads as nothing."""
    namespace = _fresh_functions(8)
    sys.settrace(lambda *args: None)
    sys.settrace(None)
    assert _first_call_blocks(namespace["f0"]) > 0
    cpython.instrument_code([namespace])
    assert [_first_call_blocks(namespace[f"f{n}"]) for n in range(1, 8)] \
        == [0] * 7
    # The tool it took for the moment is free again.
    assert all(sys.monitoring.get_tool(t) is None
               for t in cpython._UNASSIGNED_TOOLS)


def test_a_collection_with_the_callbacks_aside_keeps_them_and_any_added(
        monkeypatch):
    """settle_and_collect(quiet_callbacks=True): no callback sees its
    collection, all are back in their order afterwards, and one another
    thread added meanwhile stays, after them."""
    import gc
    seen = []

    def mine(phase, info):
        seen.append(phase)

    def added(phase, info):
        pass

    class Engine:
        @staticmethod
        def Snapshot(probes):
            assert probes == 0
            assert mine not in gc.callbacks
            gc.collect()
            gc.callbacks.append(added)  # as another thread might

    monkeypatch.setattr(_settle, "_core", Engine)
    gc.callbacks.append(mine)
    try:
        _settle.settle_and_collect(quiet_callbacks=True)
        assert seen == []
        assert gc.callbacks[-2:] == [mine, added]
    finally:
        for callback in (mine, added):
            while callback in gc.callbacks:
                gc.callbacks.remove(callback)


def _task_registry():
    """asyncio's set of live tasks (a WeakSet's own set)."""
    import asyncio.tasks
    for name in ("_scheduled_tasks", "_all_tasks"):
        tasks = getattr(asyncio.tasks, name, None)
        if tasks is not None:
            return tasks.data
    pytest.skip("no task registry in this asyncio")


def test_asyncios_task_registry_emptied_is_no_growth():
    """Eight tasks at once grow asyncio's registry of live tasks past its
    inline table; gone, they leave the set empty with a table of its own,
    which only a later addition may give back.  Settling gives it back:
    a run of eight tasks reads as nothing."""
    import asyncio

    async def many(n):
        await asyncio.gather(*(asyncio.sleep(0) for _ in range(n)))

    registry = _task_registry()
    for _ in range(3):
        # First uses, the scope's own code's too (from 3.12 a code object
        # that first runs after a trace, as an earlier test's, allocates
        # its instrumentation data then).
        try:
            with leakcheck.scope(probes=["blocks"]):
                asyncio.run(many(8))
        except leakcheck.LeakError:
            pass
    registry.clear()                    # the inline table
    empty = sys.getsizeof(registry)
    asyncio.run(many(8))
    if sys.getsizeof(registry) == empty:
        # 3.14+: the C tasks are kept in a list of their own.
        pytest.skip("this asyncio keeps its tasks elsewhere")
    registry.clear()
    with leakcheck.scope(probes=["blocks"]):
        asyncio.run(many(8))
        assert sys.getsizeof(registry) > empty      # a table of its own
    assert not registry and sys.getsizeof(registry) == empty


def test_a_set_shrunk_after_the_collection_keeps_what_it_holds():
    """The engine empties only the sets it was given that hold nothing,
    after the collection: tasks that die in it leave the set there."""
    class Task:
        pass

    empty, held = set(), {1}
    holder = weakref.WeakSet()
    inline = sys.getsizeof(set())
    # Settling registers asyncio's sets anew whenever the modules change:
    # its plan made first, these stay registered.
    leakcheck.snapshot(["objects"])
    try:
        _core.shrink_after_collect((empty, held, holder.data))
        tasks = [Task() for _ in range(8)]
        for task in tasks:
            task.cycle = task           # dies in the collection alone
            holder.add(task)
        empty.update(range(8))
        for i in range(8):
            empty.discard(i)            # empty, with a table of its own
        del tasks, task
        assert len(holder) == 8 and sys.getsizeof(empty) > inline
        leakcheck.snapshot(["objects"])
        assert len(holder) == 0
        assert sys.getsizeof(empty) == sys.getsizeof(holder.data) == inline
        assert held == {1}
    finally:
        _core.shrink_after_collect(_settle._task_sets(sys.modules))
