"""Scope and series verdicts: the engine's lc_scope and lc_series with
names for probes, validated arguments, and a diagnosis when they fail.

Nothing here allocates between the two snapshots of a measurement beyond
temporaries: every object a verdict keeps is created before its first
snapshot, and results are stored only after the last one.
"""

import functools
import os
import sys
import threading
import time
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Callable, Literal, Optional, Tuple,
                    Type, TypeVar, Union, cast)

from . import _core, _settle, cpython
from ._evidence import is_own
from ._errors import LeakError
from ._probes import (MAX_RUNS, PROBE_NAMES, ProbeInfo, ProbeNames,
                      Tolerance,
                      await_threads, check_count, index_of, names_of,
                      readable_mask, thread_count, tolerances)

if TYPE_CHECKING:
    from ._diagnose import Diagnosis

__all__ = ["scope", "Series", "repeat"]

_F = TypeVar("_F", bound=Callable[..., Any])


_HOOKED = ("py_bytes", "py_allocs")
_INT_MAX = (1 << 31) - 1  # a C int: the engine's line numbers
MAX_REPEAT = MAX_RUNS     # the engine's cap (LC__MAX_REPEAT)
MSG_HOOK_RESTORED = (
    "leakcheck's allocator hook was taken out while this ran (tracemalloc, "
    "started before leakcheck, removes it on stop()) and was put back; "
    "what was allocated meanwhile was not seen")


def unread(asked, compared, restores):
    """{name: why} for the probes asked for that were not compared.
    `restores` is how often the allocator hook was put back while
    measuring (_core.hook_restored() after minus before)."""
    reasons = {}
    for name in asked:
        if name in compared:
            continue
        if name in _HOOKED and restores:
            reasons[name] = MSG_HOOK_RESTORED
        else:
            info = ProbeInfo(*_core.probe_info(index_of(name)))
            reasons[name] = info.reason or "not read"
    return reasons


def _unread_line(reasons):
    """A line naming the probes that were not read and why, or ''."""
    if not reasons:
        return ""
    return "  not read here: " + ", ".join(
        f"{name} ({why})" for name, why in reasons.items()) + "\n"


def _cpu_ns(thread):
    """The CPU time `thread` has used, in ns, or None where it cannot be
    read.  Linux names a thread's CPU clock by its id (the kernel's
    MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)); a thread gone since
    reads as an error, never as another thread's time."""
    native = getattr(thread, "native_id", None)
    if not sys.platform.startswith("linux") or not isinstance(native, int):
        return None
    try:
        return time.clock_gettime_ns(((~native) << 3) | 6)
    except (OSError, OverflowError, ValueError):
        return None


def _other_threads(seen=None):
    """{ident: CPU time used so far, or None} of the Python threads alive
    now but the caller's; those already in `seen` keep its reading."""
    if threading.active_count() == 1 and \
            threading.current_thread() is threading.main_thread():
        return seen if seen is not None else {}     # no other thread
    me = threading.get_ident()
    now = {t.ident: _cpu_ns(t) for t in threading.enumerate()
           if t.ident != me}
    if seen:
        now.update(seen)
    return now


def _still_running(others):
    """Names (and targets) of the threads in `others` (_other_threads())
    still alive that used the CPU since: they ran from one snapshot to the
    other, and what they allocated meanwhile counts in the process-wide
    probes too.  A thread that waited all along (a server blocked in
    accept()) allocated nothing and is not named; one whose CPU time
    cannot be read is."""
    found = []
    if not others:
        return found
    for t in threading.enumerate():
        if t.ident not in others:
            continue
        before, after = others[t.ident], _cpu_ns(t)
        if before is not None and after is not None and after == before:
            continue
        target = getattr(getattr(t, "_target", None), "__qualname__", None)
        found.append(f"{t.name} ({target})" if target else t.name)
    return sorted(found)


def _threads_line(threads):
    if not threads:
        return ""
    return ("  other threads ran while it measured (what they allocate "
            "counts too): " + ", ".join(threads) + "\n")


def _compose(engine_report, reasons, diagnosis, threads=()):
    text = engine_report + _unread_line(reasons) + _threads_line(threads)
    if diagnosis:
        text += str(diagnosis) + "\n"
    return text.rstrip("\n")


def _caller(depth):
    """(file, line) of the frame `depth` levels above the caller.  The
    frame object it materializes (3.11+) lives as long as that frame runs,
    so asking again later allocates nothing."""
    frame = sys._getframe(depth + 1)
    return frame.f_code.co_filename, frame.f_lineno


