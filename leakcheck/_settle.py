"""Settling: what leakcheck clears before the full collection that starts
every snapshot, so that clean code never looks leaky.

The interpreter and the standard library fill caches on first use: compiled
regular expressions, source lines, typing's generic aliases, warning
registries.  Each of those would read as growth in the scope that first
touched it.  CPython's own refleak runner clears them between runs
(Lib/test/libregrtest/utils.py, clear_caches, and refleak.py,
dash_R_cleanup); ``settle()`` clears the same, with one rule the test
runner does not need: **only caches whose clearing cannot change
what a program computes.**  So it leaves out what regrtest resets but a
program could observe: ctypes' pointer type cache (``POINTER(t)`` would stop
being the same type), mimetypes' database and urllib's opener (user
additions would be lost), doctest.master, sys.path_importer_cache.
Linecache keeps the sources that no file backs (they could not be read
again).

ABC subclass caches are left alone, on measurement: clearing them (all of
collections.abc's as regrtest does, or every ABC) and letting
isinstance(x, Mapping) refill them leaves a varying number of pymalloc
blocks behind, +1 to +20 in most runs (CPython 3.10-3.13), so a scope
around clean code that checks an ABC would fail more often than not.  Left
alone, such a cache fills once per checked type and stays: growth on first
use only, which a series' warm-up absorbs.  Likewise _strptime's format
cache: cleared together with re's, strptime() leaves two blocks behind per
call (3.11), where left alone it fills once per format.

The engine calls ``settle()`` (through ``_core.set_settle``) with the GIL
held, before its collection; freelists are the collection's business.  It
runs on every snapshot, so it is kept cheap (see bench/bench_python.py),
and allocation-neutral: it creates nothing that outlives the call.

Other threads may run Python code between its steps: every step is a
cache clear the standard library itself tolerates concurrently.  A step
that fails (a stdlib internal renamed in some version) is skipped rather
than making every snapshot fail.
"""

import sys

__all__ = ["settle"]

_DEBUG_BUILD = hasattr(sys, "gettotalrefcount")

# (module, attribute path, method): caches cleared by calling
# module.<attribute path>.<method>() when the module is imported.
_CACHE_CLEARS = (
    ("re", "", "purge"),
    ("fnmatch", "_compile_pattern", "cache_clear"),
    ("tokenize", "_compile", "cache_clear"),
    ("urllib.parse", "", "clear_cache"),
    ("struct", "", "_clearcache"),
    ("filecmp", "_cache", "clear"),
    ("gettext", "_translations", "clear"),
    ("fractions", "_hash_algorithm", "cache_clear"),
    ("inspect", "_filesbymodname", "clear"),
    ("inspect", "modulesbyfile", "clear"),
    ("inspect", "_shadowed_dict_from_weakref_mro_tuple", "cache_clear"),
)


def settle():
    """Clears the first-use caches of the interpreter and the standard
    library.  Never raises for a cache it cannot clear."""
    modules = sys.modules
    for name, path, method in _CACHE_CLEARS:
        obj = modules.get(name)
        if obj is None:
            continue
        try:
            for attr in path.split(".") if path else ():
                obj = getattr(obj, attr)
            getattr(obj, method)()
        except Exception:
            pass
    _clear_typing(modules.get("typing"))
    _clear_linecache(modules.get("linecache"))
    _clear_warning_registries(modules)
    _flush_std_streams()
    if _DEBUG_BUILD:
        # Type cache entries hold references to attribute names: with them
        # the refs probe would count what the last lookups happened to be.
        clear = getattr(sys, "_clear_internal_caches", None) or \
            sys._clear_type_cache
        clear()


def _clear_typing(typing):
    if typing is not None:
        for clear in getattr(typing, "_cleanups", ()):
            try:
                clear()
            except Exception:
                pass


def _clear_linecache(linecache):
    """Drops the lines read from files (they can be read again); keeps the
    entries no file backs (registered by exec'd or generated code)."""
    if linecache is None:
        return
    cache = getattr(linecache, "cache", None)
    if not cache:
        return
    try:
        stale = [key for key, entry in cache.items()
                 if len(entry) != 4 or entry[1] is not None]
        for key in stale:
            cache.pop(key, None)
    except Exception:
        pass


def _clear_warning_registries(modules):
    """Deletes each module's ``__warningregistry__``: warnings.warn() makes
    one, in the module the warning is attributed to, and adds an entry per
    distinct warning."""
    for module in list(modules.values()):
        namespace = getattr(module, "__dict__", None)
        if namespace is not None and "__warningregistry__" in namespace:
            namespace.pop("__warningregistry__", None)


def _flush_std_streams():
    """Text written but not flushed is held in Python objects."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except Exception:
                pass
