"""Whose an allocation is, from the frames that made it.

The standard library allocates on behalf of whoever calls it: a line in
os.py that stores an environment variable is not, by itself, anybody's
leak.  So the frame that decides whose an allocation is is the innermost
one outside the standard library (from the frame it is charged to
outwards): when that lies in a folder the caller said to ignore (a test
runner), or in leakcheck (its own bookkeeping), the allocation is
theirs, whatever the standard library did below it.  The same holds for
what a harness's call into diagnose() allocates with no frame of its own
(on 3.9, a block of 424 bytes charged to the plugin's line that calls
diagnose()).  The line reported stays the charged one.

Frames are (file, line) pairs, oldest first.
"""

import functools
import itertools
import os
import site
import sys
import sysconfig
import tracemalloc

from . import CALL_SITE, is_own

__all__ = ["charged_frame", "outside_frames", "owned_elsewhere",
           "ignored", "folders", "is_stdlib"]


def charged_frame(frames):
    """The index in `frames` of the frame an allocation is charged to: the
    innermost one, unless that is leakcheck's.  When leakcheck only called
    the code under diagnosis (a C function or a class, which have no frame
    of their own), the charge goes to the innermost frame outside
    leakcheck: the line that handed the code in.  None for leakcheck's own
    allocations."""
    last = len(frames) - 1
    frame = frames[last]
    if not is_own(frame[0]):
        return last
    if frame != CALL_SITE:
        return None
    for i in range(last, -1, -1):
        if not is_own(frames[i][0]):
            return i
    return None


def outside_frames(frames, start, ignore=((), ())):
    """The frames from `start` outwards, as dicts: leakcheck's and a
    harness's (`ignore`, from ignored()) left out."""
    dirs, files = ignore
    dirs += _runner_dirs()
    return [{"file": filename, "line": lineno}
            for filename, lineno in reversed(frames[:start + 1])
            if not (is_own(filename) or filename.startswith(dirs)
                    or filename in files)]


# Test runners whose frames are never the leak's, when they are loaded
# (the fixture's check() calls into leakcheck from inside pytest's).
_RUNNERS = ("_pytest", "pluggy")


def _runner_dirs():
    out = []
    for name in _RUNNERS:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if path:
            out.append(os.path.dirname(path))
    return folders(out)


def folders(paths):
    """Each path with a trailing separator, also as its real path."""
    out = set()
    for path in paths:
        if path:
            for p in (os.path.abspath(path), os.path.realpath(path)):
                out.add(os.path.join(p, ""))
    return tuple(sorted(out))


def ignored(paths):
    """`paths` (a harness's folders or files) as owned_elsewhere() takes
    them: each path as a folder and as a file (what tracemalloc's
    Filter(False, path) and Filter(False, path + "/*") match).  Worked out
    once per set of paths: a real path is a stat() per folder of it, and
    the pytest plugin passes a dozen paths to every diagnosis.  (A
    relative path is worked out each time: it depends on the working
    folder.)"""
    paths = tuple(map(os.fspath, paths))
    if all(os.path.isabs(p) for p in paths):
        return _ignored(paths)
    return _ignored.__wrapped__(paths)


@functools.lru_cache(maxsize=16)
def _ignored(paths):
    return (folders(paths),
            frozenset(itertools.chain.from_iterable(
                (os.path.abspath(p), os.path.realpath(p)) for p in paths)))


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
    return folders(paths)


_STDLIB_PATHS = {sysconfig.get_paths().get(key)
                 for key in ("stdlib", "platstdlib")} - {None}
_STDLIB = folders(_STDLIB_PATHS)
# Installed packages can live below the standard library's folder
# (lib/python3.X/site-packages of a prefix installation): they are not it,
# nor are CPython's own tests (Lib/test), which are code under test.
_SITE = _site_folders() + folders(os.path.join(path, "test")
                                  for path in _STDLIB_PATHS)
_stdlib_cache = {}


def is_stdlib(filename):
    known = _stdlib_cache.get(filename)
    if known is None:
        known = (filename.startswith("<frozen ")
                 or (filename.startswith(_STDLIB)
                     and not filename.startswith(_SITE)))
        # Not filled under tracemalloc: the code's own would keep tracing
        # the entry after a diagnosis (which leaves it as it found it).
        if len(_stdlib_cache) < 10000 and not tracemalloc.is_tracing():
            _stdlib_cache[filename] = known
    return known


def owned_elsewhere(frames, charged, ignore):
    """True when an allocation with these frames, charged to
    frames[charged], belongs to a harness (`ignore`, from ignored()) or to
    leakcheck itself, judged by the innermost frame outside the standard
    library from the charged one outwards."""
    dirs, files = ignore
    for filename, lineno in reversed(frames[:charged + 1]):
        if is_stdlib(filename):
            continue
        if filename.startswith(dirs) or filename in files:
            return True
        return is_own(filename) and (filename, lineno) != CALL_SITE
    return False        # all standard library, as far as the frames go
