"""The diagnosis: what leaked and where, computed only after a verdict, so
that it never slows a clean run.

``diagnose(run_once, leaking)`` re-runs the code that leaked and watches
it the expensive way, with the kinds of evidence the leaking probes ask
for (leakcheck._evidence: objects, Python allocations, C allocations,
file descriptors and threads).

``diagnose_after(leaking, deltas)`` is for a verdict on code that cannot be
run again (the body of a ``with`` scope): what can be seen afterwards
alone.  The newest objects the collector tracks are the ones created last
(a full collection appends the younger generations to the end of the
oldest), so the scope's growth in objects has their types.
"""

import copy
import gc
import os
import sys
import threading
import tracemalloc
from typing import Any, Callable, Iterable, Optional, Union

from . import _settle, cpython
from ._evidence import Request, call
from ._evidence.native import NativeAllocations
from ._evidence.objects import (Garbage, RefCounts, TypeCensus,
                                describe, garbage_by_type, growth,
                                newest_objects, type_name)
from ._evidence.pyalloc import PyAllocations, object_allocations
from ._evidence.system import (Fds, Threads, describe_fds, describe_threads,
                               open_fds, tasks)
from ._probes import MAX_RUNS, PROBE_NAMES, check_count, probe_names
from .report.diagnosis import object_names

__all__ = ["Diagnosis", "diagnose", "diagnose_after", "describe",
           "type_name"]

# The kinds of evidence, outermost first: their before() calls run in this
# order around the shared re-runs, their after() calls in the reverse.
# The type census is outside the reference count census, which holds every
# object while the code runs: what a run replaces (a harness's log stream)
# would otherwise outlive its run and be counted as grown.
KINDS = (Fds, Threads, Garbage, PyAllocations, TypeCensus, RefCounts,
         NativeAllocations)