def _outside_caller() -> Tuple[str, int]:
    """(file, line) of the innermost caller outside leakcheck and its
    pytest plugin: the test's line that called the fixture's check()."""
    frame = sys._getframe(2)
    while frame.f_back is not None and is_own(frame.f_code.co_filename):
        frame = frame.f_back
    return frame.f_code.co_filename, frame.f_lineno


class _Prebound:
    """A method whose bound form each instance makes once, in __init__, so
    that looking it up allocates nothing.  The with statement looks up
    __exit__ before it calls __enter__, and 3.11+ frees that bound method
    just before calling it: a fresh one would be alive at the first
    snapshot and gone at the second, and clean code would read as
    shrinking."""

    def __init__(self, attr):
        self.attr = attr

    def __get__(self, obj, cls=None):
        return self if obj is None else getattr(obj, self.attr)


_REFS = index_of("refs")
_REFS_BIT = 1 << _REFS
_HUGE = 1 << 40

# What a scope adds to the refs probe by itself, per kind of scope ("with"
# statement, or "call" of a decorated function): (refs delta, delta of the
# scope object's own reference count) of an empty scope.  The with
# statement holds different references when it calls __enter__ and
# __exit__ (the bound __exit__, its arguments, __enter__'s result), so an
# empty scope is not zero in refs.  Measured once, on debug builds only.
_refs_offsets: "dict[str, Tuple[int, int]]" = {}
_calibrating: "list[str]" = []          # non-empty while measuring
_calibration = [0, 0]                   # the last measurement's raw deltas


def _refs_offset(kind):
    if kind not in _refs_offsets:
        _calibrating.append(kind)
        try:
            seen = []
            for _ in range(8):
                if kind == "with":
                    with scope(probes=("refs",), tolerance=_HUGE):
                        pass
                else:
                    scope(probes=("refs",), tolerance=_HUGE)(_nothing)()
                seen.append(tuple(_calibration))
                if len(seen) >= 3 and seen[-1] == seen[-2] == seen[-3]:
                    break
            _refs_offsets[kind] = max(set(seen), key=seen.count)
        finally:
            _calibrating.pop()
    return _refs_offsets[kind]


def _nothing():
    pass


# Before the process's first scope: one settle and collection, so that
# what the process did before it is not read between its snapshots.  On
# CPython 3.12, the first scope of a pytest session (tests/python/api/
# test_basics.py's test_unreadable_probes_are_named_in_reports run alone)
# read `blocks -1` and `py_allocs -1` around nothing, so a one-block leak
# read clean; a gc.collect() or a settle() before the scope read 0, two
# settles inside its first snapshot did not.  What block that was is not
# known (a gc callback or tracemalloc watching it made it read 0).
_first_scope = True


def _settle_first():
    global _first_scope
    _first_scope = False
    _settle.settle_and_collect()


