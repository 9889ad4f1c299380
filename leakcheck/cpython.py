"""What differs between the CPython versions leakcheck supports (3.9 on),
one fact each, with the versions it applies to: every CPython-version
patch of leakcheck and of its pytest plugin lives here, so that a new
CPython release is read against this module alone.

- ``ZOMBIE_FRAMES`` (3.9, 3.10): a code object keeps the frame of its
  last call for the next one; ``make_frames()`` makes those frames before
  a measurement; the engine frees those of the code running while a
  snapshot reads, after its collection (``leakcheck/_core.c``:
  ``drop_running_zombies``).
- ``FRAMES_TRAVERSED`` (3.9, 3.10): a frame that escaped is GC-tracked
  and the collector sees its locals (the holder chains, leakcheck._chain).
- ``PY_BYTES_BY_DEFAULT`` (3.11 on): before 3.11, resizing a kept frame
  of the frame freelist moves py_bytes with no allocation counted, so
  py_bytes is not among the default probes there.
- ``SCOPE_NATIVE_TOLERANCE`` (3.9, 3.10): the C heap's noise around
  clean code that a Python scope tolerates.
- The opcode cache (3.9, 3.10) and the type attribute cache (trimmed;
  cleared, with every internal cache on 3.13 and later, where it is not
  found or a JIT or a debug build of 3.12 on): ``first_settle()`` and
  ``clear_type_cache()``, as leakcheck._settle runs them.
- The immortal interned strings (3.13 on): ``first_settle()`` finds the
  interpreter's dict of interned strings for the engine to count them as
  they are added (``_find_interned``): sys.getunicodeinternedsize(
  _only_immortal=True) walks all of them at every snapshot (a clean test
  cost 5.21 M instructions more than plain pytest on 3.13 that way, 2.30 M
  with the count: bench/bench_instructions.py).
- Instrumentation after tracing (3.12 on): once anything has traced
  (sys.settrace, sys.setprofile, a sys.monitoring tool; leakcheck's own
  diagnosis runs memray's profile hook and the heap's line tracer), every
  code object allocates its instrumentation data (a block or more, kept
  as long as the code) the first time it runs from then on: a test's
  reported run would read it as growth, and every clean test after a
  session's first diagnosis ran twice more.  ``instrument_code()`` gives
  it to the code already loaded, after leakcheck's own tracing.
- ``LAZY_FRAMES`` (3.11 on): a running frame gets its frame object
  only when asked, and a frame object that outlives its frame asks for
  its caller's, and so on up to the first frame still running: a run
  whose frame lives on (an exception's traceback holding it, in a cycle a
  collection frees) makes one for the frame it returned to, in that run
  only.  ``make_frame_object()`` makes its caller's before a measurement.
- The filters list the C warnings module holds (3.9 to 3.15): where it
  is found (``filters_warn_holds()``), settling makes warn() take up
  ``warnings.filters`` again only when it holds another list.
- ``logging.Logger.removeHandler()`` replaces the logger's list of
  handlers with a copy (gh-79366: 3.14.10 and 3.15.2 measured; 3.13.0 and
  earlier remove in place), told by what it does, not by the version:
  ``fresh_handler_lists()`` after a ``gc.freeze()``.

The type attribute cache is cleared last: it keeps a reference to the
name of every attribute looked up, so a name built afresh
(getattr(obj, "handle_%s" % kind), as argparse does) stays alive in it
until another lookup takes its slot.  Left in place, it made clean code
grow by a block or two in a run now and then, and made clearing any other
cache look leaky (refilling a cache looks attributes up).  Up to 3.11 the
clear leaves a reference to None in each of its 4096 slots, which the
next lookups take back: a test comparing ``sys.getrefcount(None)`` around
a call would see the difference.  Settling moves those references to a
string of its own (``_TypeCache``), so None's count moves as it would
without leakcheck; and, having found the table there, clears it only once:
from then on the engine empties, after each snapshot's collection, the
entries whose name nothing else holds, and the lookups that follow a
snapshot still find the others.

CPython 3.9 and 3.10 add a cache of their own to a code object the 1024th
time it runs (the opcode cache: two blocks, kept as long as the code).
Code run a few times per repetition of a test (a test runner's hooks, the
fixtures' machinery, a helper the test calls in a loop) reaches that count
in some run or other, and a series whose runs each bring one code object
there reads as a leak that grows every run.  CPython's refleak runner
turns the cache off (3.10's regrtest -R calls ``sys._deactivate_opcache()``;
3.9 only builds it in release builds, and -R wants a debug build), and so
does settling, the first time it runs: 3.10 through that call; 3.9, whose
threshold is compiled in, by marking every code object of the imported
modules as already past it, each time the modules change (see
``_Opcache``).  The cache only makes global and attribute lookups
faster: turning it off changes no result.  3.11 and later specialise code
in place, without a per-code allocation."""

