"""leakcheck makes leaks a test failure.

A C engine (leakcheck._core) reads numbers about the process -- reference
counts, pymalloc blocks, bytes and allocations through CPython's
allocators, GC-tracked objects, uncollectable garbage, file descriptors,
threads -- after settling the interpreter and a full collection, and
decides whether something grew.  This package names those probes, checks
arguments, and, when a check fails, says what leaked and where::

    import leakcheck

    with leakcheck.scope():                 # one delta: growth fails
        code_under_test()

    leakcheck.repeat(code_under_test)       # warm-up, then every run grows?

    handle = leakcheck.watch(obj)
    del obj
    leakcheck.assert_finalized(handle)      # else: the chain that holds it

Failures raise LeakError (an AssertionError) whose message is the report.
"""

import atexit as _atexit

from . import _core, _settle
from ._errors import LeakError
from ._objects import (Handle, assert_finalized, assert_no_garbage,
                       refcounts, watch)
from ._probes import (DEFAULT_PROBES, MAX_RUNS, MAX_TOLERANCE, PROBE_NAMES,
                      ProbeInfo, Snapshot, allocated_blocks, await_threads,
                      probes, snapshot, thread_count, unsupported)
from ._verdicts import Series, repeat, scope
from .report import load_dump, write_report

# At the interpreter's exit, this callback runs after those registered
# after it (atexit runs the last registered first: a report written at
# exit among them), and no snapshot follows: the allocator hook comes off
# the domains the interpreter's teardown frees its objects through, which
# would all go through it, counted for nobody.
_atexit.register(_core.release_hook)

__version__ = _core.VERSION

__all__ = [
    "LeakError",
    "ProbeInfo",
    "Snapshot",
    "Series",
    "Diagnosis",
    "Handle",
    "PROBE_NAMES",
    "DEFAULT_PROBES",
    "MAX_RUNS",
    "MAX_TOLERANCE",
    "probes",
    "snapshot",
    "allocated_blocks",
    "thread_count",
    "await_threads",
    "unsupported",
    "scope",
    "repeat",
    "diagnose",
    "refcounts",
    "watch",
    "assert_finalized",
    "assert_no_garbage",
    "write_report",
    "write_dump",
    "load_dump",
]

# What diagnoses a leak, and writes a dump of it, is imported when first
# asked for: a pytest session with the plugin installed imports leakcheck,
# and most never diagnose anything.
_LAZY = {"Diagnosis": "_diagnose", "diagnose": "_diagnose",
         "write_dump": "_dump"}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'leakcheck' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


# Every snapshot from now on starts by clearing first-use caches (the
# engine holds the function weakly: its module keeps it).
_core.set_settle(_settle.settle)
