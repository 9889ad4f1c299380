"""Settling: what leakcheck clears before the full collection that starts
every snapshot, so that clean code never looks leaky.

The interpreter and the standard library fill caches on first use: compiled
regular expressions, source lines, typing's generic aliases, warning
registries.  Each of those would read as growth in the scope that first
touched it.  CPython's own refleak runner clears them between runs
(Lib/test/libregrtest/utils.py, clear_caches, and refleak.py,
dash_R_cleanup, as of 3.15: fnmatch's two caches, encodings' and the
codec lookup cache among them, internal caches last); ``settle()`` clears
the same, with one rule the test
runner does not need: **only caches whose clearing cannot change
what a program computes.**  So it leaves out what regrtest resets but a
program could observe: ctypes' pointer type cache (``POINTER(t)`` would stop
being the same type), mimetypes' database and urllib's opener (user
additions would be lost), doctest.master, sys.path_importer_cache.
Linecache keeps the sources that no file backs (they could not be read
again; 3.14's ``linecache._interactive_cache``, which regrtest saves and
restores, is left alone for the same reason).  ABC registries are left as
they are: a registration is what a program asked for, not a cache.

The C warnings module's copy of ``warnings.filters`` is brought back to
that list (``_sync_warning_filters``): ``warnings.warn()`` keeps the list
it last read, and the one it read inside a ``catch_warnings()`` block
outlives the block until the next warning, which would free it (and the
filters only it holds) in whatever runs next.

The type attribute cache is cleared last (once, where its table is found;
from then on the engine trims it after each snapshot's collection, of the
names only it holds), and CPython 3.9 and 3.10's opcode cache is turned
off the first time: how, and why, is set out in leakcheck.cpython, with
every other CPython-version patch.

The engine calls ``settle()`` (through ``_core.set_settle``) with the GIL
held, before its collection; freelists are the collection's business.  It
runs on every snapshot, so it is kept cheap (see bench/bench_python.py),
and allocation-neutral: it creates nothing that outlives the call.

Other threads may run Python code between its steps: every step is a
cache clear the standard library itself tolerates concurrently.  A step
that fails (a stdlib internal renamed in some version) is skipped rather
than making every snapshot fail.
"""

import collections.abc
import contextlib
import functools
import gc
import operator
import sys
import weakref
from collections import deque
from abc import ABC, ABCMeta

from . import _core, cpython

try:
    from _abc import _reset_caches      # the C implementation of abc
except ImportError:                     # pragma: no cover (_py_abc)
    def _reset_caches(cls):
        cls._abc_caches_clear()

__all__ = ["settle"]

# The roots of the ABC hierarchies whose subclass caches settle() clears,
# with every subclass: collections.abc's base classes and abc.ABC; the
# roots in modules that may not be imported are looked up on each call.
_ABC_ROOTS = tuple(
    cls for cls in (getattr(collections.abc, name)
                    for name in collections.abc.__all__)
    if isinstance(cls, ABCMeta)
    and not any(isinstance(base, ABCMeta) for base in cls.__bases__)
) + (ABC,)
_OPTIONAL_ABC_ROOTS = (("numbers", "Number"), ("io", "IOBase"),
                       ("typing", "Protocol"))

# (module, attribute path, method): caches cleared by calling
# module.<attribute path>.<method>() when the module is imported.
_CACHE_CLEARS = (
    ("re", "", "purge"),
    ("_strptime", "_regex_cache", "clear"),
    ("fnmatch", "_compile_pattern", "cache_clear"),
    ("fnmatch", "_re_escape", "cache_clear"),           # 3.14+
    ("tokenize", "_compile", "cache_clear"),
    ("urllib.parse", "", "clear_cache"),
    ("struct", "", "_clearcache"),
    ("filecmp", "_cache", "clear"),
    ("gettext", "_translations", "clear"),
    ("fractions", "_hash_algorithm", "cache_clear"),
    ("inspect", "_filesbymodname", "clear"),
    ("inspect", "modulesbyfile", "clear"),
    ("inspect", "_shadowed_dict_from_weakref_mro_tuple", "cache_clear"),
    ("importlib.metadata", "FastPath.__new__", "cache_clear"),
    ("encodings", "_cache", "clear"),
)