import contextlib
import functools
import gc
import sys
import types

from . import _core

__all__ = ["ZOMBIE_FRAMES", "FRAMES_TRAVERSED", "LAZY_FRAMES",
           "PY_BYTES_BY_DEFAULT", "make_frames", "make_frame_object",
           "first_settle", "mark_code", "clear_type_cache",
           "type_cache_trimmable",
           "fresh_handler_lists", "filters_warn_holds"]

ZOMBIE_FRAMES = sys.version_info < (3, 11)
FRAMES_TRAVERSED = sys.version_info < (3, 11)
LAZY_FRAMES = sys.version_info >= (3, 11)
PY_BYTES_BY_DEFAULT = sys.version_info >= (3, 11)
# What the type cache's emptied slots hold instead of None (_TypeCache).
TYPE_CACHE_FILLER = "leakcheck: an empty type cache slot"
# From 3.12 on None is immortal: the type cache's references to it move
# nothing.
TYPE_CACHE_HOLDS_NONE = sys.version_info < (3, 12)
# 3.9 and 3.10: the C heap moves by a few bytes now and then around clean
# code with nothing else moving (bench/scope_noise.py: 6 of 600 scopes
# around re, argparse or strptime read -288 to +128 native bytes on
# 3.9.18; 0 of 600 on 3.11.7), which one delta cannot tell from a leak.  A Python scope
# tolerates this much there unless told otherwise; a series needs growth
# in every run and is not affected.
SCOPE_NATIVE_TOLERANCE = 0 if sys.version_info >= (3, 11) else 256

_clear_type_cache = getattr(sys, "_clear_internal_caches", None) or \
    sys._clear_type_cache

_CO_VARKEYWORDS = 0x08


def make_frames(*funcs):
    """Up to 3.10 a function's first call leaves its frame behind for the
    next call (the code object's "zombie frame"): made between two
    snapshots, it reads as growth.  Calling each function with a keyword
    argument it cannot take makes that frame without running its body
    (a function that takes **kwargs is left alone).  So for the code
    objects nested in it (its comprehensions, generator expressions and
    inner functions), each called through a function made for the
    purpose: each keeps a frame of its own."""
    if not ZOMBIE_FRAMES:
        return
    for func in funcs:
        code = getattr(func, "__code__", None)
        if code is None:
            continue
        _make_frame(func, code)
        globals_ = getattr(func, "__globals__", {})
        nested = _nested_codes(code)
        while nested:
            inner = nested.pop()
            nested.extend(_nested_codes(inner))
            try:
                made = types.FunctionType(
                    inner, globals_, None, None,
                    tuple(types.CellType() for _ in inner.co_freevars))
            except (TypeError, ValueError):
                continue
            _make_frame(made, inner)


def make_frame_object():
    """Makes the frame object of the caller's frame (LAZY_FRAMES), which
    it keeps until it returns.  Call it before the first snapshot of a
    measurement whose runs return to that frame: a run whose own frame
    lives on past it would otherwise make that object, one block, and
    read it as its growth.  Up to 3.10 every frame is an object already."""
    if LAZY_FRAMES:
        sys._getframe(1)


def _nested_codes(code):
    """The code objects `code` holds: its comprehensions, generator
    expressions, lambdas and inner functions (not theirs)."""
    return [c for c in code.co_consts if type(c) is types.CodeType]


def _make_frame(func, code):
    if code.co_flags & _CO_VARKEYWORDS:
        return
    try:
        func(**{"\0leakcheck": None})
    except TypeError:
        pass


def first_settle():
    """What the first settle() does once: the opcode cache off (3.9,
    3.10), the type cache found for trimming, the interned strings found
    for counting (3.13 on)."""
    _deactivate_opcache()
    _find_type_cache()
    _count_interned()


