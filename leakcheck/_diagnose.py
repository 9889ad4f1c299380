"""The diagnosis: what leaked and where, computed only after a verdict, so
that it never slows a clean run.

``diagnose(run_once, leaking)`` re-runs the code that leaked and watches
it the expensive way: the live count of every type before and after (for
object growth), tracemalloc (for allocator growth: the lines where the
surviving new blocks were allocated), the reference count of every object
(refs), new file descriptors and what they point to, new threads with
their names and targets, and what landed in gc.garbage.

``diagnose_after(leaking, deltas)`` is for a verdict on code that cannot be
run again (the body of a ``with`` scope): what can be seen afterwards
alone.  The newest objects the collector tracks are the ones created last
(a full collection appends the younger generations to the end of the
oldest), so the scope's growth in objects has their types.
"""

import array
import gc
import itertools
import linecache
import operator
import os
import site
import sys
import sysconfig
import threading
import time
import tracemalloc

from . import _core
from ._probes import PROBE_NAMES, check_count, probe_names

__all__ = ["Diagnosis", "diagnose", "diagnose_after"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_TOP = 10                 # entries shown per section
_TRACE_FRAMES = 10        # tracemalloc frames kept per allocation
_THREAD_WAIT = 0.2        # seconds new threads get to end before counting

_ALLOCATOR_PROBES = {"blocks", "py_bytes", "py_allocs", "objects"}
_CENSUS_PROBES = {"objects", "blocks", "py_bytes", "py_allocs"}


class Diagnosis:
    """What leaked and where.  Every attribute is a list, empty when the
    diagnosis has nothing to say about it; ``to_dict()`` gives them as
    JSON-ready data with stable keys, ``str()`` as readable text."""

    def __init__(self, leaking=(), runs=0):
        self.leaking = list(leaking)
        self.runs = runs            # re-runs made; 0 when none was possible
        self.objects = []           # [{"type", "delta"}], biggest first
        self.allocations = []       # [{"file", "line", "size", "count",
                                    #   "source", "traceback"}]
        self.refcounts = []         # [{"object", "type", "delta"}]
        self.garbage = []           # [{"type", "count", "new"}]
        self.fds = []               # [{"fd", "target"}]
        self.threads = []           # [{"name", "target", "daemon",
                                    #   "native_id", "python"}]
        self.chains = []            # [{"object", "watched_at", "root",
                                    #   "expression", "path", "unseen_refs"}]
        self.notes = []             # [str]

    _KEYS = ("leaking", "runs", "objects", "allocations", "refcounts",
             "garbage", "fds", "threads", "chains", "notes")

    def to_dict(self):
        """The diagnosis as plain data (str, int, bool, None, lists and
        dicts), with every key present."""
        import copy
        return {key: copy.deepcopy(getattr(self, key)) for key in self._KEYS}

    def __bool__(self):
        return any(getattr(self, key) for key in self._KEYS[2:])

    def __repr__(self):
        return f"<Diagnosis of {', '.join(self.leaking) or 'nothing'}>"

    def __str__(self):
        out = []
        how = (f"re-running the code {self.runs} time"
               f"{'' if self.runs == 1 else 's'}" if self.runs
               else "after the fact")
        if self.objects:
            out.append(f"objects that grew ({how}), most first:")
            width = max(len(entry["type"]) for entry in self.objects)
            out += [f"  {entry['type']:<{width}}  {entry['delta']:+d}"
                    for entry in self.objects]
        if self.allocations:
            out.append(f"where the surviving new memory was allocated "
                       f"({how}, tracemalloc), most first:")
            for entry in self.allocations:
                out.append(f"  {entry['file']}:{entry['line']}: "
                           f"{entry['size']:+d} bytes in "
                           f"{entry['count']:+d} block"
                           f"{'' if abs(entry['count']) == 1 else 's'}")
                if entry["source"]:
                    out.append(f"      {entry['source']}")
                for frame in entry["traceback"][1:4]:
                    out.append(f"    called from {frame['file']}:"
                               f"{frame['line']}")
        if self.refcounts:
            out.append(f"objects whose reference count grew ({how}):")
            out += [f"  {entry['delta']:+d}  {entry['object']}"
                    for entry in self.refcounts]
        if self.garbage:
            out.append("uncollectable objects in gc.garbage, by type:")
            out += [f"  {entry['type']}: {entry['count']}"
                    + (f" ({entry['new']} new)" if entry["new"] else "")
                    for entry in self.garbage]
        if self.fds:
            out.append("new file descriptors:" if self.runs else
                       "file descriptors open now:")
            out += [f"  {entry['fd']} -> {entry['target']}"
                    for entry in self.fds]
        if self.threads:
            out.append("new threads:" if self.runs else
                       "threads alive now, besides the main thread:")
            for entry in self.threads:
                what = f"  {entry['name']!r}"
                if entry["target"]:
                    what += f" running {entry['target']}"
                what += (f" (native id {entry['native_id']}"
                         + ("" if entry["python"] else ", not started by "
                            "Python") + (", daemon" if entry["daemon"]
                                         else "") + ")")
                out.append(what)
        for chain in self.chains:
            out.append(f"{chain['object']}"
                       + (f" (watched at {chain['watched_at']})"
                          if chain["watched_at"] else "")
                       + " is still alive; kept by:")
            out.append(f"  {chain['root']}")
            if chain["expression"]:
                out.append(f"  path: {chain['expression']}")
            for step in chain["path"]:
                out.append(f"    {step['edge']:<24} {step['type']}")
            if chain["unseen_refs"]:
                n = chain["unseen_refs"]
                out.append(f"  and {n} reference{'' if n == 1 else 's'} "
                           f"that no object the garbage collector sees "
                           f"holds (C code: a missing Py_DECREF?)")
        out += [f"note: {note}" for note in self.notes]
        return "\n".join(out)


# ---- re-running ---------------------------------------------------------

def diagnose(run_once, leaking, runs=2, ignore=()):
    """Explains a leak verdict already reached by re-running `run_once`
    (a callable without arguments) `runs` times, watched according to the
    probes in `leaking` (names).  Returns a Diagnosis.  An exception from
    `run_once` ends the re-runs and becomes a note.

    `ignore` names folders (or files) of a harness around the code: memory
    allocated by a line in them is left out of the allocation lines (a test
    runner replacing its own objects each run is not the leak), also when
    the harness had the standard library allocate it (pytest setting
    os.environ): an allocation belongs to the innermost frame of its
    traceback that lies outside the standard library.  A standard library
    call in the code under diagnosis keeps its line.

    For allocator growth it starts tracemalloc (unless it runs already),
    which swaps CPython's allocators: no other thread may be allocating
    through PyMem_RawMalloc without the GIL meanwhile (a CPython rule)."""
    if not callable(run_once):
        raise TypeError("run_once must be callable")
    leaking = set(probe_names(leaking, "leaking") if leaking else ())
    runs = check_count(runs, "runs", 1)
    if isinstance(ignore, (str, bytes, os.PathLike)):
        raise TypeError("ignore must be a list of folders or files, "
                        "not a single path")
    ignore = [os.path.abspath(os.fspath(path)) for path in ignore]
    diagnosis = Diagnosis(
        [name for name in PROBE_NAMES if name in leaking], runs)
    census = bool(leaking & _CENSUS_PROBES)
    traced = bool(leaking & _ALLOCATOR_PROBES)
    refs = "refs" in leaking

    _settle_and_collect()
    fds_before = _fds() if "fds" in leaking else None
    tasks_before = _tasks() if "threads" in leaking else None
    garbage_before = len(gc.garbage)
    started = False
    if traced and not tracemalloc.is_tracing():
        tracemalloc.start(_TRACE_FRAMES)
        started = True
    try:
        # The censuses nest around the runs, so that what each keeps is
        # there when the others count, before and after alike.
        trace_before = _traces() if traced else None
        refs_before = _refcount_census() if refs else None
        names = {}
        if census:
            # The type census after the runs follows a collection, which
            # untracks the tuples and dicts that hold nothing to track
            # (some just made by the lines above): so must this one, or
            # those would offset the growth (a leaked tuple read as -1).
            gc.collect()
        types_before = _type_census((), names) if census else None

        failure = _run(run_once, runs)

        _settle_and_collect()
        types_after = (_type_census((types_before,), names) if census
                       else None)
        refs_grown = _refcount_growth(refs_before, runs) if refs else None
        del refs_before
        trace_after = _traces() if traced else None
    finally:
        if started:
            tracemalloc.stop()
    if refs:
        diagnosis.refcounts = refs_grown
    if census:
        diagnosis.objects = _growth(types_before, types_after, names)
    if traced:
        diagnosis.allocations = _allocations(trace_before, trace_after,
                                             ignore)
        del trace_before, trace_after
    if "garbage" in leaking:
        diagnosis.garbage = _garbage(garbage_before)
    if "threads" in leaking:
        diagnosis.threads = _new_threads(tasks_before)
    if "fds" in leaking:
        diagnosis.fds = _describe_fds(sorted(_fds() - fds_before))
    if failure is not None:
        diagnosis.notes.append(f"re-running the code raised "
                               f"{type(failure).__name__}: {failure}")
    _notes(diagnosis, leaking)
    return diagnosis


def _run(run_once, runs):
    for _ in range(runs):
        try:
            _call(run_once)
        except Exception as exc:
            return exc
    return None


def _call(run_once):
    # The one line every re-run goes through (_CALL_SITE): what run_once
    # allocates here with no frame of its own is charged to the caller.
    return run_once()


_CALL_SITE = (_call.__code__.co_filename, _call.__code__.co_firstlineno + 3)


def _charged_frame(frames):
    """The index in `frames` ((file, line) pairs, oldest first) of the
    frame an allocation is charged to: the innermost one, unless that is
    leakcheck's.  When leakcheck only called the code under diagnosis
    (a C function or a class, which have no frame of their own), the
    charge goes to the innermost frame outside leakcheck: the line that
    handed the code in.  None for leakcheck's own allocations."""
    last = len(frames) - 1
    frame = frames[last]
    if not frame[0].startswith(_PACKAGE_DIR):
        return last
    if frame != _CALL_SITE:
        return None
    for i in range(last, -1, -1):
        if not frames[i][0].startswith(_PACKAGE_DIR):
            return i
    return None


def _outside_frames(frames, start):
    """The frames from `start` outwards, leakcheck's left out."""
    return [{"file": filename, "line": lineno}
            for filename, lineno in reversed(frames[:start + 1])
            if not filename.startswith(_PACKAGE_DIR)]


# ---- whose an allocation is ----------------------------------------------
#
# The standard library allocates on behalf of whoever calls it: a line in
# os.py that stores an environment variable is not, by itself, anybody's
# leak.  So the frame that decides whose an allocation is is the innermost
# one outside the standard library (from the frame it is charged to
# outwards): when that lies in a folder the caller said to ignore (a test
# runner), or in leakcheck (its own bookkeeping), the allocation is
# theirs, whatever the standard library did below it.  The same holds for
# what a harness's call into diagnose() allocates with no frame of its own
# (on 3.9, a block of 424 bytes charged to the plugin's line that calls
# diagnose()).  The line reported stays the charged one, as before.

def _folders(paths):
    """Each path with a trailing separator, also as its real path."""
    out = set()
    for path in paths:
        if path:
            for p in (os.path.abspath(path), os.path.realpath(path)):
                out.add(os.path.join(p, ""))
    return tuple(sorted(out))


def _site_folders():
    paths = [sysconfig.get_paths().get(key) for key in ("purelib",
                                                          "platlib")]
    try:
        paths += site.getsitepackages()
    except AttributeError:          # pragma: no cover (old virtualenv)
        pass
    try:
        paths.append(site.getusersitepackages())
    except AttributeError:          # pragma: no cover
        pass
    return _folders(paths)


_STDLIB_PATHS = {sysconfig.get_paths().get(key)
                 for key in ("stdlib", "platstdlib")} - {None}
_STDLIB = _folders(_STDLIB_PATHS)
# Installed packages can live below the standard library's folder
# (lib/python3.X/site-packages of a prefix installation): they are not it,
# nor are CPython's own tests (Lib/test), which are code under test.
_SITE = _site_folders() + _folders(os.path.join(path, "test")
                                   for path in _STDLIB_PATHS)
_stdlib_cache = {}


def _is_stdlib(filename):
    known = _stdlib_cache.get(filename)
    if known is None:
        known = (filename.startswith("<frozen ")
                 or (filename.startswith(_STDLIB)
                     and not filename.startswith(_SITE)))
        if len(_stdlib_cache) < 10000:
            _stdlib_cache[filename] = known
    return known


def _owned_elsewhere(frames, charged, ignored):
    """True when an allocation with these frames (oldest first), charged
    to frames[charged], belongs to a harness (`ignored`: a pair of a tuple
    of folders, each with a trailing separator, and a set of files) or to
    leakcheck itself, judged by the innermost frame outside the standard
    library from the charged one outwards; tracemalloc's own allocations
    too."""
    if frames[-1][0] == _TRACEMALLOC_FILE:
        return True
    folders, files = ignored
    for filename, lineno in reversed(frames[:charged + 1]):
        if _is_stdlib(filename):
            continue
        if filename.startswith(folders) or filename in files:
            return True
        return (filename.startswith(_PACKAGE_DIR)
                and (filename, lineno) != _CALL_SITE)
    return False        # all standard library, as far as the frames go


_TRACEMALLOC_FILE = tracemalloc.__file__
if _TRACEMALLOC_FILE.endswith((".pyc", ".pyo")):     # pragma: no cover
    _TRACEMALLOC_FILE = _TRACEMALLOC_FILE[:-1]


def _notes(diagnosis, leaking):
    if "native_bytes" in leaking:
        diagnosis.notes.append(
            "native_bytes counts malloc() outside CPython's allocators, which "
            "tracemalloc cannot see: run under valgrind (the valgrind probe) "
            "for the allocating stacks")
    if "refs" in leaking and not (diagnosis.refcounts or diagnosis.objects):
        diagnosis.notes.append(
            "refs grew with no object gaining references the collector can "
            "see: a reference count leak on an object only C code holds")


def _settle_and_collect():
    """What a snapshot does first: settle and collect fully (a snapshot of
    no probe is exactly that)."""
    _core.Snapshot(0)


def type_name(cls):
    module = getattr(cls, "__module__", None)
    qualname = getattr(cls, "__qualname__", None) or cls.__name__
    if module in (None, "builtins"):
        return qualname
    return f"{module}.{qualname}"


def _type_census(exclude, names):
    """{id(type): live objects of that type the collector tracks}, the
    objects in `exclude` left out; the names of the types go into
    `names`.  Keyed by id so as not to hold the types themselves (their
    reference counts would read as grown).

    It allocates nothing per object (no id(), no counter int): under
    tracemalloc, which records a traceback for every allocation, that
    would cost microseconds per object of the whole heap.  Each type gets
    a list, one item per object, that grows in amortized steps."""
    objects = gc.get_objects()
    buckets = {}
    for cls in map(type, objects):
        bucket = buckets.get(cls)
        if bucket is None:
            buckets[cls] = [None]
        else:
            bucket.append(None)
    del objects
    for obj in exclude:
        if gc.is_tracked(obj) and type(obj) in buckets:
            buckets[type(obj)].pop()
    counts = {}
    for cls, bucket in buckets.items():
        key = id(cls)
        counts[key] = len(bucket)
        if key not in names:
            names[key] = type_name(cls)
    return counts


def _growth(before, after, names):
    grown = [(count - before.get(key, 0), names[key])
             for key, count in after.items() if count > before.get(key, 0)]
    grown.sort(key=lambda item: (-item[0], item[1]))
    return [{"type": name, "delta": delta} for delta, name in grown[:_TOP]]


# Objects every piece of code shares (small ints, True, None), whose counts
# move with any code that stores them, and frames, which are running.
_SHARED_TYPES = (int, bool, type(None), type(sys._getframe()))


def _refcount_census():
    """Every object the collector tracks and everything those refer to
    directly (strings, numbers, ...), with their reference counts.  The
    list keeps ids from being reused; it adds references to every count
    (one per time it holds the object), the same before and after.

    Nothing is allocated per object (under tracemalloc every allocation
    costs microseconds, and the heap can hold millions): no id(), no set.
    So an object referred to from several places is in the list more
    than once, told apart by id only among the few that grew.  Left out
    are what the report would leave out anyway (shared objects, immortal
    ones), whose counts are the large ones that would each cost an int,
    and the tracked referents, which gc.get_objects() lists already
    (unless objects are frozen: gc.get_objects() does not list those)."""
    objects = gc.get_objects()
    referents = gc.get_referents(*objects)
    if not gc.get_freeze_count():
        referents = itertools.filterfalse(gc.is_tracked, referents)
    objects += referents
    del referents
    objects[:] = itertools.filterfalse(_not_reported, objects)
    return objects, _refcounts(objects)


def _not_reported(obj):
    return type(obj) in _SHARED_TYPES or _core.is_immortal(obj)


def _refcounts(objects):
    # An array, not a list: a list of ints would add references to the
    # small ints it holds, and they would read as grown.
    return array.array("q", map(sys.getrefcount, objects))


def _refcount_growth(census, runs):
    """The objects whose count grew by at least one per run."""
    objects, before = census
    after = _refcounts(objects)
    deltas = list(map(operator.sub, after, before))
    del after
    # compress() hands on only the pairs whose delta is big enough; zip
    # reuses its tuple for the others: nothing allocated per object
    # (operator.le, not runs.__le__, whose every call builds a tuple).
    hits = itertools.compress(zip(objects, deltas),
                              map(operator.le, itertools.repeat(runs),
                                  deltas))
    seen, grown = set(), []
    for obj, delta in hits:
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        grown.append((-delta, len(grown), obj))
    del hits, deltas, seen
    grown.sort(key=lambda item: item[:2])
    return [{"object": describe(obj), "type": type_name(type(obj)),
             "delta": -negative} for negative, _, obj in grown[:_TOP]]


def describe(obj, limit=80):
    """A short, safe description of an object: its type, and its repr when
    that is short and does not fail."""
    if isinstance(obj, type):
        return f"class {type_name(obj)}"
    name = type_name(type(obj))
    try:
        text = repr(obj)
    except Exception:
        text = ""
    if text and len(text) <= limit and not text.startswith("<"):
        return f"{name} {text}"
    return f"{name} object at {id(obj):#x}"


def _traces():
    """What tracemalloc traces now, raw: (domain, size, traceback with the
    innermost frame first, ...) tuples, as take_snapshot() holds them.
    Compared as they are, without building a Statistic per traceback."""
    snapshot = tracemalloc.take_snapshot()
    traces = getattr(snapshot.traces, "_traces", None)
    if traces is None:                      # pragma: no cover (not CPython)
        traces = [(trace.domain, trace.size,
                   tuple((f.filename, f.lineno)
                         for f in reversed(trace.traceback)))
                  for trace in snapshot.traces]
    return traces


def _by_traceback(traces):
    """{traceback: [size, count]} of raw traces."""
    groups = {}
    for trace in traces:
        group = groups.get(trace[2])
        if group is None:
            groups[trace[2]] = [trace[1], 1]
        else:
            group[0] += trace[1]
            group[1] += 1
    return groups


def _allocations(before, after, ignored=()):
    """The lines where the blocks new in `after` (raw traces, see
    _traces) were allocated, grouped by traceback as
    Snapshot.compare_to(..., "traceback") would; what a harness in
    `ignored` or leakcheck itself allocated left out."""
    # Each path ignored as a folder and as a file (what tracemalloc's
    # Filter(False, path) and Filter(False, path + "/*") matched).
    ignore = (_folders(ignored),
              frozenset(itertools.chain.from_iterable(
                  (os.path.abspath(p), os.path.realpath(p))
                  for p in ignored)))
    old = _by_traceback(before)
    by_line = {}
    for tb, (size, count) in _by_traceback(after).items():
        size_before, count_before = old.get(tb, (0, 0))
        if count <= count_before or not tb:
            continue
        frames = tb[::-1]                   # oldest first, as shown
        i = _charged_frame(frames)
        if i is None or _owned_elsewhere(frames, i, ignore):
            continue
        size_diff = size - size_before
        entry = by_line.setdefault(frames[i], [0, 0, None, 0])
        entry[0] += size_diff
        entry[1] += count - count_before
        if entry[2] is None or size_diff > entry[3]:
            entry[2], entry[3] = _outside_frames(frames, i), size_diff
    return _ranked(by_line)


def _ranked(by_line):
    ranked = sorted(by_line.items(), key=lambda item: (-item[1][0],
                                                       -item[1][1]))
    return [{"file": filename, "line": lineno, "size": size, "count": count,
             "source": linecache.getline(filename, lineno).strip(),
             "traceback": frames}
            for (filename, lineno), (size, count, frames, _) in
            ranked[:_TOP]]


def _garbage(before):
    counts, new = {}, {}
    for i, obj in enumerate(gc.garbage):
        name = type_name(type(obj))
        counts[name] = counts.get(name, 0) + 1
        if i >= before:
            new[name] = new.get(name, 0) + 1
    ranked = sorted(counts, key=lambda name: (-new.get(name, 0),
                                              -counts[name], name))
    return [{"type": name, "count": counts[name], "new": new.get(name, 0)}
            for name in ranked[:_TOP]]


def _fds():
    """The open descriptors.  Listing /proc/self/fd opens one more, which
    is closed again once listed: it is left out."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return set()
    fds = set()
    for name in names:
        try:
            os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        fds.add(int(name))
    return fds


def _describe_fds(fds):
    result = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue    # closed meanwhile
        result.append({"fd": fd, "target": target})
    return result[:_TOP * 3]


def _tasks():
    try:
        return {int(tid) for tid in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _new_threads(before):
    """The threads started since `before` (native ids) that are still
    alive, after giving them a moment to end."""
    deadline = time.monotonic() + _THREAD_WAIT
    while True:
        new = _tasks() - before
        if not new or time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    return _describe_threads(sorted(new))


def _describe_threads(tids):
    python = {getattr(t, "native_id", None): t for t in threading.enumerate()}
    result = []
    for tid in tids:
        thread = python.get(tid)
        if thread is not None:
            result.append({"name": thread.name,
                           "target": _thread_target(thread),
                           "daemon": thread.daemon, "native_id": tid,
                           "python": True})
        else:
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue    # ended meanwhile
            result.append({"name": name, "target": None, "daemon": None,
                           "native_id": tid, "python": False})
    return result


def _thread_target(thread):
    target = getattr(thread, "_target", None)
    if target is not None:
        return _callable_name(target)
    if type(thread).run is not threading.Thread.run:
        return _callable_name(type(thread).run)
    return None


def _callable_name(fn):
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return describe(fn)
    return f"{module}.{name}" if module else name


# ---- after the fact -----------------------------------------------------

def diagnose_after(leaking, deltas):
    """What can be told about a leak without running the code again:
    the types of the newest objects (as many as `objects` grew by), with
    where they were allocated when tracemalloc is tracing; gc.garbage;
    the threads alive; the open file descriptors."""
    leaking = set(leaking)
    diagnosis = Diagnosis([name for name in PROBE_NAMES if name in leaking])
    grown = deltas.get("objects", 0)
    if leaking & _CENSUS_PROBES and grown > 0:
        # Objects frozen with gc.freeze() are not in the generations, and
        # the newest are at the end of the oldest one.
        newest = gc.get_objects(generation=2)[-grown:]
        counts, names = {}, {}
        for obj in newest:
            key = id(type(obj))
            counts[key] = counts.get(key, 0) + 1
            names[key] = type_name(type(obj))
        diagnosis.objects = _growth({}, counts, names)
        if tracemalloc.is_tracing():
            diagnosis.allocations = _object_allocations(newest)
        del newest
    if "garbage" in leaking:
        diagnosis.garbage = _garbage(len(gc.garbage) - deltas.get("garbage",
                                                                  0))
    if "threads" in leaking:
        main = threading.main_thread().native_id
        diagnosis.threads = _describe_threads(sorted(_tasks() - {main}))
    if "fds" in leaking:
        diagnosis.fds = _describe_fds(sorted(_fds()))
    if leaking & (_CENSUS_PROBES - {"objects"}) and not diagnosis.allocations:
        diagnosis.notes.append(
            "for the lines that allocated what survived, run the code again "
            "under leakcheck.repeat() or with leakcheck.scope() as a "
            "decorator: a failing check then re-runs it under tracemalloc")
    _notes(diagnosis, leaking)
    return diagnosis


def _object_allocations(objects):
    by_line = {}
    for obj in objects:
        tb = tracemalloc.get_object_traceback(obj)
        if tb is not None:
            tb = [(frame.filename, frame.lineno) for frame in tb]
        i = _charged_frame(tb) if tb else None
        if i is None:
            continue
        entry = by_line.setdefault(tb[i],
                                   [0, 0, _outside_frames(tb, i), 0])
        entry[0] += sys.getsizeof(obj, 0)
        entry[1] += 1
    return _ranked(by_line)
