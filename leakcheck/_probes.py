"""Probes by name, snapshots, and the checks of the arguments that name
probes and tolerances: every public entry point validates through here, so
a bad value gets the same clear message wherever it came from."""

import operator
import sys
import sysconfig
import time
from collections.abc import Mapping
from typing import (Iterable, Literal, NamedTuple, Optional, Tuple, Union,
                    overload)

from . import _core, cpython

__all__ = ["ProbeInfo", "PROBE_NAMES", "DEFAULT_PROBES", "Snapshot",
           "probes", "snapshot", "unsupported", "allocated_blocks",
           "thread_count", "await_threads"]

# How the public API takes probes: names, as an iterable or one
# comma-separated string; None for DEFAULT_PROBES.
ProbeNames = Union[str, Iterable[str], None]
# And tolerances: one for every probe, or {probe name: tolerance}.
Tolerance = Union[int, Mapping[str, int], None]


class ProbeInfo(NamedTuple):
    """What a probe reads, and whether it can be read in this process."""

    name: str
    unit: str
    doc: str
    available: bool
    reason: Optional[str]   # why not, when it is not available
    tolerance: int          # default scope noise floor: growth up to it is clean
    threshold: int          # default series threshold: a run leaks from it on


PROBE_NAMES = tuple(_core.probe_info(i)[0] for i in range(_core.PROBE_COUNT))
_INDEX = {name: i for i, name in enumerate(PROBE_NAMES)}

# The probes used when none are named.  Chosen by measurement (see
# tests/python/api/test_clean.py, which runs clean code under them many
# times, and the plugin's clean suites): the Python probes, the native heap,
# fds and threads.  native_bytes is there because a forgotten free() is the
# commonest leak in C code and no Python probe sees it; the engine leaves
# glibc's per-thread cache out of its reading (c_api/src/heap.c), and a
# series needs growth in every run, so what glibc grows once (a thread's
# arena, a stdio buffer) is no verdict.  valgrind is left out because a
# leak check per snapshot costs seconds.  Probes that cannot be read here
# (refs on a release build, native_bytes when malloc is not glibc's) are
# skipped when reading.
#
# py_bytes reads the size of every block it sees freed or resized, those
# allocated before leakcheck's allocator hook too (c_api/src/pyhook.c), so
# a block freed and replaced by one of the same size moves it by nothing.
# That holds under CPython's own allocators (pymalloc, malloc, and their
# debug hooks); when another hook sat there first (tracemalloc started
# before leakcheck's first snapshot) it keeps a table of the blocks it saw
# born, and such a replacement can read as growth once.
#
# Not on 3.9 and 3.10, where each code object keeps the frame of its last
# call for the next one, and recursion swaps that frame for one from the
# frame freelist, which can be larger than it needs: the frame kept then
# changes size with no allocation counted, and a single delta around
# recursive code (argparse, strptime) reads py_bytes +100 to +300 or so,
# deterministically.  A series never sees that grow every run; there it is
# asked for by name.
DEFAULT_PROBES: Tuple[str, ...] = ("refs", "blocks", "py_bytes", "py_allocs", "objects",
                  "garbage", "native_bytes", "fds", "threads")
if not cpython.PY_BYTES_BY_DEFAULT:
    DEFAULT_PROBES = tuple(p for p in DEFAULT_PROBES if p != "py_bytes")

Snapshot = _core.Snapshot
Mapping.register(Snapshot)

# Why a free-threaded build is refused (the engine's Python probes say so
# too, c_api/src/python.c, where what each probe would mean there is set
# out): untested, and no probe would read what it reads elsewhere.
FREE_THREADED = ("leakcheck: free-threaded CPython (Py_GIL_DISABLED) is not "
                 "supported yet; nothing is measured or judged")


def unsupported() -> Optional[str]:
    """Why leakcheck cannot judge in this interpreter, in one line, or
    None when it can."""
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        return FREE_THREADED
    return None


def probes() -> list[ProbeInfo]:
    """Every probe, available here or not, with the reason when not."""
    return [ProbeInfo(*_core.probe_info(i)) for i in range(len(PROBE_NAMES))]


def snapshot(probes: ProbeNames = None) -> Snapshot:
    """Reads the probes now (``probes``: names, as a sequence or a
    comma-separated string; default DEFAULT_PROBES), after settling the
    interpreter and a full collection.  Returns a Snapshot, a read-only
    mapping of probe name to reading holding the probes that could be read;
    ``later - earlier`` is a dict of deltas.  A Snapshot does not count
    itself: two taken back to back differ by nothing."""
    return Snapshot(_DEFAULT_MASK if probes is None else probe_mask(probes))


@overload
def allocated_blocks(walk: Literal[True] = ...) -> int: ...
@overload
def allocated_blocks(walk: bool) -> Optional[int]: ...


def allocated_blocks(walk: bool = True) -> Optional[int]:
    """What sys.getallocatedblocks() says now, without settling or
    collecting, and without its walk of every pool pymalloc has where
    leakcheck's allocator hook counts pymalloc's blocks (from the first
    snapshot that reads the blocks, py_bytes or py_allocs on): O(1), where
    the walk grows with the heap (about 50 ms a call in a CPython 3.13
    process holding 5M objects).  Elsewhere the pools are walked, or, with
    `walk` false, None is returned."""
    try:
        return _core.allocated_blocks(walk)
    except RuntimeError:
        return sys.getallocatedblocks() if walk else None