def mark_code(namespaces):
    """3.9: marks the code reachable from `namespaces` as past the opcode
    cache's threshold (see _Opcache); nothing elsewhere."""
    if _opcache is not None:
        _opcache.mark(namespaces)


# sys.monitoring's tool ids no tool is assigned (0 debugger, 1 coverage,
# 2 profiler, 5 optimizer): the one instrument_code() takes for a moment.
_UNASSIGNED_TOOLS = (4, 3)
# Ids of the module namespaces whose code instrument_code() has done.
_instrumented = set()


def instrument_code(namespaces):
    """3.12 on: gives every code object reachable from `namespaces` (see
    _code_objects) its instrumentation data now, which it would otherwise
    allocate the first time it runs after a trace (see the module's
    docstring): setting a tool's local events of a code object, even to
    none, makes it.  For leakcheck's own tracing (a diagnosis); each
    namespace once.  The tool id is taken for the moment and given back
    (on 3.14 and later that makes the code already running look at its
    instrumentation again, once: time, no memory); when both unassigned
    ids are in use, nothing is done."""
    global _instrumented
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return
    todo = [ns for ns in namespaces if id(ns) not in _instrumented]
    tool = next((t for t in _UNASSIGNED_TOOLS
                 if monitoring.get_tool(t) is None), None)
    if not todo or tool is None:
        return
    try:
        monitoring.use_tool_id(tool, "leakcheck")
    except ValueError:          # another thread took it meanwhile
        return
    try:
        for code in _code_objects(todo):
            try:
                monitoring.set_local_events(tool, code, 0)
            except ValueError:
                pass
    finally:
        monitoring.free_tool_id(tool)
    # The namespaces of today's modules only: a module gone since leaves
    # no id behind for another one to be taken for.
    _instrumented = {id(ns) for ns in namespaces}


class _Opcache:
    """Turns CPython 3.9's opcode cache off for code already loaded.

    3.9 counts the runs of each code object in its ``co_opcache_flag``
    and, on the run that brings it to OPCACHE_MIN_RUNS (1024 in a release
    build; 0, never, in a debug build), allocates the code's cache; a
    count at the threshold means "done", whether or not a cache was made.
    That field has no Python interface: ``find()`` locates it by running a
    freshly compiled function and watching which int of the code object
    counts its runs, and reads the threshold where the count stops.  Should
    either not be found (another build, another layout), nothing is
    written.  ``mark(namespaces)`` raises the count of every code object
    reachable from those module namespaces (functions, classes, methods,
    closures, nested code) to the threshold, so none of them makes its cache
    later: what 3.10's ``sys._deactivate_opcache()`` does for all code."""

    __slots__ = ("offset", "limit", "done")

    def __init__(self):
        self.offset = None
        self.limit = None
        self.done = set()       # ids of the namespaces marked already

    def find(self):
        try:
            import ctypes
        except ImportError:     # pragma: no cover
            return
        namespace = {}
        exec("def f():\n    return len\n", namespace)
        f = namespace.pop("f")
        code = f.__code__
        base = id(code)
        size = type(code).__basicsize__

        def ints():
            return [ctypes.c_int.from_address(base + off).value
                    for off in range(16, size - 3, 4)]

        for _ in range(3):
            f()
        three = ints()
        f()
        four = ints()
        counters = [i for i, (a, b) in enumerate(zip(three, four))
                    if a == 3 and b == 4]
        if len(counters) != 1:
            return              # a debug build counts nothing: no cache
        cell = ctypes.c_int.from_address(base + 16 + 4 * counters[0])
        count = cell.value
        for _ in range(1 << 16):
            f()
            if cell.value == count:
                break
            count = cell.value
        else:
            return
        if count < 16:
            return
        self.offset = 16 + 4 * counters[0]
        self.limit = count

    def mark(self, namespaces):
        if self.offset is None:
            return
        import ctypes
        todo = [ns for ns in namespaces if id(ns) not in self.done]
        offset, limit = self.offset, self.limit
        for code in _code_objects(todo):
            cell = ctypes.c_int.from_address(id(code) + offset)
            if 0 <= cell.value < limit:
                cell.value = limit
        # The namespaces of today's modules only: a module gone since
        # leaves no id behind for another one to be taken for.
        self.done = {id(ns) for ns in namespaces}