class scope:
    """Fails with LeakError when the code it covers leaves growth behind.

    As a context manager::

        with leakcheck.scope():
            code_under_test()

    As a decorator, each call of the function is a scope, and a failing call
    is re-run under the diagnosis (so decorate functions that can run again
    and return nothing, such as tests: a returned object counts as growth)::

        @leakcheck.scope(probes=["objects", "fds"])
        def test_it(): ...

    ``probes``: names (sequence, or comma-separated string), default
    DEFAULT_PROBES; probes that cannot be read here are skipped.
    ``tolerance``: growth allowed, an int for every probe or a dict
    {probe: int}; growth beyond it is a leak.  When the body raises, no
    verdict is made and the exception propagates.

    A scope has no warm-up: what the code fills on first use that settling
    does not clear (a module imported, a string interned, a logger made)
    is growth.  Run the code once before the scope, or use repeat().
    (The process's first scope settles and collects once more before its
    first snapshot: what came before it is not its code's.)

    After the block: ``leaked`` (bool), ``leaking`` (names), ``deltas``
    ({name: growth}), ``probes`` (names compared), ``unread`` ({name:
    why} for probes asked for but not compared), ``threads`` (other threads
    that ran from one snapshot to the other), ``report`` (str).
    """

    def __init__(self, probes: ProbeNames = None,
                 tolerance: Tolerance = None,
                 name: Optional[str] = None) -> None:
        self._mask = readable_mask(probes)
        self._asked = names_of(self._mask)
        self._tolerance = tolerances(tolerance, self._asked)
        if cpython.SCOPE_NATIVE_TOLERANCE and "native_bytes" in self._asked:
            self._tolerance.setdefault("native_bytes",
                                       cpython.SCOPE_NATIVE_TOLERANCE)
        self._settings = (probes, tolerance)
        self.name = name
        self._core = None
        self._kind = "with"
        self._rerun = None          # set by the decorator: run the call again
        self._location = None       # set by the decorator: the function
        self._refs = None           # [offset, own refcount]
        self._threads = 0           # the process's threads at __enter__
        self.leaked: Optional[bool] = None
        self.leaking: list[str] = []
        self.deltas: dict[str, int] = {}
        self.probes: list[str] = []
        self.unread: dict[str, str] = {}
        self.threads: list[str] = []
        self.report: Optional[str] = None
        self._restores = 0
        self._others: dict[int, Optional[int]] = {}
        self._bound_enter = self._enter
        self._bound_exit = self._exit

    if TYPE_CHECKING:
        def __enter__(self) -> "scope": ...

        def __exit__(self, exc_type: Optional[Type[BaseException]],
                     exc: Optional[BaseException],
                     tb: Optional[TracebackType]) -> Literal[False]: ...
    else:
        __enter__ = _Prebound("_bound_enter")
        __exit__ = _Prebound("_bound_exit")

    def _enter(self):
        # At core.begin() this frame must hold the same references whatever
        # the arguments were (refs counts them): only `self` and `core`.
        if self._core is not None:
            raise RuntimeError("leakcheck.scope is already active: use a new "
                               "scope for each with statement")
        if _first_scope:
            _settle_first()
        core = self._prepare()
        self._core = core
        if self._refs is not None:
            self._refs[1] = sys.getrefcount(self)
        core.begin()
        return self

    def _prepare(self):
        core = _core.Scope(self.name or "scope")
        core.set_probes(self._mask)
        for name, value in self._tolerance.items():
            core.set_tolerance(index_of(name), value)
        self._location = self._location or _caller(2)
        core.set_location(*self._location)
        self._threads = thread_count()
        self._restores = _core.hook_restored()
        self._others = _other_threads()
        self._refs = None
        if self._mask & _REFS_BIT & _core.probes_available():
            offset = (0, 0) if _calibrating else _refs_offset(self._kind)
            self._refs = [offset, 0]
        return core

    def _exit(self, exc_type, exc, tb):
        # Until core.end() has read the probes, nothing here may create an
        # object that outlives the call: no closure, no comprehension, no
        # int that is not cached.
        core = self._core
        if core is None:
            raise RuntimeError("leakcheck.scope is not active: __exit__ "
                               "without __enter__")
        self._core = None
        if exc_type is not None:
            return False
        await_threads(self._threads)
        if self._refs is not None:
            # References to this scope object made since __enter__ (the
            # `as` target) are the measurement's own: they count in refs.
            self._refs[1] = sys.getrefcount(self) - self._refs[1]
            if not _calibrating:
                core.set_baseline(_REFS, self._correction())
        core.end()
        self._judge(core)
        return False

    def _correction(self):
        (refs, own), grown = self._refs
        return refs + grown - own

    def _judge(self, core):
        self.leaked = core.leaked()
        self.probes = compared = names_of(core.probes())
        self.deltas = {name: core.delta(index_of(name)) for name in compared}
        self.leaking = names_of(core.leaking())
        if _calibrating and "refs" in self.deltas:
            _calibration[:] = [self.deltas["refs"], self._refs[1]]
        diagnosis = None
        if self.leaked:
            from . import _diagnose
            if self._rerun is not None:
                diagnosis = _diagnose.diagnose(self._rerun, self.leaking)
            else:
                diagnosis = _diagnose.diagnose_after(self.leaking,
                                                     self.deltas)
        # The engine words the report, from the deltas it judged (refs
        # corrected by the baseline).
        head = core.report()
        self.unread = unread(self._asked, compared,
                             _core.hook_restored() - self._restores)
        self.threads = _still_running(self._others)
        self.report = _compose(head, self.unread, diagnosis, self.threads)
        if self.leaked:
            raise LeakError(self.report, diagnosis)

    def __call__(self, func: _F) -> _F:
        probes, tolerance = self._settings
        name = self.name or getattr(func, "__qualname__", None)
        code = getattr(func, "__code__", None)

        cpython.make_frames(func)

        @functools.wraps(func)
        def checked(*args, **kwargs):
            each = scope(probes=probes, tolerance=tolerance, name=name)
            each._kind = "call"
            each._rerun = functools.partial(func, *args, **kwargs)
            if code is not None:
                each._location = (code.co_filename, code.co_firstlineno)
            with each:
                result = func(*args, **kwargs)
            return result
        return cast(_F, checked)


