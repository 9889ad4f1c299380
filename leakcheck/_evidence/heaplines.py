"""Evidence from the C heap without memray's frames: the Python lines that
were running when the C heap grew and kept the growth (Diagnosis.
heap_lines).

memray names a C allocation by its stack, but it sees only the calls that
go through the symbols it hooks: a function pointer taken with dlsym(), as
ctypes and cffi take them (``ctypes.CDLL(None).malloc(n)``), reaches the C
library's malloc directly, and its memory appears in no capture.  The C
heap (native_bytes, read as the verdict reads it) grows all the same.

So the code runs again under a line tracer that reads native_bytes at each
event and charges the growth between two events to the Python line that
ran in between.  What a line allocates and a later line frees again is
not charged: growth counts only as far as the heap never comes back below
it before the run ends (the heap's low-water mark from there on), so the
lines charged add up to what the run kept.  A line is named when it was
charged in every run, with the least it kept in one; the tracer's own
allocations (taken between its two reads) are left out.

Used when native_bytes leaked and memray named no C site (or is missing).
The tracer replaces no other one: under coverage or a debugger it does not
run, and says so.
"""

import sys

from .. import _core
from .. import _probes
from . import TOP, call, is_own
from .frames import charged_frame, is_stdlib, owned_elsewhere

__all__ = ["heap_lines", "NOTE_TRACER", "NOTE_CUT"]

NOTE_TRACER = ("no Python line for the C heap's growth: another trace "
               "function is set (coverage, a debugger), which the line "
               "tracer would replace")
NOTE_CUT = ("the Python lines of the C heap's growth were not looked for "
            "past {events} trace events per run")

# Trace events per run past which the tracer gives up: it reads the heap
# twice per event of the code's own frames (43 us a read measured on a
# small process, CPython 3.11), so a run stays within about 2 seconds.
MAX_EVENTS = 20000

_NATIVE = 1 << _probes.index_of("native_bytes")


def _heap():
    return _core.Snapshot(_NATIVE, _core.SNAPSHOT_NO_COLLECT)["native_bytes"]


def heap_lines(run, runs, ignore):
    """(lines, note, failure): the Python lines charged with C heap growth
    in each of `runs` runs of `run` (run(1) runs the code once and returns
    what stopped it, or None), as [{"file", "line", "function", "bytes"}],
    most bytes first; note is None or why nothing was looked for; failure
    what stopped a run, or None.  `ignore`: a harness's folders and files
    (frames.ignored())."""
    if sys.gettrace() is not None:
        return [], NOTE_TRACER, None
    per_run = []
    for _ in range(runs):
        _core.Snapshot(0)               # settle and collect, as a run does
        charged, failure = _traced(run, ignore)
        if failure is _CUT:
            return [], NOTE_CUT.format(events=MAX_EVENTS), None
        if failure is not None:
            return [], None, failure
        per_run.append(charged)
    common = set.intersection(*(set(c) for c in per_run)) if per_run \
        else set()
    lines = [{"file": key[0], "line": key[1], "function": key[2],
              "bytes": min(c[key] for c in per_run)} for key in common]
    lines.sort(key=lambda e: (-e["bytes"], e["file"], e["line"]))
    return lines[:TOP], None, None


_CUT = object()


def _traced(run, ignore):
    """Runs the code once under the tracer: ({(file, line, function):
    bytes kept}, None), or (None, what stopped the run, or _CUT when it
    had too many events).

    Only the code's own frames are traced: a frame of the standard
    library, of a harness or of leakcheck gets no line events and its
    call reads nothing, so what it grows is charged to the line that
    called it (the standard library allocating for its caller), or to
    nobody (a harness's line: the step after the code's frame returned
    is its caller's).  leakcheck's one line that calls the code (the
    call site) is traced: what a C function handed in directly grows is
    charged there, hence to the line that handed it in."""
    dirs, files = ignore
    wanted = {}

    def traced(code):
        known = wanted.get(code)
        if known is None:
            name = code.co_filename
            known = (code is call.__code__
                     or not (is_own(name) or is_stdlib(name)
                             or name.startswith(dirs) or name in files))
            wanted[code] = known
        return known

    # A stack of [key, bytes] growths not yet given back: a drop of the
    # heap gives back the latest first, so what stays on it at the end is
    # what each line kept (the low-water mark of what followed).  Keys,
    # not frames: a frame kept would keep its locals alive past its
    # return.
    kept = []
    state = {"frame": None, "line": 0, "level": 0, "events": 0}

    def tracer(frame, event, arg):
        if event == "call" and not traced(frame.f_code):
            return None
        now = _heap()
        grown = now - state["level"]
        if grown > 0 and state["frame"] is not None:
            kept.append([_charged(state["frame"], state["line"], ignore),
                         grown])
        elif grown < 0:
            _give_back(kept, -grown)
        if event == "return":
            caller = frame.f_back
            state["frame"] = caller
            state["line"] = caller.f_lineno if caller is not None else 0
        else:
            state["frame"] = frame
            state["line"] = frame.f_lineno
        state["events"] += 1
        if state["events"] > MAX_EVENTS:
            sys.settrace(None)
            return None
        state["level"] = _heap()        # the tracer's own growth left out
        return tracer

    state["level"] = _heap()
    sys.settrace(tracer)
    try:
        failure = run(1)
    finally:
        sys.settrace(None)
    # What grew after the last event (the code's last line, up to the end
    # of run(1)) is the caller's, which is leakcheck: not charged.
    state["frame"] = None
    grown = _heap() - state["level"]
    if grown < 0:
        _give_back(kept, -grown)
    if state["events"] > MAX_EVENTS:
        return None, _CUT
    if failure is not None:
        return None, failure
    charged = {}
    for key, size in kept:
        if key is not None and size > 0:
            charged[key] = charged.get(key, 0) + size
    return charged, None


def _give_back(kept, amount):
    while amount > 0 and kept:
        top = kept[-1]
        if top[1] > amount:
            top[1] -= amount
            return
        amount -= top[1]
        kept.pop()


def _charged(frame, line, ignore):
    """(file, line, function) of the user's frame charged with growth
    made while `frame` ran `line`, or None when it is leakcheck's or a
    harness's."""
    frames, names = [], []
    f, lineno = frame, line
    while f is not None:
        frames.append((f.f_code.co_filename, lineno))
        names.append(f.f_code.co_name)
        f = f.f_back
        lineno = f.f_lineno if f is not None else 0
    frames.reverse()
    names.reverse()
    i = charged_frame(frames)
    if i is None or owned_elsewhere(frames, i, ignore) \
            or is_own(frames[i][0]):
        return None
    return (frames[i][0], frames[i][1], names[i])