def thread_count() -> int:
    """The threads of this process, as the `threads` probe reads them (one
    stat() of /proc/self/task); 0 where that cannot be read."""
    try:
        return _core.threads()
    except OSError:
        return 0


def await_threads(count: int, timeout: float = 0.2) -> bool:
    """Waits up to `timeout` seconds for the process to be back to `count`
    threads (thread_count() before starting them); whether it is.  A
    thread that join() waited for still frees its thread state, and
    leaves the process, a moment after join() returns: a snapshot taken
    before reads what it frees as held, and the thread as live."""
    deadline = time.monotonic() + timeout
    while thread_count() > count:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


def _valid_list():
    return ", ".join(PROBE_NAMES)


def probe_names(probes, argname="probes"):
    """The probe names `probes` asks for, in probe order: None means
    DEFAULT_PROBES; a string is one name or a comma-separated list.
    ValueError names the argument and lists the valid probes."""
    if probes is None:
        return DEFAULT_PROBES
    if type(probes) in (list, tuple):
        # The pytest plugin asks with the same list before every test.
        try:
            return _NAMES_OF[tuple(probes)]
        except (KeyError, TypeError):
            pass
    if isinstance(probes, str):
        names = [name.strip() for name in probes.split(",") if name.strip()]
    else:
        try:
            names = list(probes)
        except TypeError:
            raise TypeError(f"{argname} must be probe names (a sequence or a "
                            f"comma-separated string), not "
                            f"{type(probes).__name__}") from None
    if not names:
        raise ValueError(f"{argname} names no probe; valid probes: "
                         f"{_valid_list()}")
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"{argname} must hold probe names (str), not "
                            f"{type(name).__name__}")
        if name not in _INDEX:
            raise ValueError(f"unknown probe {name!r} in {argname}; valid "
                             f"probes: {_valid_list()}")
    found = tuple(name for name in PROBE_NAMES if name in names)
    if type(probes) in (list, tuple) and len(_NAMES_OF) < 64:
        _NAMES_OF[tuple(probes)] = found
    return found


# {the probe names asked for, as a tuple: probe_names() of them}: valid
# lists only.
_NAMES_OF = {}
_MASK_OF = {}       # {probe_names() of some probes: their mask}


def probe_mask(probes, argname="probes"):
    """The engine's bit mask for `probes` (see probe_names)."""
    names = probe_names(probes, argname)
    try:
        return _MASK_OF[names]
    except KeyError:
        pass
    mask = 0
    for name in names:
        mask |= 1 << _INDEX[name]
    if len(_MASK_OF) < 64:
        _MASK_OF[names] = mask
    return mask


def readable_mask(probes, argname="probes"):
    """probe_mask(probes), refusing a set of which nothing can be read
    here: a verdict over no probe would pass whatever the code does."""
    mask = probe_mask(probes, argname)
    available = _core.probes_available()
    if mask & available == 0:
        reasons = "; ".join(f"{info.name}: {info.reason}" for info in
                            (ProbeInfo(*_core.probe_info(_INDEX[name]))
                             for name in names_of(mask)))
        raise ValueError(f"none of the probes in {argname} can be read "
                         f"here ({reasons})")
    return mask


def names_of(mask):
    """The probe names of an engine bit mask, in probe order (a new
    list)."""
    try:
        return list(_NAMES_OF_MASK[mask])
    except KeyError:
        found = tuple(name for i, name in enumerate(PROBE_NAMES)
                      if mask & (1 << i))
        if 0 <= mask < 1 << len(PROBE_NAMES):
            _NAMES_OF_MASK[mask] = found
        return list(found)


_NAMES_OF_MASK = {}     # {mask: its names}, asked for twice a test


def index_of(name):
    return _INDEX[name]


_DEFAULT_MASK = probe_mask(None)


MAX_RUNS = 10000          # warmup, repeat, diagnose runs: more is a typo, and
                          # the engine keeps a delta per probe and run
                          # (LC__MAX_REPEAT); the pytest plugin's cap too
MAX_TOLERANCE = (1 << 63) - 1   # INT64_MAX: the engine's readings, tolerances
                                # and thresholds are int64


def check_count(value, argname, minimum, maximum=None):
    """`value` as an int >= minimum (and <= maximum when given), or
    TypeError/ValueError naming it."""
    if type(value) is int and value >= minimum and \
            (maximum is None or value <= maximum):
        return value        # the common case (a Series a test, in pytest)
    if isinstance(value, bool):
        raise TypeError(f"{argname} must be an int, not bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{argname} must be an int, not "
                        f"{type(value).__name__}") from None
    if value < minimum:
        raise ValueError(f"{argname} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{argname} must be <= {maximum}, got {value}")
    return value


def tolerances(tolerance, names, argname="tolerance"):
    """{probe name: tolerance} for the probes in `names` that `tolerance`
    sets: None sets none (the engine's defaults stay), an int sets all of
    them, a dict sets those it names."""
    if tolerance is None:
        return {}
    if isinstance(tolerance, Mapping):
        result = {}
        for name, value in tolerance.items():
            if name not in _INDEX:
                raise ValueError(f"unknown probe {name!r} in {argname}; "
                                 f"valid probes: {_valid_list()}")
            result[name] = check_count(value, f"{argname}[{name!r}]", 0,
                                       MAX_TOLERANCE)
        return result
    value = check_count(tolerance, argname, 0, MAX_TOLERANCE)
    return {name: value for name in names}