class _FiltersSynced(Warning):
    """The category of the warning settle() issues to itself, which a
    filter of its own ignores (_sync_warning_filters)."""


_SYNC_FILTER = ("ignore", None, _FiltersSynced, None, 0)
_NO_LOCK = contextlib.nullcontext()
try:
    from _warnings import warn_explicit as _c_warn_explicit
except ImportError:                     # pragma: no cover (no C warnings)
    _c_warn_explicit = None


def _sync_warning_filters(warnings):
    """Points the C warnings module's copy of the filters list back at
    ``warnings.filters``.

    The C ``warn()`` reads ``warnings.filters`` at each call and keeps that
    list in the interpreter's state (``interp->warnings.filters``,
    Python/_warnings.c, get_warnings_filters()) until its next call.  A
    warning issued inside ``catch_warnings()`` leaves it the block's copy
    of the list, with the filters added in the block and the ones only
    the enclosing list held (pytest adds two to the list it makes for each
    test); the next warning, anywhere, frees them.  On CPython 3.14+
    pytest-asyncio warns so in every async test (it reads and sets the
    deprecated event loop policy in a block that ignores the warning):
    each test's first warning freed what the previous test's last one
    left, and the run it came in read as a drop.

    Every C warn() reads ``warnings.filters`` first, so which list it keeps
    changes nothing a program computes.  One warning of settle()'s own
    category, with an ``ignore`` filter for it first in the list (taken
    out after, the list as it was), makes it keep the current list and
    frees the stale one.  Nothing to do where warnings are context-aware
    (``catch_warnings()`` then leaves ``warnings.filters`` alone, and a
    warning reads the context's filters first) or where ``warnings`` is the
    pure-Python implementation.

    Where the word of the interpreter's state that holds the list warn()
    holds is found (_look_for_filters_held), no warning is issued: the
    word is read, and pointed at ``warnings.filters`` (_core.hold(), as
    warn() would) only when it holds another list.  In the plugin,
    nothing is done in the snapshot after a test's run that warned
    nowhere else than in the test's own list; the one before it points
    the word away from the list of the previous test's block, without
    the warning's work."""
    filters = _filters_c_warn_reads(warnings)
    if filters is None:
        return
    held = _filters_held
    if not held:
        _sync_now(warnings)
    elif _core.pointer_at(held) != id(filters):
        # 3.14+: under the lock warn() and the filter functions take.
        with getattr(warnings, "_lock", _NO_LOCK):
            _core.hold(held, filters)


def _filters_c_warn_reads(warnings):
    """``warnings.filters``, where the C warn() reads it and keeps the list
    it read (see _sync_warning_filters); else None."""
    if warnings is None or _c_warn_explicit is None or _CONTEXT_AWARE:
        return None
    filters = getattr(warnings, "filters", None)
    if type(filters) is not list or \
            getattr(warnings, "warn_explicit", None) is not _c_warn_explicit:
        return None
    return filters


# Set at start-up (-X context_aware_warnings), read at each snapshot (a
# missing attribute of sys.flags costs a caught AttributeError).
_CONTEXT_AWARE = bool(getattr(sys.flags, "context_aware_warnings", False))
# The address of the word that holds the filters list warn() holds; None
# until looked for (_look_for_filters_held), False where it was not found.
_filters_held = None


def _look_for_filters_held(warnings):
    """Looks for the filters list warn() holds, once `warnings` is
    imported; when settle() makes its plan, before it clears the caches:
    what looking fills (ctypes' and the like) is then cleared in the same
    settle(), not in the next snapshot's, where it read as a drop."""
    global _filters_held
    if _filters_held is not None or _filters_c_warn_reads(warnings) is None:
        return
    _filters_held = False
    try:
        _filters_held = cpython.filters_warn_holds(
            warnings, functools.partial(_sync_now, warnings)) or False
    except Exception:
        pass