def _code_objects(namespaces):
    """The code objects reachable from module namespaces: of the functions
    there and in the attributes of the instances there (os.environ keeps
    its encoders), of the classes' methods and properties (nested classes
    too), of the functions closures and decorators keep, and the code
    nested in those (lambdas, inner functions and classes)."""
    seen = set()
    codes = {}
    stack = []
    for ns in namespaces:
        for value in list(ns.values()):
            stack.append(value)
            kind = type(value)
            if kind.__dictoffset__ and kind not in _NOT_INSTANCES and \
                    not isinstance(value, type):
                # Its __dict__ as the collector sees it: no attribute
                # lookup, so no property or __getattr__ of its class runs.
                for attrs in gc.get_referents(value):
                    if type(attrs) is dict:
                        stack.extend(attrs.values())
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        kind = type(obj)
        if kind is types.FunctionType:
            seen.add(id(obj))
            stack.append(obj.__code__)
            for cell in obj.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:          # an empty cell
                    pass
            wrapped = obj.__dict__.get("__wrapped__")
            if wrapped is not None:
                stack.append(wrapped)
        elif kind is types.CodeType:
            seen.add(id(obj))
            codes[id(obj)] = obj
            stack.extend(_nested_codes(obj))
        elif isinstance(obj, type):
            seen.add(id(obj))
            try:
                stack.extend(type.__dict__["__dict__"].__get__(obj).values())
            except Exception:
                pass
        elif kind in (staticmethod, classmethod, types.MethodType):
            stack.append(obj.__func__)
        elif kind is property:
            stack.extend((obj.fget, obj.fset, obj.fdel))
        elif kind is functools.partial:
            stack.append(obj.func)
        elif isinstance(obj, _LRU_CACHE):
            stack.append(getattr(obj, "__wrapped__", None))
    return list(codes.values())


_NOT_INSTANCES = (types.ModuleType, types.FunctionType)
_LRU_CACHE = getattr(functools, "_lru_cache_wrapper", ())


