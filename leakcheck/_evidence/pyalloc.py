"""Evidence from CPython's allocators: the Python lines where the blocks
that survived the runs were allocated, found with tracemalloc
(Diagnosis.allocations).

tracemalloc swaps CPython's allocators when it starts: no other thread
may be allocating through PyMem_RawMalloc without the GIL meanwhile (a
CPython rule)."""

import linecache
import sys
import tracemalloc

from . import TOP, Evidence
from .frames import charged_frame, ignored, outside_frames, owned_elsewhere

__all__ = ["PyAllocations", "object_allocations", "NOTE_CODE_STOPS"]

TRACE_FRAMES = 10         # tracemalloc frames kept per allocation
CHEAP_FRAMES = 1          # the same, for a cheap diagnosis
NOTE_CODE_STOPS = (
    "no Python lines: the code calls tracemalloc.stop() itself, which ends "
    "the diagnosis's tracing (and drops its traces) in every run; the rest "
    "of the diagnosis comes from runs left to the code's own tracemalloc")

_TRACEMALLOC_FILE = tracemalloc.__file__
if _TRACEMALLOC_FILE.endswith((".pyc", ".pyo")):     # pragma: no cover
    _TRACEMALLOC_FILE = _TRACEMALLOC_FILE[:-1]


class PyAllocations(Evidence):
    """What tracemalloc traces before and after the runs (starting it,
    one run earlier, unless it runs already), compared: what a harness in
    `request.ignore` or leakcheck itself allocated left out.

    tracemalloc stays the code's: running already, it is used as it is
    (its frame limit, its traces); started here, it is stopped again.
    Code that stops it (a test that starts and stops it to count its own
    allocations) gets no Python lines, and a note says so: the run that
    showed that ran under the diagnosis's tracing, its start() a no-op,
    so what it raised is not held against it."""

    probes = frozenset({"blocks", "py_bytes", "py_allocs", "objects"})

    def __init__(self, request):
        super().__init__(request)
        self.started = False
        self.stopped = False        # the code stops tracemalloc itself
        self.traces_before = None
        self.traces_after = None

    def prepare(self, run):
        # Traced from one run before the ones compared: what a run
        # replaces every time (a harness's log stream, a cache entry) is
        # then traced on both sides, not read as memory the code kept.
        if tracemalloc.is_tracing():
            return None
        frames = CHEAP_FRAMES if self.request.cheap else TRACE_FRAMES
        tracemalloc.start(frames)
        self.started = True
        failure = run(1)
        if (tracemalloc.is_tracing()
                and tracemalloc.get_traceback_limit() == frames):
            return failure
        self.started = False        # what runs now, if anything, is theirs
        self.stopped = True
        return None

    def before(self):
        if not self.stopped and tracemalloc.is_tracing():
            self.traces_before = _traces()
        else:
            self.stopped = True

    def after(self):
        try:
            if not self.stopped and tracemalloc.is_tracing():
                self.traces_after = _traces()
            else:
                self.stopped = True
        finally:
            self.abandon()

    def abandon(self):
        if self.started:
            self.started = False
            tracemalloc.stop()

    def fill(self, diagnosis):
        if not self.stopped:
            diagnosis.allocations = _allocations(
                self.traces_before, self.traces_after, self.request.ignore)
        self.traces_before = self.traces_after = None

    def notes(self):
        # Also when the runs were stopped (a budget): known from the first.
        return [NOTE_CODE_STOPS] if self.stopped else []


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


def _allocations(before, after, ignore_paths=()):
    """The lines where the blocks new in `after` (raw traces, see
    _traces) were allocated, grouped by traceback as
    Snapshot.compare_to(..., "traceback") would; what a harness in
    `ignore_paths` or leakcheck itself allocated left out, and
    tracemalloc's own allocations."""
    ignore = ignored(ignore_paths)
    old = _by_traceback(before)
    by_line = {}
    for tb, (size, count) in _by_traceback(after).items():
        size_before, count_before = old.get(tb, (0, 0))
        if count <= count_before or not tb:
            continue
        frames = tb[::-1]                   # oldest first, as shown
        i = charged_frame(frames)
        if (i is None or frames[-1][0] == _TRACEMALLOC_FILE
                or owned_elsewhere(frames, i, ignore)):
            continue
        size_diff = size - size_before
        entry = by_line.setdefault(frames[i], [0, 0, None, 0])
        entry[0] += size_diff
        entry[1] += count - count_before
        if entry[2] is None or size_diff > entry[3]:
            entry[2], entry[3] = outside_frames(frames, i, ignore), size_diff
    return _ranked(by_line)


def _ranked(by_line):
    ranked = sorted(by_line.items(), key=lambda item: (-item[1][0],
                                                       -item[1][1]))
    return [{"file": filename, "line": lineno, "size": size, "count": count,
             "source": _source(filename, lineno),
             "traceback": frames}
            for (filename, lineno), (size, count, frames, _) in
            ranked[:TOP]]


def _source(filename, lineno):
    """The line's text, stripped; "" when unreadable.  linecache's cache is
    read, not filled: under the code's own tracemalloc a file's lines kept
    there would stay among what it traces."""
    entry = linecache.cache.get(filename)   # (size, mtime, lines, path)
    if entry is not None and len(entry) == 4:
        lines = entry[2]
    else:
        try:
            with open(filename, "rb") as f:
                lines = f.read().splitlines()
        except (OSError, ValueError):
            return ""
    if not 0 < lineno <= len(lines):
        return ""
    line = lines[lineno - 1]
    if isinstance(line, bytes):     # a line shown, not parsed: no cookie
        line = line.decode("utf-8", "replace")
    return line.strip()


def object_allocations(objects):
    """Where `objects` were allocated, by line, when tracemalloc traced
    their allocation."""
    by_line = {}
    for obj in objects:
        tb = tracemalloc.get_object_traceback(obj)
        if tb is not None:
            tb = [(frame.filename, frame.lineno) for frame in tb]
        i = charged_frame(tb) if tb else None
        if i is None:
            continue
        entry = by_line.setdefault(tb[i], [0, 0, outside_frames(tb, i), 0])
        entry[0] += sys.getsizeof(obj, 0)
        entry[1] += 1
    return _ranked(by_line)