def _sync_now(warnings):
    """Makes warn() take up ``warnings.filters`` (_sync_warning_filters)."""
    filters = warnings.filters
    # 3.14+: the lock warn() and the filter functions take.
    with getattr(warnings, "_lock", _NO_LOCK):
        filters.insert(0, _SYNC_FILTER)
        try:
            _c_warn_explicit("settled", _FiltersSynced, "leakcheck", 1,
                             "leakcheck")
        finally:
            # The first filter equal to it, which only it is (another
            # thread may have put one before it).
            filters.remove(_SYNC_FILTER)


def _noop_codec_search(name):
    return None


def _clear_codecs_cache():
    """The interpreter's codec lookup cache has no clear(); unregistering
    a search function empties it (3.10+), as CPython's refleak runner
    does.  A first codecs.lookup() of a name would otherwise grow it."""
    import codecs
    codecs.register(_noop_codec_search)
    codecs.unregister(_noop_codec_search)


class _Plan:
    """What settle() clears, resolved for one set of imported modules:
    finding it walks modules and class hierarchies, using it is a few
    loops.  Remade when the number of modules changes (an import), so an
    ABC subclass defined without an import since is left out until then."""

    __slots__ = ("modules", "clears", "abcs", "namespaces", "abcs_seen",
                 "registries_seen")

    def __init__(self, modules):
        self.modules = len(modules)
        self.clears = tuple(_resolve_clears(modules))
        self.abcs = tuple(weakref.ref(cls) for cls in _abcs(modules))
        self.namespaces = module_namespaces(modules)
        # A byte per ABC and per namespace, set once settling found the
        # ABC's caches or the namespace's warning registry filled: what a
        # light settle() looks at.
        self.abcs_seen = bytearray(len(self.abcs))
        self.registries_seen = bytearray(len(self.namespaces))


def module_namespaces(modules):
    """The namespaces (dicts) of the modules of `modules` (sys.modules)."""
    return tuple(ns for ns in (getattr(m, "__dict__", None)
                               for m in list(modules.values()))
                 if type(ns) is dict)


def _abc_layout_known():
    """Whether _core reads the C abc module's two caches of an ABC as
    _abc._get_dump() shows them: in a throwaway ABC, empty, then with an
    entry in each, then reset.  Only then may settling skip the ABCs whose
    caches are both empty (see _reset_abc_caches)."""
    try:
        from _abc import _get_dump
    except ImportError:                 # pragma: no cover (_py_abc)
        return False

    class Probe(ABC):
        pass

    class Sub(Probe):
        pass

    class Other:
        pass

    def sizes():
        _, cache, negative, _ = _get_dump(Probe)
        return len(cache), len(negative)

    seen = [(_core.abc_cache_sizes(Probe), sizes())]
    issubclass(Sub, Probe)              # the cache
    issubclass(Other, Probe)            # the negative cache
    seen.append((_core.abc_cache_sizes(Probe), sizes()))
    _reset_caches(Probe)
    seen.append((_core.abc_cache_sizes(Probe), sizes()))
    return [read for read, _ in seen] == [dumped for _, dumped in seen] \
        == [(0, 0), (1, 1), (0, 0)]


_abc_readable = False


def _reset_abc_caches(abcs, seen, light):
    """Resets the caches of the ABCs of `abcs` (weak references), as
    _abc._reset_caches does; where the layout of the C abc's data is known,
    only of those whose caches hold something (resetting an empty cache
    changes nothing), in a loop that costs a few nanoseconds an ABC, and
    marks them in `seen`; when `light`, only of the ABCs marked there."""
    if _abc_readable:
        _core.abc_reset(abcs, _reset_caches, seen, light)
    else:
        _exhaust(map(_reset_caches, filter(_not_none, map(_deref, abcs))))


_plan = None
_exhaust = deque(maxlen=0).extend
_deref = weakref.ref.__call__
_not_none = functools.partial(operator.is_not, None)