class _TypeCache:
    """The type attribute cache holds a reference to each name it caches:
    a name nothing else holds any more lives on, and reads as growth.
    Clearing the whole cache before every snapshot made every lookup after
    it miss (see refill()), so it is cleared once, and from then on the
    engine empties, after each snapshot's collection, only the entries
    whose name the cache alone holds.

    CPython 3.9 to 3.11: clearing the type attribute cache gives each of
    its 4096 slots a new reference to None (3.9 and 3.10 at the first
    lookup after the clear), and the lookups that follow take them back
    one by one.  Plain pytest never clears it: a test comparing
    ``sys.getrefcount(None)`` around a call (ujson's tests do) would see
    the call's lookups move None's count, and fail under leakcheck alone.
    So after the clear, ``refill()`` moves the slots' references from None
    to a string of leakcheck's own, and the engine's first trim moves
    them to one of the engine's (which it gives every slot it empties,
    and whose count tells it whether a lookup took one: _core.c).  A slot
    whose version is 0 answers no lookup, whatever name it holds: the
    cache behaves the same, and None's count is what it was.  (From 3.12
    on None is immortal.)

    The table has no Python interface.  It is 4096 entries {unsigned
    version; PyObject *name; PyObject *value}, in the interpreter state
    (3.10 on) or in the interpreter's static data (3.9), and a lookup
    of `name` on a type of version `v` lands in entry (v ^ h) % 4096,
    where h is the name's hash (3.9, 3.10) or its address / 8 (3.11,
    3.12).  ``find()`` looks a fresh name up on a fresh class, finds the
    entry that names it, and so where the table starts; three more
    lookups must each land where that predicts.  From 3.13 on, where that
    prediction does not hold, the table is found as what a clear leaves:
    the entry naming a fresh name lies in a run of exactly 4096 entries,
    each empty (version 0, None, NULL) or naming a str, and three more
    fresh names are found in it.  Should either fail, nothing is written.
    From 3.13 on only interned names are cached."""

    ENTRIES = 4096
    STRIDE = 24                 # 64-bit: 4 bytes + padding, two pointers
    FILLER = TYPE_CACHE_FILLER
    SLOT_HASHES = (lambda name: hash(name), lambda name: id(name) >> 3)

    __slots__ = ("address", "filled")

    def __init__(self):
        self.address = None
        self.filled = False     # every slot refilled once

    def find(self):
        import ctypes
        if ctypes.sizeof(ctypes.c_void_p) != 8:
            return
        for lo, hi in list(_regions(ctypes)):
            name, hits = self._lookup(ctypes, lo, hi)
            for entry, version in hits:
                for slot_hash in self.SLOT_HASHES:
                    index = (version ^ slot_hash(name)) % self.ENTRIES
                    table = entry - self.STRIDE * index
                    if lo <= table and \
                            table + self.STRIDE * self.ENTRIES <= hi and \
                            self._predicts(ctypes, table, slot_hash):
                        self.address = table
                        return
        if sys.version_info >= (3, 13):
            self._find_cleared(ctypes)

    def _find_cleared(self, ctypes):
        """The table as a clear leaves it (see the class)."""
        import bisect
        import struct
        readable = sorted(_readable())
        starts = [lo for lo, _ in readable]
        size = self.STRIDE * self.ENTRIES

        def is_str(address):
            i = bisect.bisect_right(starts, address) - 1
            if i < 0 or address + 16 > readable[i][1] or address % 8:
                return False
            return struct.unpack("<Q", ctypes.string_at(address + 8, 8))[
                0] == id(str)

        def entry(data, at):
            version, name, value = struct.unpack_from("<QQQ", data, at)
            if version >> 32:
                return False
            if version == 0:
                return name == id(None) and value == 0
            return name != 0 and is_str(name)

        for lo, hi in list(_regions(ctypes)):
            _clear_type_cache()
            _, hits = self._lookup(ctypes, lo, hi)
            data = ctypes.string_at(lo, hi - lo)
            for address, _ in hits:
                first = last = address - lo
                while first - self.STRIDE >= 0 and \
                        entry(data, first - self.STRIDE):
                    first -= self.STRIDE
                while last + 2 * self.STRIDE <= len(data) and \
                        entry(data, last + self.STRIDE):
                    last += self.STRIDE
                table = lo + first
                if last - first + self.STRIDE == size and \
                        all(self._lookup(ctypes, table, table + size)[1]
                            for _ in range(3)):
                    self.address = table
                    return

    def _lookup(self, ctypes, lo, hi):
        """Looks a fresh name up on a fresh class: (the name, [(address,
        version) of each entry in [lo, hi) that names it])."""
        import struct

        class Probe:
            __slots__ = ()

        name = "".join(("_leakcheck_probe_", str(id(Probe))))
        if sys.version_info >= (3, 13):
            name = sys.intern(name)
        getattr(Probe(), name, None)
        data = ctypes.string_at(lo, hi - lo)
        needle = struct.pack("<Q", id(name))
        hits = []
        at = data.find(needle)
        while at >= 0:
            if at >= 8 and (lo + at) % 8 == 0:
                hits.append((lo + at - 8,
                             struct.unpack_from("<I", data, at - 8)[0]))
            at = data.find(needle, at + 1)
        return name, [(entry, version) for entry, version in hits
                      if version]

    def _predicts(self, ctypes, table, slot_hash):
        size = self.STRIDE * self.ENTRIES
        for _ in range(3):
            name, hits = self._lookup(ctypes, table, table + size)
            if not any(entry == table + self.STRIDE * (
                    (version ^ slot_hash(name)) % self.ENTRIES)
                    for entry, version in hits):
                return False
        return True

    def refill(self):
        # Reading self.address is a lookup: on 3.9 and 3.10 the first one
        # after a clear is what puts None in every slot.
        address = self.address
        if TYPE_CACHE_HOLDS_NONE:
            _core.retarget(address + 8, self.ENTRIES, self.STRIDE, None,
                           self.FILLER)
        # From now on the engine empties, right after each snapshot's
        # collection, only the entries whose name nothing else holds
        # (those names would live on because of the cache alone, and read
        # as growth), giving them the filler; the others stay, and the
        # lookups that follow a snapshot still find them.  Clearing the
        # whole cache before every snapshot made those lookups miss: what
        # leakcheck's and pytest's code looked up after each snapshot cost
        # about an eighth of a clean test's overhead in instructions
        # (bench/bench_instructions.py, CPython 3.11: 2.00 M, 1.75 M with
        # the trim).  After the
        # collection, not before: a name held by what the collection frees
        # is the cache's alone only then.
        _core.trim_type_cache_after_collect(address, self.ENTRIES,
                                            self.FILLER)
        self.filled = True


