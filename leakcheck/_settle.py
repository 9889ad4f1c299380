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

The type attribute cache is cleared last, always: it keeps a reference to
the name of every attribute looked up, so a name built afresh
(getattr(obj, "handle_%s" % kind), as argparse does) stays alive in it
until another lookup takes its slot.  Left in place, it made clean code
grow by a block or two in a run now and then, and made clearing any other
cache look leaky (refilling a cache looks attributes up).  Up to 3.11 the
clear leaves a reference to None in each of its 4096 slots, which the
next lookups take back: a test comparing ``sys.getrefcount(None)`` around
a call would see the difference.  Settling moves those references to a
string of its own (``_TypeCache``), so None's count moves as it would
without leakcheck.

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
in place, without a per-code allocation.

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
import functools
import gc
import operator
import sys
import types
import weakref
from collections import deque
from abc import ABC, ABCMeta

from . import _core

try:
    from _abc import _reset_caches      # the C implementation of abc
except ImportError:                     # pragma: no cover (_py_abc)
    def _reset_caches(cls):
        cls._abc_caches_clear()

__all__ = ["settle"]

_clear_type_cache = getattr(sys, "_clear_internal_caches", None) or \
    sys._clear_type_cache

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

    __slots__ = ("modules", "clears", "abcs", "namespaces")

    def __init__(self, modules):
        self.modules = len(modules)
        self.clears = tuple(_resolve_clears(modules))
        self.abcs = tuple(weakref.ref(cls) for cls in _abcs(modules))
        self.namespaces = tuple(
            ns for ns in (getattr(m, "__dict__", None)
                          for m in list(modules.values()))
            if type(ns) is dict)


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
            stack.extend(c for c in obj.co_consts
                         if type(c) is types.CodeType)
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
    """CPython 3.9 to 3.11: clearing the type attribute cache gives each of
    its 4096 slots a new reference to None (3.9 and 3.10 at the first
    lookup after the clear), and the lookups that follow take them back
    one by one.  Plain pytest never clears it: a test comparing
    ``sys.getrefcount(None)`` around a call (ujson's tests do) would see
    the call's lookups move None's count, and fail under leakcheck alone.
    So after each clear, ``refill()`` moves the slots' references from None
    to a string of leakcheck's own.  A slot whose version is 0 answers no
    lookup, whatever name it holds: the cache behaves the same, and None's
    count is what it was.  (From 3.12 on None is immortal: nothing to do.)

    The table has no Python interface.  It is 4096 entries {unsigned
    version; PyObject *name; PyObject *value}, in the interpreter state
    (3.10, 3.11) or in the interpreter's static data (3.9), and a lookup
    of `name` on a type of version `v` lands in entry (v ^ h) % 4096,
    where h is the name's hash (3.9, 3.10) or its address / 8 (3.11).
    ``find()`` looks a fresh name up on a fresh class, finds the entry
    that names it, and so where the table starts; three more lookups must
    each land where that predicts.  Should that fail, nothing is written."""

    ENTRIES = 4096
    STRIDE = 24                 # 64-bit: 4 bytes + padding, two pointers
    FILLER = "leakcheck: an empty type cache slot"
    SLOT_HASHES = (lambda name: hash(name), lambda name: id(name) >> 3)

    __slots__ = ("address",)

    def __init__(self):
        self.address = None

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

    def _lookup(self, ctypes, lo, hi):
        """Looks a fresh name up on a fresh class: (the name, [(address,
        version) of each entry in [lo, hi) that names it])."""
        import struct

        class Probe:
            __slots__ = ()

        name = "".join(("_leakcheck_probe_", str(id(Probe))))
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
        _core.retarget(address + 8, self.ENTRIES, self.STRIDE, None,
                       self.FILLER)


def _regions(ctypes):
    """Where the type cache can be: from the interpreter state on (1 MiB at
    most), and the writable data of the python executable or libpython,
    each as (start, end) within memory mapped readable and writable."""
    import os
    spans = []                  # contiguous rw mappings: [lo, hi, ours]
    exe = os.path.realpath(sys.executable)
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip() if len(parts) > 5 else ""
            if not parts[1].startswith("rw"):
                continue
            ours = path == exe or os.path.basename(path).startswith(
                "libpython")
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
        elif ours and hi - lo <= (32 << 20):
            yield lo, hi


_typecache = None


def _keep_none_count():
    """The first settle() finds the type cache to refill, 3.9-3.11."""
    global _typecache
    if sys.version_info >= (3, 12) or \
            sys.implementation.name != "cpython" or \
            not sys.platform.startswith("linux"):
        return
    cache = _TypeCache()
    try:
        cache.find()
    except Exception:
        return
    if cache.address is not None:
        _typecache = cache


def clear_type_cache():
    """Clears CPython's type attribute cache, leaving None's reference
    count as it was (see _TypeCache)."""
    _clear_type_cache()
    if _typecache is not None:
        _typecache.refill()


_opcache = None


def _deactivate_opcache():
    """The first settle() turns the opcode cache of CPython 3.9/3.10 off."""
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


def _reset_abc_caches(abcs):
    """Resets the caches of the ABCs of `abcs` (weak references), as
    _abc._reset_caches does; where the layout of the C abc's data is known,
    only of those whose caches hold something (resetting an empty cache
    changes nothing), in a loop that costs a few nanoseconds an ABC."""
    if _abc_readable:
        _core.abc_reset(abcs, _reset_caches)
    else:
        _exhaust(map(_reset_caches, filter(_not_none, map(_deref, abcs))))


_plan = None
_exhaust = deque(maxlen=0).extend
_deref = weakref.ref.__call__
_not_none = functools.partial(operator.is_not, None)


def settle():
    """Clears the first-use caches of the interpreter and the standard
    library.  Never raises for a cache it cannot clear."""
    global _plan, _abc_readable
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
        _deactivate_opcache()
        _keep_none_count()
    if _plan is None or _plan.modules != len(modules):
        _plan = None                    # the old one's memory first
        _plan = _Plan(modules)
        if _opcache is not None:
            try:
                _opcache.mark(_plan.namespaces)
            except Exception:
                pass
    plan = _plan
    for clear in plan.clears:
        try:
            clear()
        except Exception:
            pass
    _clear_linecache(modules.get("linecache"))
    # The loops over every ABC and every module run in C: settling runs
    # before every snapshot.
    try:
        _reset_abc_caches(plan.abcs)
    except Exception:
        pass
    # warnings.warn() makes a __warningregistry__ in the module it blames
    # and adds an entry per distinct warning.  Emptied, not deleted: adding
    # and deleting a key now and then resizes the module's namespace.
    try:
        _core.clear_registries(plan.namespaces)
    except Exception:
        pass
    _flush_std_streams()
    clear_type_cache()          # last: the steps above look attributes up


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
    if not cache:
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