_light = False


def settle_lightly_next(light=True):
    """Makes the next settle() light: for the two snapshots around a
    series' last warm-up run, which serve only to spare the measured runs
    when that run grew nothing.  Of the ABC caches and the warning
    registries, whose search looks at every ABC and every module's
    namespace, a light settle() clears only those settling found filled
    before (in any earlier snapshot); the other caches it clears as
    always.  What it leaves is left on both sides of the run: a cache the
    run fills reads as growth, one it empties as a drop, and either way
    that run is not taken as measured; the measured runs that follow are
    settled fully (the first of them is compared with the light snapshot
    unless the caller rebases the series, as the pytest plugin does: what
    that snapshot left can only read as a drop there).  A leak could hide
    only behind a drop of exactly its size in every probe at once.  What
    runs between two tests (pytest's reporting, the next test's set-up)
    fills the same few ABC caches test after test, and they are soon
    known.  Leaving the other caches was measured worse: between two
    tests the reporting fills the type cache, and real suites' fixtures
    the standard library's caches (frozenlist's suite: 5 of 90 clean
    tests ran once when they were left, 51 when cleared).  False takes it
    back (the snapshot did not settle)."""
    global _light
    _light = light


_abcs_kept = False


def keep_abc_caches_next(keep=True):
    """Makes the next settle() leave the ABC caches as they are: for the
    snapshots of a series with warm-up runs, which absorb an ABC cache's
    first fill (isinstance(x, Mapping) on a type not seen before stores a
    weak reference in Mapping's cache once; that type's death takes it out
    again).  A scope, or a series without warm-up runs, has nothing to
    absorb it: its settle() empties them, so that such a first fill never
    reads as its growth.  Emptied at every snapshot, the caches made
    pytest's own isinstance checks take the slow path in every reported
    run (pytest's node classes are ABCs too: the plugin makes a new node
    type's first checks before the series' first snapshot).  Left, a clean
    test under the plugin costs fewer instructions and cache misses
    (CHANGELOG), with the same verdicts on bench/clean_corpus.py and the
    real suites of bench/bench_suite.py.
    False takes it back (the snapshot did not settle)."""
    global _abcs_kept
    _abcs_kept = keep


def settle():
    """Clears the first-use caches of the interpreter and the standard
    library.  Never raises for a cache it cannot clear."""
    global _plan, _abc_readable, _light, _abcs_kept
    light = _light and _plan is not None
    _light = False
    abcs_kept = _abcs_kept
    _abcs_kept = False
    modules = sys.modules
    if _plan is None:
        try:
            _abc_readable = _abc_layout_known()
        except Exception:
            _abc_readable = False
        # A collection untracks the tuples and dicts that hold nothing to
        # track, but a container of one untracked in the same pass only in
        # the next: in a process never collected before, the second
        # snapshot would count fewer objects than the first.
        gc.collect()
        cpython.first_settle()
    if _plan is None or _plan.modules != len(modules):
        _plan = None                    # the old one's memory first
        _plan = _Plan(modules)
        light = False
        try:
            cpython.mark_code(_plan.namespaces)
        except Exception:
            pass
        try:
            _core.shrink_after_collect(_task_sets(modules))
        except Exception:
            pass
        _look_for_filters_held(modules.get("warnings"))
    plan = _plan
    try:
        _core.call_each(plan.clears)    # each in turn, in C
    except Exception:
        pass
    _clear_linecache(modules.get("linecache"))
    # The loops over every ABC and every module run in C: settling runs
    # before every snapshot.
    if not abcs_kept:
        try:
            _reset_abc_caches(plan.abcs, plan.abcs_seen, light)
        except Exception:
            pass
    # warnings.warn() makes a __warningregistry__ in the module it blames
    # and adds an entry per distinct warning.  Emptied, not deleted: adding
    # and deleting a key now and then resizes the module's namespace.
    try:
        _core.clear_registries(plan.namespaces, plan.registries_seen, light)
    except Exception:
        pass
    try:
        _sync_warning_filters(modules.get("warnings"))
    except Exception:
        pass
    _flush_std_streams()
    cpython.clear_type_cache()  # last: the steps above look attributes up