def _regions(ctypes, interpreter_only=False):
    """Where the type cache can be: from the interpreter state on (1 MiB at
    most), and the writable data of the python executable or libpython,
    each as (start, end) within memory mapped readable and writable;
    `interpreter_only`: the first alone."""
    import os
    spans = []                  # contiguous rw mappings: [lo, hi, ours]
    exe = os.path.realpath(sys.executable)
    for lo, hi, perms, path in _mappings():
        if not perms.startswith("rw"):
            continue
        ours = path == exe or os.path.basename(path).startswith("libpython")
        if spans and spans[-1][1] == lo and (not path or ours):
            spans[-1][1] = hi
            spans[-1][2] = spans[-1][2] or ours
        else:
            spans.append([lo, hi, ours])
    get = ctypes.pythonapi.PyInterpreterState_Get
    get.restype = ctypes.c_void_p
    get.argtypes = ()
    interp = get()
    for lo, hi, ours in spans:
        if interp and lo <= interp < hi:
            yield interp, min(hi, interp + (1 << 20))
        elif ours and hi - lo <= (32 << 20) and not interpreter_only:
            yield lo, hi


_typecache = None


def _jit_active():
    """Whether code may be compiled to executors, which
    sys._clear_internal_caches() (3.13 on) throws away with the type
    cache: the JIT enabled (3.14 on: sys._jit), or a 3.13 built with the
    experimental JIT (its tier 2)."""
    jit = getattr(sys, "_jit", None)
    if jit is not None:
        try:
            return bool(jit.is_enabled())
        except Exception:
            return True
    if sys.version_info >= (3, 13):
        import sysconfig
        return "_Py_TIER2" in (sysconfig.get_config_var("PY_CORE_CFLAGS")
                               or "")
    return False


def type_cache_trimmable():
    """Whether settling trims the type cache (CPython with the GIL, on
    Linux) rather than clearing it before every snapshot.  Where code can
    be compiled to executors, the internal caches are cleared instead (a
    test's executors would read as its growth); so they are on a debug
    build of 3.12 and later, where an emptied slot holds an immortal
    string, whose references the total reference count leaves out: each
    slot a run fills would read as a reference more (the refs probe).  Up
    to 3.11 the filler is mortal, and a slot that changes hands moves
    nothing."""
    return (sys.implementation.name == "cpython" and
            sys.platform.startswith("linux") and
            getattr(sys, "_is_gil_enabled", lambda: True)() is not False and
            not _jit_active() and
            (TYPE_CACHE_HOLDS_NONE or not hasattr(sys, "gettotalrefcount")))


# How many times _find_type_cache() looks for the table.  A search reads
# memory after each lookup of a fresh name, and whatever else is looked up
# in between (the Python and ctypes code that makes the read) may land in
# the same slot and take it: the search then finds no entry naming the
# name, or one that predicts nothing.  Where the slot is (the name's
# hash, or its address, with the class's version) changes from one
# process to the next: now and then a pytest process on 3.10 found no
# table in its one search, and fell back to clearing the whole cache
# before every snapshot, where None's reference count moves with each
# lookup (a test comparing it around a call failed, under leakcheck
# alone).  Each search makes fresh names on a fresh class, which land
# elsewhere.
TYPE_CACHE_SEARCHES = 4


def _find_type_cache():
    """Finds the type cache to trim, where it is trimmed: up to
    TYPE_CACHE_SEARCHES searches."""
    global _typecache
    if not type_cache_trimmable():
        return
    for _ in range(TYPE_CACHE_SEARCHES):
        cache = _TypeCache()
        try:
            cache.find()
        except Exception:
            return
        if cache.address is not None:
            _typecache = cache
            return


def clear_type_cache():
    """Clears CPython's type attribute cache (3.13 on: every internal cache,
    as regrtest does), leaving None's reference count as it was (see
    _TypeCache).  Where the table was found, it is cleared once; from then
    on the engine empties, after each snapshot's collection, the entries
    whose name nothing else holds (see _TypeCache.refill)."""
    if _typecache is not None and _typecache.filled:
        return          # trimmed by the engine after its collection
    _clear_type_cache()
    if _typecache is not None:
        _typecache.refill()