class Series:
    """A series verdict for callers that run the code themselves::

        series = leakcheck.Series(warmup=1, repeat=4)
        while series.next():
            run_once()
        if series.leaked: ...

    After `warmup` unmeasured runs, each measured run gives one delta per
    probe; a probe leaks when it grows to a new high by its threshold
    (tolerance + 1 when ``tolerance`` is given, else the probe's default)
    in `repeat` runs, never more than ``window`` - 1 runs apart (window 2,
    or 3 when ``thorough``): a leak in every run takes `repeat` runs, one
    that skips a run or two up to `repeat` * window; growth freed and kept
    again, back and forth, is no leak.  A probe whose growth dies out (its
    later runs grew less than half its earlier ones) runs on, up to
    `repeat` * 8 more runs, and is no leak when it stops.  The engine
    stops as soon as no probe can still leak: clean code costs `warmup` +
    1 or 2 measured runs.  The last warm-up run is read too: when it grew
    nothing (no probe read less than before, but py_bytes and native_bytes
    by up to 32 bytes, glibc's chunk rounding; none reached its threshold),
    there was nothing to warm up, that run is the measured run
    (``warmup_measured``), and clean code costs `warmup` runs.

    ``thorough`` (for nightly hunts): a warm-up run that grew nothing does
    not end the series (a leak that skips it is caught, at two more runs
    per clean test), the window is 3, and every suspected leak runs on up
    to 512 more runs while it grows (a cache bounded at a few hundred
    entries fills, stops, and is no leak).

    A verdict that rests on py_bytes or native_bytes alone (the probes
    that count bytes) is confirmed over 8 more runs (growth in each half
    of them), which read those probes only: their ``deltas`` are then
    longer than the others'.  The engine judges all of it (lc_series, the
    verdict of LEAK_REPEAT too); this class drives it and reads it.

    Once next() has returned False: ``leaked``, ``leaking`` (names),
    ``runs`` (measured runs), ``main_runs`` (those before suspects ran on),
    ``warmup_measured`` (the last warm-up run
    grew nothing and was the measured run), ``warmup_growth`` ({name:
    delta} of the probes that last warm-up run moved, read but not the
    measured run: what made the measured runs due; empty otherwise),
    ``probes`` (names compared),
    ``deltas``
    ({name: [delta per run]}), ``thresholds`` ({name: int}), ``unread``
    ({name: why} for probes asked for but not compared), ``threads``
    (other threads that ran from the first snapshot to the last: the
    probes are process-wide) and report().

    rebase() takes again the snapshot the next measured run is compared
    with: what the caller made between two runs (state it keeps only once
    it knows more runs are due) is then not that run's growth.
    """

    def __init__(self, warmup: int = 1, repeat: int = 4,
                 probes: ProbeNames = None, tolerance: Tolerance = None,
                 name: Optional[str] = None,
                 location: Optional[Tuple[Union[str, "os.PathLike[str]"],
                                          int]] = None,
                 thorough: bool = False) -> None:
        self.warmup = check_count(warmup, "warmup", 0, MAX_RUNS)
        self.repeat = check_count(repeat, "repeat", 1, MAX_REPEAT)
        if not isinstance(thorough, bool):
            raise TypeError(f"thorough must be a bool, not "
                            f"{type(thorough).__name__}")
        self.thorough = thorough
        mask = readable_mask(probes)
        self._asked = names_of(mask)
        self.name = name or "series"
        core = _core.Series(self.name, self.warmup, self.repeat)
        core.set_probes(mask)
        core.set_thorough(thorough)
        self.window = core.window()
        # A run leaks from tolerance + 1 on: the engine's rule.
        for name, value in tolerances(tolerance, self._asked).items():
            core.set_tolerance(index_of(name), value)
        # (file, line) the report names; by default where the Series is made.
        if location is None:
            location = _caller(1)
        file, line = location
        core.set_location(str(file), check_count(line, "location line", 0,
                                                 _INT_MAX))
        self._core = core
        self._restores = _core.hook_restored()
        self._calls = 0
        self._others: dict[int, Optional[int]] = {}
        self.done = False
        self.leaked: Optional[bool] = None
        self.leaking: list[str] = []
        self.runs = 0
        self.main_runs = 0
        self.warmup_measured = False
        self.warmup_growth: dict[str, int] = {}
        self.probes: list[str] = []
        self.deltas: dict[str, list[int]] = {}
        self.thresholds: dict[str, int] = {}
        self.unread: dict[str, str] = {}
        self.threads: list[str] = []

    def next(self) -> bool:
        """True while the code must run once more; False once the verdict
        is in (the results are then set)."""
        light = False
        if self._calls <= self.warmup:
            # A snapshot is next: the one before the last warm-up run (the
            # engine reads that run too), or the measured runs' first.
            if self._calls >= self.warmup - 1:
                self._others = _other_threads(self._others)
                # The two around the last warm-up run settle lightly
                # (_settle.settle_lightly_next); rebase() does not.
                light = self.warmup > 0
            self._calls += 1
        # A series' warm-up absorbs the ABC caches' first fills: its
        # snapshots leave them (_settle.keep_abc_caches_next), unless it
        # has no warm-up run.
        _settle.keep_abc_caches_next(self.warmup > 0)
        _settle.settle_lightly_next(light)
        try:
            more = self._core.next()
        finally:
            _settle.settle_lightly_next(False)
            _settle.keep_abc_caches_next(False)
        if more:
            return True
        if not self.done:
            self._finish()
        return False

    def rebase(self) -> None:
        """Reads again the snapshot the next measured run is compared with
        (settled and collected, as every snapshot).  Only between two
        measured runs: after next() returned True past the warm-up runs,
        else RuntimeError.  On a debug build the refs probe also reads the
        references the calling frames hold: CPython 3.14 may hold one more
        at one call than at another, so a loop that rebases calls both
        from one place (`(s.next, s.rebase)[again]()`)."""
        # The frame holds what next()'s holds when it reads past the
        # warm-up: its flag `light`, False.  The refs probe reads every
        # reference, the calling frames' too, and up to 3.11 False is an
        # object like any other (3.12 made it immortal, uncounted): without
        # it, the first measured run read refs +1 against this snapshot,
        # and every test that ran again on a debug build ran twice more.
        light = False
        _settle.keep_abc_caches_next(self.warmup > 0)
        try:
            self._core.rebase()
        finally:
            _settle.keep_abc_caches_next(light)

    @property
    def confirming(self) -> bool:
        """Whether the runs now are those that confirm a verdict (a leak
        of probes that count bytes alone is confirmed over more runs)."""
        return bool(self._core.confirming()) and not self.done

    def _finish(self):
        core = self._core
        self.done = True
        self.probes = names_of(core.probes())
        # The deltas and thresholds of every probe in one call (this runs
        # once a test in the plugin); the confirming runs read the probes
        # they confirm only.
        self.deltas, self.thresholds = core.results(PROBE_NAMES)
        self.leaking = names_of(core.leaking())
        self.leaked = bool(self.leaking)
        self.runs = core.runs()
        self.main_runs = core.main_runs()
        self.warmup_measured = measured = core.warmup_measured()
        if not measured:
            self.warmup_growth = _warmup_growth(core, self.probes)
        self.unread = unread(self._asked, self.probes,
                             _core.hook_restored() - self._restores)
        self.threads = _still_running(self._others)

    def report(self, diagnosis: Optional["Diagnosis"] = None) -> str:
        """The readable report, with `diagnosis` (a Diagnosis) appended."""
        return _compose(self._core.report(), self.unread, diagnosis,
                        self.threads)

    def __repr__(self) -> str:
        state = ("running" if not self.done else
                 f"leaked: {', '.join(self.leaking)}" if self.leaked
                 else "clean")
        return f"<leakcheck.Series {self.name!r} {state}, {self.runs} runs>"