def settle_and_collect(quiet_callbacks=False):
    """What every snapshot does first: settle and collect fully (a
    snapshot of no probe is exactly that), which also empties CPython's
    free lists.  `quiet_callbacks`: set the callbacks in gc.callbacks
    (hypothesis installs one to time the collections) aside meanwhile.
    The collector hands them an info dict it makes after emptying the
    lists and frees at once, into the dict free list, where the next
    PyDict_New() takes it: code that must allocate its first dict fresh
    (a tracker that never saw the free list filled) asks for this."""
    if not quiet_callbacks:
        _core.Snapshot(0)
        return
    callbacks = gc.callbacks[:]
    gc.callbacks.clear()
    try:
        _core.Snapshot(0)
    finally:
        # Put back ahead of any a thread added meanwhile, which stays.
        gc.callbacks[:0] = callbacks


# asyncio's registries of live tasks: sets (a WeakSet's is its `data`)
# that every task goes in while it runs, 3.9 to 3.11 `_all_tasks`, from
# 3.12 `_scheduled_tasks` and `_eager_tasks`.  Empty after a snapshot's
# collection, each gets its inline table back there (the engine's
# shrink_after_collect, in leakcheck/_core.c, says why): janus's async
# tests on CPython 3.13 each made or freed that table's block in their
# run, 19 of 103 clean ones ran more than once for it.
_TASK_SETS = ("_all_tasks", "_scheduled_tasks", "_eager_tasks")


def _task_sets(modules):
    """asyncio's registries of live tasks, when it is imported."""
    tasks_module = modules.get("asyncio.tasks")
    if tasks_module is None:
        return ()
    found = []
    for name in _TASK_SETS:
        tasks = getattr(tasks_module, name, None)
        tasks = getattr(tasks, "data", tasks)     # a WeakSet's own set
        if type(tasks) is set:
            found.append(tasks)
    return tuple(found)


def _resolve_clears(modules):
    """The cache-clearing callables of the imported modules."""
    for name, path, method in _CACHE_CLEARS:
        obj = modules.get(name)
        if obj is None:
            continue
        try:
            for attr in path.split(".") if path else ():
                obj = getattr(obj, attr)
            yield getattr(obj, method)
        except AttributeError:
            pass
    typing = modules.get("typing")
    if typing is not None:
        yield from getattr(typing, "_cleanups", ())
    codecs = modules.get("codecs")
    if codecs is not None and hasattr(codecs, "unregister"):
        yield _clear_codecs_cache


def _abcs(modules):
    """Every ABC under the roots: isinstance(x, Mapping) on a type it has
    not seen stores weak references in the caches of Mapping and of the
    ABC subclasses it asked."""
    roots = list(_ABC_ROOTS)
    for module_name, name in _OPTIONAL_ABC_ROOTS:
        root = getattr(modules.get(module_name), name, None)
        if isinstance(root, ABCMeta):
            roots.append(root)
    seen = set()
    while roots:
        cls = roots.pop()
        if cls not in seen and isinstance(cls, ABCMeta):
            seen.add(cls)
            yield cls
            roots += type.__subclasses__(cls)


def _clear_linecache(linecache):
    """Drops the lines read from files (they can be read again); keeps the
    entries no file backs (registered by exec'd or generated code)."""
    cache = getattr(linecache, "cache", None)
    if not cache or _core.linecache_settled(cache):
        return
    try:
        kept = {key: entry for key, entry in cache.items()
                if len(entry) == 4 and entry[1] is None}
        # clear() and update() rather than deleting keys: the table is then
        # sized by what stays, whatever the cache held before.
        cache.clear()
        cache.update(kept)
    except Exception:
        pass


def _flush_std_streams():
    """Text written but not flushed is held in Python objects."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except Exception:
                pass