# Where the interned strings are counted from (3.13 on, with the GIL, on
# Linux): their dict, found once.
# (A free-threaded build says so when asked: _core counts only with the
# GIL compiled in.)
COUNTS_INTERNED = (sys.version_info >= (3, 13) and
                   sys.implementation.name == "cpython" and
                   sys.platform.startswith("linux"))


def _count_interned():
    """Hands the engine the interpreter's dict of interned strings, when it
    is found and proved to be it; otherwise the engine asks
    sys.getunicodeinternedsize(_only_immortal=True) as before."""
    if not COUNTS_INTERNED:
        return
    try:
        import ctypes
        interned = _find_interned(ctypes)
    except Exception:
        return
    if interned is not None:
        _core.count_interned_in(interned)


def _find_interned(ctypes):
    """The dict of interned strings, from a pointer to it in the
    interpreter's state (whose memory also holds the thread's freelists:
    dicts freed there still name dict as their type).  Nothing but raw
    memory is read until one pointer is left: of the words that point to
    an object of type dict, those whose size (ma_used) grows by exactly as
    many strings as are interned meanwhile, twice.  That one is then
    taken as a dict only if it maps the strings interned to themselves
    and its immortal strings, with the statically allocated ones, are
    what sys.getunicodeinternedsize(_only_immortal=True) counts.  None
    when no pointer proves to be it."""
    import array
    import bisect
    import time
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    readable = sorted(_readable())
    starts = [lo for lo, _ in readable]

    def mapped(address, size):
        i = bisect.bisect_right(starts, address) - 1
        return i >= 0 and address + size <= readable[i][1]

    dict_type = id(dict)
    candidates = []
    for lo, hi in list(_regions(ctypes)):
        words = array.array("Q", ctypes.string_at(lo, (hi - lo) & ~7))
        for word in set(words):
            # ob_refcnt, ob_type, ma_used: the header of a dict.
            if word % 8 == 0 and mapped(word, 24) and \
                    ctypes.c_void_p.from_address(word + 8).value == dict_type:
                candidates.append(word)

    def sizes():
        return [ctypes.c_ssize_t.from_address(word + 16).value
                for word in candidates]

    stamp = str(time.monotonic_ns())
    marks = []
    for added in (5, 3):
        before, total = sizes(), sys.getunicodeinternedsize()
        marks += [sys.intern(" ".join(("leakcheck: interned", stamp,
                                       str(len(marks) + i))))
                  for i in range(added)]
        after = sizes()
        if sys.getunicodeinternedsize() - total != added:
            return None
        candidates = [word for word, was, now in zip(candidates, before, after)
                      if now - was == added]
    if len(candidates) != 1:
        return None
    found = ctypes.cast(candidates[0], ctypes.py_object).value
    if type(found) is dict and \
            all(found.get(mark) is mark for mark in marks) and \
            _counts_as_sys(found):
        return found
    return None


def _counts_as_sys(interned):
    """Whether the immortal strings of `interned` are those
    sys.getunicodeinternedsize(_only_immortal=True) counts, but for the
    statically allocated ones, which it counts apart."""
    statics = sys.getunicodeinternedsize() - len(interned)
    counted = sum(map(_core.is_immortal, list(interned)))
    return statics >= 0 and counted + statics == \
        sys.getunicodeinternedsize(_only_immortal=True)