def _warmup_growth(core, probes):
    """{name: delta} of `probes` that the last warm-up run moved, as the
    engine read it; {} when it did not read that run."""
    growth = {}
    for name in probes:
        delta = core.warmup_delta(index_of(name))
        if delta:
            growth[name] = delta
    return growth


def repeat(func: Callable[..., object], *args: Any, warmup: int = 1,
           repeat: int = 4, probes: ProbeNames = None,
           tolerance: Tolerance = None, thorough: bool = False,
           **kwargs: Any) -> Series:
    """Runs ``func(*args, **kwargs)`` as a Series: `warmup` runs, then up
    to `repeat` measured runs.  On a leak, re-runs it under diagnose() and
    raises LeakError with the report; otherwise returns the finished
    Series."""
    if not callable(func):
        raise TypeError(f"repeat() needs a callable, not "
                        f"{type(func).__name__}")
    series = Series(warmup=warmup, repeat=repeat, probes=probes,
                    tolerance=tolerance, thorough=thorough,
                    name=getattr(func, "__qualname__", None) or repr(func))
    series._core.set_location(*_outside_caller())
    while series.next():
        func(*args, **kwargs)
    if series.leaked:
        from ._diagnose import diagnose
        diagnosis = diagnose(functools.partial(func, *args, **kwargs),
                             series.leaking)
        raise LeakError(series.report(diagnosis), diagnosis)
    return series


# What runs for the first time between a scope's two snapshots.
for _func in (scope._exit, scope._correction, await_threads, thread_count):
    cpython.make_frames(_func)
del _func