class Diagnosis:
    """What leaked and where.  Every attribute is a list, empty when the
    diagnosis has nothing to say about it; ``to_dict()`` gives them as
    JSON-ready data with stable keys, ``str()`` as readable text."""

    def __init__(self, leaking: Iterable[str] = (), runs: int = 0) -> None:
        self.leaking = list(leaking)
        self.runs = runs            # re-runs compared; 0: none possible
        # [{"type", "delta"}], biggest first
        self.objects: list[dict[str, Any]] = []
        # [{"file", "line", "size", "count", "source", "traceback"}]
        self.allocations: list[dict[str, Any]] = []
        # [{"object", "type", "delta"}]
        self.refcounts: list[dict[str, Any]] = []
        # [{"type", "count", "new"}]
        self.garbage: list[dict[str, Any]] = []
        # [{"fd", "target"}]
        self.fds: list[dict[str, Any]] = []
        # [{"name", "target", "daemon", "native_id", "python"}]
        self.threads: list[dict[str, Any]] = []
        # [{"object", "watched_at", "root", "expression", "path",
        #   "unseen_refs"}]
        self.chains: list[dict[str, Any]] = []
        # [{"file", "line", "function", "objects", "bytes", "blocks",
        #   "caller", "via"}]: C sites, bytes and blocks per run; "via" is
        #   the C API or C library function the site called (PyDict_New,
        #   strdup), which names what it made, or None
        self.native: list[dict[str, Any]] = []
        # [{"file", "line", "function", "bytes"}]: Python lines that ran
        # when the C heap grew for good, bytes per run, when memray named
        # no C site (a call through ctypes or cffi, or no memray)
        self.heap_lines: list[dict[str, Any]] = []
        self.capture: Optional[str] = None      # memray's capture, when kept
        self.notes: list[str] = []
        # The objects the re-runs made that are still alive, oldest first,
        # when asked for (Request.keep_objects); not part of to_dict().
        self.survivors: Optional[list[Any]] = None
        # Where each of those was allocated: ("file:line", whether that
        # is a harness's), or None when tracemalloc did not trace it.
        self.survivors_allocated: Optional[list[Any]] = None

    _KEYS = ("leaking", "runs", "objects", "allocations", "native",
             "heap_lines",
             "refcounts", "garbage", "fds", "threads", "chains", "notes",
             "capture")

    def to_dict(self) -> dict[str, Any]:
        """The diagnosis as plain data (str, int, bool, None, lists and
        dicts), with every key present."""
        return {key: copy.deepcopy(getattr(self, key)) for key in self._KEYS}

    def __bool__(self) -> bool:
        return any(getattr(self, key) for key in self._KEYS[2:])

    def __repr__(self) -> str:
        return f"<Diagnosis of {', '.join(self.leaking) or 'nothing'}>"

    def __str__(self) -> str:
        out = []
        # Growth over re-runs is said per run, as the verdict says it.
        runs = self.runs
        how = (f"per run, re-running the code {runs} time"
               f"{'' if runs == 1 else 's'}" if runs else "after the fact")
        if self.objects:
            out.append(f"objects that grew ({how}), most first:")
            width = max(len(entry["type"]) for entry in self.objects)
            out += [f"  {entry['type']:<{width}}  "
                    f"{_per_run(entry['delta'], runs)}"
                    for entry in self.objects]
        if self.allocations:
            out.append(f"where the surviving new memory was allocated "
                       f"({how}, tracemalloc), most first:")
            for entry in self.allocations:
                count = _per_run(entry["count"], runs)
                out.append(f"  {entry['file']}:{entry['line']}: "
                           f"{_per_run(entry['size'], runs)} bytes in "
                           f"{count} block"
                           f"{'' if count in ('+1', '-1') else 's'}")
                if entry["source"]:
                    out.append(f"      {entry['source']}")
                for frame in entry["traceback"][1:4]:
                    out.append(f"    called from {frame['file']}:"
                               f"{frame['line']}")
        if self.native:
            out.append("where C code allocated what survived (memray), per "
                       "run, most first:")
            for site in self.native:
                out += _native_site(site)
        if self.heap_lines:
            out.append("Python lines that ran when the C heap grew and kept "
                       "it (no C frame of it seen), per run, most first:")
            out += [f"  {_shown(entry['file'])}:{entry['line']} "
                    f"{entry['function']}: +{entry['bytes']} bytes"
                    for entry in self.heap_lines]
        if self.refcounts:
            out.append(f"objects whose reference count grew ({how}):")
            out += [f"  {_per_run(entry['delta'], runs)}  {entry['object']}"
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


def _per_run(total: int, runs: int) -> str:
    """`total` growth over `runs` re-runs as growth per run (`total` as it
    is when no re-run was made)."""
    if not runs or total % runs == 0:
        return f"{total // (runs or 1):+d}"
    return f"{total / runs:+.1f}"


def _native_site(site: dict[str, Any]) -> list[str]:
    objects = object_names(site["objects"])
    if site["line"]:
        where = f"{_shown(site['file'])}:{site['line']} {site['function']}()"
        if objects:
            where += f" in {objects}"
    else:
        where = f"{site['function']}() in {objects or 'an unknown object'}"
    lines = [f"  {where}: {site['bytes']} bytes in {site['blocks']} "
             f"block{'' if site['blocks'] == 1 else 's'}"
             + (f", made by {site['via']}()" if site.get("via") else "")]
    caller = site["caller"]
    if caller:
        lines.append(f"    called from {_shown(caller['file'])}:"
                     f"{caller['line']} {caller['function']}")
    return lines


def _shown(path: str) -> str:
    """`path` relative to the working folder when it lies below it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith(os.pardir) else relative


# ---- re-running ---------------------------------------------------------

def diagnose(run_once: Callable[[], object],
             leaking: Union[str, Iterable[str]], runs: int = 2,
             ignore: Iterable[Union[str, "os.PathLike[str]"]] = (),
             capture_dir: Union[str, "os.PathLike[str]", None] = None,
             keep_objects: bool = False, cheap: bool = False) -> Diagnosis:
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

    With `keep_objects`, Diagnosis.survivors holds the objects the re-runs
    made that are still alive (those the garbage collector tracks), when
    objects or allocator probes leak: the caller's to describe, then to
    drop.

    For allocator growth it starts tracemalloc (unless it runs already),
    which swaps CPython's allocators: no other thread may be allocating
    through PyMem_RawMalloc without the GIL meanwhile (a CPython rule).

    For growth that can come from C (refs, blocks, py_allocs, py_bytes,
    objects, native_bytes) it then re-runs the code under memray, when
    installed, for the C lines (Diagnosis.native).  Its capture files live
    in a temporary folder removed before returning; with `capture_dir`,
    the capture of the last re-runs is kept there (readable with
    ``memray flamegraph --leaks``) and its path is Diagnosis.capture.
    From CPython 3.12 on, after such a trace the code loaded so far gets
    the instrumentation data it would otherwise allocate when it next
    runs for the first time (a block or more per code object, which a
    later measurement would read as growth).

    `cheap` gathers less: tracemalloc keeps one frame per allocation, and
    memray runs only when the C heap alone grew (native_bytes and none
    of the Python probes), since growth the Python probes see has its
    Python lines without it; a note says the C lines were left out.
    memray's runs are then under one tracker, not two (none of one run to
    compare with), and the Python lines of C heap growth memray did not
    see are traced over `runs` runs, not at least two."""
    if not callable(run_once):
        raise TypeError("run_once must be callable")
    leaking = set(probe_names(leaking, "leaking") if leaking else ())
    runs = check_count(runs, "runs", 1, MAX_RUNS)
    if isinstance(ignore, (str, bytes, os.PathLike)):
        raise TypeError("ignore must be a list of folders or files, "
                        "not a single path")
    request = Request(leaking, runs,
                      [os.path.abspath(os.fspath(path)) for path in ignore],
                      capture_dir=capture_dir,
                      keep_objects=bool(keep_objects), cheap=bool(cheap))
    diagnosis = Diagnosis(
        [name for name in PROBE_NAMES if name in leaking], runs)
    kinds = [kind(request) for kind in KINDS if kind.wanted(request)]

    completed = [0]

    def run(count):
        return _run(run_once, count, completed)

    # Bound now: a method looked up between the two reference count
    # censuses would put its name in the type cache (which settling
    # empties), read as a reference the code kept.
    befores = [kind.before for kind in kinds]
    afters = [kind.after for kind in kinds]
    begun = finished = 0            # afters run from the last kind begun
    compared = runs                 # shared runs that ended
    try:
        failure = None
        for kind in kinds:
            failure = failure or kind.prepare(run)
        if failure is None:
            _settle.settle_and_collect()
            for before in befores:
                before()
                begun += 1
            completed[0] = 0
            if any(kind.shared for kind in kinds):
                failure = run(runs)
                compared = completed[0]
            _settle.settle_and_collect()
            while finished < begun:
                afters[begun - 1 - finished]()
                finished += 1
    finally:
        done = kinds[begun - finished:begun]
        for kind in kinds:
            if kind not in done:      # not begun, or something failed
                kind.abandon()
    for kind in kinds:
        if failure is None:
            failure = kind.own_runs(run)
    if any(getattr(kind, "traced", False) for kind in kinds):
        # The code loaded so far is instrumented now (3.12 on), not in the
        # first run of each after the trace: a later test's growth.
        cpython.instrument_code(_settle.module_namespaces(sys.modules))
    if failure is not None:
        diagnosis.notes.append(f"re-running the code raised {failure}")
    if done and compared < runs:
        # Stopped early: the growth is that of the runs that ended; with
        # none, the census compared nothing.
        diagnosis.runs = compared
        if not compared:
            done = []
    for kind in kinds:
        if kind in done:
            kind.fill(diagnosis)
    for kind in kinds:
        diagnosis.notes += kind.notes()
    skipped = NativeAllocations.skipped(request)
    if skipped:
        diagnosis.notes.append(skipped)
    _refs_note(diagnosis, leaking)
    _untracked_note(diagnosis, leaking)
    return diagnosis


def _run(run_once, runs, completed=None):
    """Runs `run_once` up to `runs` times, counting in completed[0] (when
    given) the runs that ended.  What stopped them, as "Type: message", or None: not
    the exception, whose traceback holds the frames that raised it (and
    the census after the runs would count them, and it, as grown)."""
    for _ in range(runs):
        try:
            call(run_once)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        if completed is not None:
            completed[0] += 1
    return None


def _refs_note(diagnosis, leaking):
    if "refs" in leaking and not (diagnosis.refcounts or diagnosis.objects
                                  or diagnosis.allocations):
        diagnosis.notes.append(
            "refs grew with no object gaining references the collector can "
            "see: a reference count leak on an object only C code holds")


NOTE_UNTRACKED = (
    "no type: what grew is no object the garbage collector tracks (a str, "
    "bytes or int, a dict or tuple holding only such, or memory that is no "
    "object), and only tracked objects are counted by type; {where}")


def _untracked_note(diagnosis, leaking):
    if diagnosis.objects or not leaking & {"refs", "blocks", "py_allocs",
                                          "py_bytes"}:
        return
    if any(site.get("via") for site in diagnosis.native):
        where = ("the C lines above say where it was made and by which "
                 "function (\"made by\")")
    elif diagnosis.native or diagnosis.allocations:
        where = "the lines above say where it was made"
    else:
        return          # the other notes say why no line is given
    diagnosis.notes.append(NOTE_UNTRACKED.format(where=where))


# ---- after the fact -----------------------------------------------------

def diagnose_after(leaking, deltas):
    """What can be told about a leak without running the code again:
    the types of the newest objects (as many as `objects` grew by), with
    where they were allocated when tracemalloc is tracing; gc.garbage;
    the threads alive; the open file descriptors."""
    leaking = set(leaking)
    request = Request(leaking, 0)
    diagnosis = Diagnosis([name for name in PROBE_NAMES if name in leaking])
    grown = deltas.get("objects", 0)
    if TypeCensus.wanted(request) and grown > 0:
        newest = newest_objects(grown)
        counts, names = {}, {}
        for obj in newest:
            key = id(type(obj))
            counts[key] = counts.get(key, 0) + 1
            names[key] = type_name(type(obj))
        diagnosis.objects = growth({}, counts, names)
        if tracemalloc.is_tracing():
            diagnosis.allocations = object_allocations(newest)
        del newest
    if "garbage" in leaking:
        diagnosis.garbage = garbage_by_type(
            len(gc.garbage) - deltas.get("garbage", 0))
    if "threads" in leaking:
        main = threading.main_thread().native_id
        diagnosis.threads = describe_threads(sorted(tasks() - {main}))
    if "fds" in leaking:
        diagnosis.fds = describe_fds(sorted(open_fds()))
    if (leaking & (TypeCensus.probes - {"objects"})
            and not diagnosis.allocations):
        diagnosis.notes.append(
            "for the lines that allocated what survived, run the code again "
            "under leakcheck.repeat() or with leakcheck.scope() as a "
            "decorator: a failing check then re-runs it under tracemalloc")
    if "native_bytes" in leaking:
        diagnosis.notes.append(
            "for the C lines that allocated what survived, run the code "
            "again under leakcheck.repeat() or with leakcheck.scope() as a "
            "decorator: a failing check then re-runs it under memray")
    _refs_note(diagnosis, leaking)
    _untracked_note(diagnosis, leaking)
    return diagnosis