def _mappings():
    """(start, end, permissions, path) of each mapping of the process, from
    /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            yield lo, hi, parts[1], parts[5].strip() if len(parts) > 5 else ""


def _readable():
    """(start, end) of every readable mapping of the process."""
    return ((lo, hi) for lo, hi, perms, _ in _mappings()
            if perms.startswith("r"))


_opcache = None


def _deactivate_opcache():
    """Turns the opcode cache of CPython 3.9/3.10 off."""
    global _opcache
    deactivate = getattr(sys, "_deactivate_opcache", None)   # 3.10
    if deactivate is not None:
        deactivate()
    elif sys.version_info[:2] == (3, 9) and \
            sys.implementation.name == "cpython":
        _opcache = _Opcache()
        try:
            _opcache.find()
        except Exception:
            _opcache.offset = None


_handler_lists_replaced = None


def _replaces_handler_lists(logging):
    """Whether logging.Logger.removeHandler() replaces the list of
    handlers rather than removing from it in place (gh-79366), asked of a
    logger that no manager knows."""
    global _handler_lists_replaced
    if _handler_lists_replaced is None:
        logger = logging.Logger("leakcheck")
        mark = object()
        logger.handlers = [mark]
        before = logger.handlers
        logger.removeHandler(mark)
        _handler_lists_replaced = logger.handlers is not before
    return _handler_lists_replaced


def fresh_handler_lists():
    """Gives every logger a new list of handlers, the same handlers in it,
    where logging.Logger.removeHandler() replaces that list (CPython 3.14
    and 3.15: gh-79366).  Called right after a gc.freeze(): a frozen object's
    death is not counted, so the first removeHandler() after a freeze (pytest's
    log capture removes its handlers from the root logger at the end of
    every phase) would read as one GC-tracked object more: the frozen list
    dies uncounted, its unfrozen copy counts.  Replaced here, before any
    snapshot, the list that dies in the next run is an unfrozen one.
    Where removeHandler() removes in place the lists stay as they are, as
    code may hold one."""
    logging = sys.modules.get("logging")
    if logging is None or not _replaces_handler_lists(logging):
        return
    with getattr(logging, "_lock", None) or contextlib.nullcontext():
        manager = logging.Logger.manager
        for logger in [manager.root, *manager.loggerDict.values()]:
            # The list the logger holds itself (a PlaceHolder holds none).
            handlers = getattr(logger, "__dict__", {}).get("handlers")
            if isinstance(logger, logging.Logger) and \
                    type(handlers) is list:
                logger.handlers = handlers.copy()


# How far into the interpreter's state its warnings state is looked for:
# it lies 0xd80 to 0xf38 bytes in on CPython 3.9 to 3.12, 0x29a0 to 0x29e8
# on 3.13 to 3.15, debug builds too (searching the whole megabyte cost
# more than the rest of the finding: its bytes are mostly zeros).
_WARNINGS_WITHIN = 1 << 16


def filters_warn_holds(warnings, sync):
    """The address of the word that holds the filters list the C warnings
    module holds (the interpreter's ``warnings.filters``: warn() reads
    ``warnings.filters`` at each call and keeps that list until its next
    call, CPython 3.9 to 3.15), or None where it is not found: a pointer
    slot that owns its reference, which ``_core.pointer_at()`` reads and
    ``_core.hold()`` points at another list.
    `sync()` issues a warning that is ignored: warn() then holds the
    list in ``warnings.filters``.

    Found in the interpreter's state (``_regions``, its first
    _WARNINGS_WITHIN bytes), where it is from 3.9 on (``interp->warnings``):
    of the words that hold that list's address after a sync, the one word
    that holds its copy's once the copy was put in its place and synced,
    not before the sync, and the list's again once it is back, likewise.
    The swap is what ``catch_warnings()`` does (under the lock of CPython
    3.14 and later's warnings).  Settling then syncs only when warn() holds
    another list, by pointing the word at ``warnings.filters``
    (leakcheck._settle._sync_warning_filters)."""
    import ctypes
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    with getattr(warnings, "_lock", None) or contextlib.nullcontext():
        filters = warnings.filters
        sync()
        needle = id(filters).to_bytes(8, sys.byteorder)
        words = []
        for lo, hi in list(_regions(ctypes, interpreter_only=True)):
            data = ctypes.string_at(lo, min(hi - lo, _WARNINGS_WITHIN))
            at = data.find(needle)
            while at >= 0:
                if (lo + at) % 8 == 0:
                    words.append(ctypes.c_void_p.from_address(lo + at))
                at = data.find(needle, at + 1)
            del data
        copy = list(filters)
        try:
            for now in (copy, filters):
                warnings.filters = now
                # Not a word that follows the attribute (the warnings
                # module's dict, on the heap beside the interpreter's
                # state up to 3.10), only one that follows warn().
                words = [word for word in words if word.value != id(now)]
                sync()
                words = [word for word in words if word.value == id(now)]
        finally:
            if warnings.filters is not filters:
                warnings.filters = filters
                sync()
    if len(words) != 1:
        return None
    return ctypes.addressof(words[0])
