"""Per probe, a leak made by leakylib and its clean twin: the table every
API test walks.  Each entry's functions take the leakylib module."""

import os
import sys
from typing import Callable, NamedTuple

import leakcheck

RELEASE_BUILD = not hasattr(sys, "gettotalrefcount")
_REF_TARGET = object()


class Leak(NamedTuple):
    probe: str
    leak: Callable
    clean: Callable


def _leak_fd(leaky):
    leaky.leak_fd(os.devnull)


def _clean_fd(leaky):
    leaky.clean_fd(os.devnull)


LEAKS = [
    Leak("blocks", lambda leaky: leaky.leak_pymem(64),
         lambda leaky: leaky.clean_pymem(64)),
    Leak("py_allocs", lambda leaky: leaky.leak_rawmem(64),
         lambda leaky: leaky.clean_rawmem(64)),
    Leak("py_bytes", lambda leaky: leaky.leak_rawmem(4096),
         lambda leaky: leaky.clean_rawmem(4096)),
    Leak("objects", lambda leaky: leaky.leak_new_list(3),
         lambda leaky: leaky.clean_new_list(3)),
    Leak("garbage", lambda leaky: leaky.make_uncollectable(),
         lambda leaky: leaky.make_collectable()),
    Leak("native_bytes", lambda leaky: leaky.leak_native(256 * 1024),
         lambda leaky: leaky.clean_native(256 * 1024)),
    Leak("fds", _leak_fd, _clean_fd),
    Leak("threads", lambda leaky: leaky.leak_thread("lc-leaked"),
         lambda leaky: leaky.clean_thread("lc-joined")),
]
if not RELEASE_BUILD:
    LEAKS.append(Leak("refs", lambda leaky: leaky.leak_ref(_REF_TARGET),
                      lambda leaky: leaky.clean_ref(_REF_TARGET)))

IDS = [leak.probe for leak in LEAKS]

# The probes each leak must show up in, beyond its own.
ALSO = {"objects": {"blocks", "py_allocs"}}


def readable(probes):
    available = {p.name for p in leakcheck.probes() if p.available}
    return [p for p in probes if p in available]


def _nothing():
    pass


def warm_after_profilers():
    """CPython 3.12+ instruments a code object again on its first run after
    a profiler or tracer was set and removed (memray's tracker, in the
    diagnosis of an earlier test's leak, sets one): that first run keeps a
    block or two for good.  A series' warm-up absorbs it; a scope's single
    delta would read it.  Runs the scope machinery (with and as a
    decorator) once, over a probe that cannot leak here and, on a debug
    build, over refs with a tolerance no run reaches (its correction is
    code of its own), so that no diagnosis runs and sets a profiler
    again."""
    if sys.version_info < (3, 12):
        return
    probes = readable(["fds", "refs"])
    tolerance = {"refs": 1 << 40} if "refs" in probes else {}
    with leakcheck.scope(probes=probes, tolerance=tolerance):
        pass
    leakcheck.scope(probes=probes, tolerance=tolerance)(_nothing)()

