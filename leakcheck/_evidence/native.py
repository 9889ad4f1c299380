"""Evidence from the C heap: the C lines where the memory that survived the
runs was allocated, found with memray (the optional extra
``leakcheck[native]``): Diagnosis.native and Diagnosis.capture.

memray's tracker sees every allocation, malloc() and CPython's allocators
alike, with a hybrid stack: the native frames, symbolized by memray, with
the Python frames in their place.  What it calls leaked is what was not
freed when tracking stopped, which includes what a run replaces every
time (the last copy) and what a first use fills once.  So the code runs
`k` times (at least 2) under a tracker, then once under another: a site
grows per run by (k runs - one run) / (k - 1), and only sites that
leaked under the one run and grew by a block per run under the `k` are
kept.  The one run is made only when a site kept at least `k` blocks
under the `k` runs: none else can grow by a block a run (growth the
Python probes saw, made by Python code, has no site).  A cheap diagnosis
(memray only when the C heap alone grew) never makes it, and keeps the
sites that left at least a block in each of the `k` runs.

A site is named by the first frame of the user's C code from the
allocation outwards: frames of memray, of the allocator and of CPython
itself are skipped, and an allocation made by Python code (a Python
frame before any such C frame) is tracemalloc's to explain, not this.
Its Python caller is the innermost Python frame outside leakcheck; a
site whose caller belongs to a harness is the harness's.
"""

import logging
import mmap
import os
import shutil
import sys
import tempfile
import tracemalloc

from .._settle import settle_and_collect
from . import TOP, Evidence
from .frames import charged_frame, ignored, owned_elsewhere
from .heaplines import heap_lines

__all__ = ["NativeAllocations"]

HOW_TO_GET = "pip install 'leakcheck[native]'"
NOTE_NO_MEMRAY = ("no C lines: memray is not installed ({reason}); "
                  f"{HOW_TO_GET} gives the C line of each leak")
NOTE_REFUSED = ("no C lines: memray would not start ({reason}); the C line "
                "of each leak needs memray's tracker to itself")
NOTE_UNREADABLE = "no C lines: memray's capture could not be read ({reason})"
NOTE_NO_DEBUG_INFO = ("{objects} {verb} no debug information: built with -g, "
                      "the C lines show with the functions")
NOTE_CHEAP = ("no C lines: a cheap diagnosis runs memray only when the C "
              "heap alone grew (native_bytes); the lines above say which "
              "Python code made what grew, a full diagnosis also which C "
              "line")
NOTE_NONE_FOUND = ("memray saw no allocation from C code that survived every "
                   "re-run")
NOTE_VIA_POINTER = (
    "memray saw no allocation from C code that survived every re-run: "
    "memory allocated through a function pointer from dlsym() (ctypes, "
    "cffi) bypasses its hooks; the Python lines that made the calls are "
    "given")
NOTE_TRACEMALLOC = (
    "what survived in the C heap includes CPython's tracemalloc's own memory "
    "(the code runs tracemalloc): on CPython 3.10 to 3.12 tracemalloc.stop() "
    "keeps the tracebacks it interned, so code that starts and stops it "
    "grows by them in every run (about 2 KB per start and stop measured on "
    "3.11): the interpreter's growth, not the code's")
NOTE_TEST_TRACES = (
    "no C lines: tracemalloc was tracing when the diagnosis began (the "
    "code's own), and memray's first start in this process would leave "
    "the modules it imports among what tracemalloc traces; a process that "
    "diagnoses a leak before any test starts tracemalloc gets them")

# CPython's tracemalloc, in the C stacks memray gives: Modules/_tracemalloc.c
# up to 3.11, Python/tracemalloc.c since 3.12.
_TRACEMALLOC_SOURCES = ("_tracemalloc.c", "tracemalloc.c")
# The key of the sites where tracemalloc itself allocated (see _site).
_TRACEMALLOC = "tracemalloc"
# memray has run in this process: the modules its tracker imports are
# imported, and its next start allocates nothing that outlives it.
_memray_used = False


class NativeAllocations(Evidence):
    """Re-runs the code under memray's tracker (runs of its own: its hooks
    would distort the other kinds' counts) and names the C sites that
    leaked in every run."""

    probes = frozenset({"refs", "blocks", "py_allocs", "py_bytes",
                        "objects", "native_bytes"})
    shared = False

    @classmethod
    def wanted(cls, request):
        """Cheap (request.cheap): only for growth of the C heap alone,
        which nothing but memray (or the heap's line tracer) explains;
        growth the Python probes see has its Python lines and types."""
        if request.cheap:
            return request.leaking & cls.probes == {"native_bytes"}
        return super().wanted(request)

    @classmethod
    def skipped(cls, request):
        """The note of a cheap diagnosis that left out C lines it could
        have looked for, or None."""
        if request.leaking & cls.probes and not cls.wanted(request):
            return NOTE_CHEAP
        return None

    def __init__(self, request):
        super().__init__(request)
        self.sites = None       # None: memray did not run
        self.capture = None
        self.note = None
        self.tracemalloc = False    # tracemalloc's own memory outlived it
        self.lines = []             # heap_lines(), when memray named none
        self.traced = False         # memray's or the line tracer's runs
        self.line_note = None

    def own_runs(self, run):
        failure = self._memray_runs(run)
        if (failure is None and not self.sites and not self.tracemalloc
                and "native_bytes" in self.request.leaking
                and not tracemalloc.is_tracing()):
            # memray saw no C frame of it (a call through ctypes or cffi),
            # or did not run: the Python lines, from the heap itself
            # (a cheap diagnosis traces one run: a line charged in it).
            runs = (self.request.runs if self.request.cheap
                    else max(2, self.request.runs))
            self.traced = True
            self.lines, self.line_note, failure = heap_lines(
                run, runs, ignored(self.request.ignore))
        return failure

    def _memray_runs(self, run):
        global _memray_used
        if tracemalloc.is_tracing() and not _memray_used:
            self.note = NOTE_TEST_TRACES
            return None
        try:
            import memray
        except ImportError as e:
            self.note = NOTE_NO_MEMRAY.format(reason=_why_not(e))
            return None
        runs = max(2, self.request.runs)
        folder = tempfile.mkdtemp(prefix="leakcheck-memray-")
        one, more = (os.path.join(folder, name)
                     for name in ("one-run.bin", f"{runs}-runs.bin"))
        memray.set_log_level(logging.ERROR)     # its symbol warnings
        try:
            try:
                _memray_used = True
                self.traced = True
                python = _python_allocators(self.request.leaking)
                failure = _track(memray, more, run, runs, python)
                last = None
                if failure is None:
                    ignore = ignored(self.request.ignore)
                    last = _sites(memray, more, ignore)
                # A full diagnosis compares with a run under a tracker of
                # its own, when a site kept a block a run (none can grow
                # by one else): one tracker start, run and capture less
                # for growth no C line of the user's made.  A cheap one
                # never does.
                first = None
                if (failure is None and not self.request.cheap
                        and _candidates(last, runs)):
                    failure = _track(memray, one, run, 1, python)
                    if failure is None:
                        first = _sites(memray, one, ignore)
            except _Unreadable as e:
                self.note = NOTE_UNREADABLE.format(reason=_reason(e.error))
                return None
            except Exception as e:
                self.note = NOTE_REFUSED.format(reason=_reason(e))
                return None
            if failure is not None:
                return failure
            self.tracemalloc = _tracemalloc_kept(last)
            self.sites = _per_run(first, last, runs)
            self.capture = _keep(more, self.request.capture_dir)
            return None
        finally:
            memray.set_log_level(logging.WARNING)
            shutil.rmtree(folder, ignore_errors=True)

    def fill(self, diagnosis):
        diagnosis.capture = self.capture
        diagnosis.heap_lines = self.lines
        if self.note:
            diagnosis.notes.append(self.note)
        if self.line_note:
            diagnosis.notes.append(self.line_note)
        if self.sites is None:
            return
        diagnosis.native = self.sites
        bare = sorted({os.path.basename(path) for site in self.sites
                       if not site["line"] for path in site["objects"]}
                      or {f"{site['function']}()" for site in self.sites
                          if not site["line"]})
        if bare:
            diagnosis.notes.append(NOTE_NO_DEBUG_INFO.format(
                objects=", ".join(bare),
                verb="has" if len(bare) == 1 else "have"))
        if self.tracemalloc:
            diagnosis.notes.append(NOTE_TRACEMALLOC)
        elif (not self.sites and "native_bytes" in self.request.leaking
                and not diagnosis.allocations):
            diagnosis.notes.append(NOTE_VIA_POINTER if self.lines
                                   else NOTE_NONE_FOUND)


def _why_not(error):
    return str(error) if getattr(error, "name", None) != "memray" \
        else "import memray failed"


def _reason(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text \
        else type(error).__name__


def _python_allocators(leaking):
    """Whether memray must see CPython's own allocators (pymalloc's small
    blocks): when a probe of them leaked.  Growth of the C heap alone
    (native_bytes) is made with malloc() and its kin, which memray hooks
    anyway; leaving pymalloc's hooks out spares a native stack per
    Python allocation in the tracked runs, and the records to read."""
    return bool(leaking & (NativeAllocations.probes - {"native_bytes"}))


def _track(memray, path, run, count, python=True):
    """Runs the code `count` times under a tracker writing to `path`, then
    settles and collects inside it, so that what only waited for a
    collection is freed before tracking stops.

    Each run follows a full collection, which also empties CPython's free
    lists (dicts, lists, tuples, floats...): an object the code takes from
    a free list is one memray never sees allocated (it was, before
    tracking began, by someone else), so a dict leaked by C code would
    have no line; taken fresh, its PyDict_New() has one.  `python`:
    whether memray traces CPython's allocators too."""
    settle_and_collect(quiet_callbacks=True)
    failure = None
    with memray.Tracker(path, native_traces=True,
                        trace_python_allocators=python, follow_fork=False,
                        **_aggregated(memray)):
        for _ in range(count):
            settle_and_collect(quiet_callbacks=True)
            failure = run(1)
            if failure is not None:
                break
        settle_and_collect(quiet_callbacks=True)
    return failure


# memray writes its capture aggregated (one record per stack that is still
# alive, not one per allocation and free): less to write and to read
# (`memray flamegraph --leaks` reads it as well).
def _aggregated(memray):
    file_format = getattr(memray, "FileFormat", None)
    aggregated = getattr(file_format, "AGGREGATED_ALLOCATIONS", None)
    return {} if aggregated is None else {"file_format": aggregated}


def _keep(path, folder):
    """Moves the capture into `folder` (when given); its new path, or None."""
    if folder is None:
        return None
    folder = os.path.abspath(os.fspath(folder))
    os.makedirs(folder, exist_ok=True)
    fd, kept = tempfile.mkstemp(prefix="leakcheck-", suffix=".bin",
                                dir=folder)
    os.close(fd)
    shutil.move(path, kept)
    return kept


# ---- reading a capture ---------------------------------------------------

class _Unreadable(Exception):
    """A capture memray could not read: `error` says why."""

    def __init__(self, error):
        super().__init__(error)
        self.error = error


def _candidates(sites, runs):
    """Whether a site of `sites` (a capture of `runs` runs) kept at least a
    block a run: only such a site can have grown by one (_per_run)."""
    return any(count >= runs and not (site["function"] == _TRACEMALLOC
                                      and site["file"] is None)
               for _, count, site in sites.values())


def _sites(memray, path, ignore):
    """{site key: [bytes, blocks, site]} of what `path` says leaked, for
    the allocations made by the user's C code; _Unreadable when memray
    cannot read it."""
    try:
        return _read_sites(memray, path, ignore)
    except Exception as e:
        raise _Unreadable(e) from None


def _read_sites(memray, path, ignore):
    sites = {}
    with memray.FileReader(path) as reader:
        for record in reader.get_leaked_allocation_records(
                merge_threads=True):
            site = _site(_stack(record), ignore)
            if site is None:
                continue
            key = (site["file"], site["line"], site["function"],
                   tuple(sorted((site["caller"] or {}).items())))
            entry = sites.get(key)
            if entry is None:
                sites[key] = [record.size, record.n_allocations, site]
            else:
                entry[0] += record.size
                entry[1] += record.n_allocations
    return sites


def _tracemalloc_kept(more):
    """True when tracemalloc's own allocations (see _site) outlived the
    tracker.  Said apart, not as a site with its growth per run: its
    tables are resized and cleared by stop(), so its surviving blocks do
    not keep to runs."""
    return (None, None, _TRACEMALLOC, ()) in more


def _stack(record):
    """The allocation's frames, innermost first, as (function, file, line,
    is_python): C frames, then the Python ones that called them.  A frame
    is C when the native stack holds it (a Python frame's file can have
    any name: a console script has no .py).  memray interleaves the two
    by finding the interpreter's evaluation frames among the C ones,
    which it cannot in an interpreter without symbols for them (Debian's
    3.14 and 3.15): its hybrid stack then holds the Python frames alone.
    The C frames are then the whole native stack, ahead of the Python
    ones; the first of the user's among them is the site (a C function
    that calls back into Python which allocates is charged with that
    allocation there)."""
    hybrid = record.hybrid_stack_trace()
    native = record.native_stack_trace()
    c_frames = set(native)
    if c_frames.isdisjoint(hybrid):
        return ([(*frame, False) for frame in native]
                + [(*frame, True) for frame in hybrid])
    return [(*frame, frame not in c_frames) for frame in hybrid]


def _per_run(one, more, runs):
    """The sites that leaked under one run and grew by at least a block
    per run under `runs`, with their bytes and blocks per run, most
    bytes first.  With `one` None (a cheap diagnosis: no capture of one
    run), the sites that kept at least a block per run under `runs`,
    what they kept divided by `runs`: what a run replaces (one copy left)
    is still left out, what a run adds to a copy kept from before is not
    told apart."""
    result = []
    for key, (size, count, site) in more.items():
        if site["function"] == _TRACEMALLOC and site["file"] is None:
            continue
        if one is None:
            size_one, count_one, compared = 0, 0, runs
            if count < runs:
                continue
        else:
            size_one, count_one, _ = one.get(key, (0, 0, None))
            compared = runs - 1
            if count_one < 1 or count - count_one < compared:
                continue
        site = dict(site, bytes=(size - size_one) // compared,
                    blocks=(count - count_one) // compared)
        site["objects"] = _object_files(site["function"], site["file"])
        result.append(site)
    result.sort(key=lambda s: (-s["bytes"], -s["blocks"], s["file"],
                               s["line"]))
    return result[:TOP]


# Folders of CPython's source tree, as its frames name them (relative to
# the build folder: "Objects/obmalloc.c", "../Python/ceval.c").  An
# extension whose own sources sit in such a folder and are compiled with
# relative paths would read as CPython's.
_CPYTHON_TREE = ("Objects/", "Python/", "Include/", "Modules/", "Parser/",
                 "Programs/")
# Where the C library starts a process or a thread: the outermost native
# frames, never the user's (a stack with no symbols for CPython has no
# other frame of its own to stop at before them).
_ENTRY_POINTS = frozenset({"_start", "main", "start_thread", "clone",
                           "clone3", "__clone3"})
_ALLOCATORS = frozenset({"malloc", "calloc", "realloc", "free",
                         "reallocarray", "posix_memalign", "aligned_alloc",
                         "memalign", "valloc", "pvalloc", "strdup",
                         "strndup", "__strdup", "__strndup", "wcsdup",
                         "asprintf", "vasprintf", "__asprintf",
                         "__vasprintf_internal", "__vasprintf",
                         "open_memstream", "getline", "getdelim",
                         "realpath", "canonicalize_file_name"})
# The C and C++ runtimes' helpers that allocate for their caller: their
# frames are skipped to the caller's, with or without debug information
# for the runtime.  glibc's internal aliases (__GI___strdup), its
# sources as its debug information names them ("./string/strdup.c",
# "../sysdeps/...", "/build/glibc-2.36/..."), libstdc++'s and libgcc's.
_RUNTIME_PREFIXES = ("__GI_", "__libc_", "__GI___libc", "_IO_", "__vasprintf",
                     "operator new", "operator delete", "__cxa_",
                     "_Znw", "_Zna", "__gnu_cxx::", "std::") + (
    # The foreign-function machinery that calls a C function for Python
    # code (libffi, ctypes, cffi): a block it allocates for that call
    # (ctypes.CDLL(None).malloc(n), where memray sees it) was the Python
    # line's doing, not the machinery's.
    "ffi_", "_ctypes_", "_call_function_pointer", "PyCFuncPtr_",
    "_cffi_", "cdata_call")
_GLIBC_TOP = frozenset({
    "string", "malloc", "libio", "stdio-common", "sysdeps", "misc", "stdlib",
    "posix", "nptl", "elf", "io", "iconv", "intl", "locale", "wcsmbs",
    "time", "dirent", "resolv", "inet", "nss", "argp", "csu", "dlfcn",
    "login", "pwd", "grp", "shadow", "signal", "setjmp", "termios"})
_RUNTIME_SOURCES = ("glibc-", "libstdc++-v3/", "libsupc++/", "libgcc/",
                    "gcc/libgcc", "/glibc/")
_RUNTIME_OBJECTS = ("libc.so.6", "libstdc++.so.6", "libgcc_s.so.1")


def _memrays(path):
    """Whether a file is memray's own: a folder of that name on its path
    (its package, its sources), not any path that mentions it (a test
    named test_without_memray_... built the user's extension there)."""
    return "memray" in path.split("/") or \
        os.path.basename(path).startswith(("_memray", "libmemray"))


def _theirs(function, filename):
    """True for a native frame of memray, of the allocator, of the C or
    C++ runtime or of CPython itself."""
    if _memrays(filename) or function.startswith("memray::"):
        return True
    if _runtimes(function, filename):
        return True
    name = filename
    while name.startswith(("./", "../")):
        name = name.split("/", 1)[1]
    if name.startswith(_CPYTHON_TREE):
        return True
    if filename in ("", "<unknown>") or not os.path.isabs(filename):
        # No debug information: known by name only.
        return (function.startswith(("Py", "_Py", "_dl_"))
                or function in _ENTRY_POINTS
                or function in ("", "<unknown>")
                or (filename in ("", "<unknown>")
                    and _runtime_symbol(function)))
    return False


def _runtimes(function, filename):
    """True for a frame of the C library's or the C++ runtime's helpers
    (strdup, asprintf, operator new...), known by its name or by the
    source path their debug information gives."""
    if function in _ALLOCATORS or function.startswith(_RUNTIME_PREFIXES):
        return True
    if not filename or filename == "<unknown>":
        return False
    if any(part in filename for part in _RUNTIME_SOURCES):
        return True
    if filename.startswith(("./", "../")):
        # glibc's debug information names its sources relative to its
        # source tree: "./string/strdup.c", "../sysdeps/x86_64/...".
        name = filename
        while name.startswith(("./", "../")):
            name = name.split("/", 1)[1]
        return name.split("/", 1)[0] in _GLIBC_TOP
    return False


_runtime_symbols = {}


def _runtime_symbol(function):
    """True when `function` names a symbol of the C library, libstdc++ or
    libgcc as loaded in this process (a frame without debug information:
    its object is not given, its name is)."""
    if function not in _runtime_symbols:
        import ctypes
        found = False
        for name in _RUNTIME_OBJECTS:
            try:
                lib = ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
            except OSError:
                continue            # not loaded here
            try:
                getattr(lib, function)
            except (AttributeError, ValueError):
                continue
            found = True
            break
        _runtime_symbols[function] = found
    return _runtime_symbols[function]


def _site(stack, ignore):
    """The site of an allocation from its hybrid stack (innermost first),
    or None when no C code of the user's made it, or a harness did."""
    user = None
    via = None                    # what the user's frame called
    python = []                   # the Python frames outwards, innermost first
    for function, filename, lineno, is_python in stack:
        if user is None and os.path.basename(filename) in _TRACEMALLOC_SOURCES:
            # tracemalloc's own bookkeeping, whoever started it.
            return {"file": None, "line": None, "function": _TRACEMALLOC,
                    "caller": None, "via": None}
        if is_python:
            if user is None:
                return None       # Python code allocated it
            python.append((filename, lineno, function))
        elif user is None and not _theirs(function, filename):
            user = (function, filename, lineno)
        elif user is None:
            via = function
    if user is None:
        return None
    caller = None
    if python:
        frames = [(f, n) for f, n, _ in reversed(python)]   # oldest first
        i = charged_frame(frames)
        if i is None or owned_elsewhere(frames, i, ignore):
            return None
        filename, lineno, function = python[len(python) - 1 - i]
        caller = {"file": filename, "line": lineno, "function": function}
    function, filename, lineno = user
    debug = filename not in ("", "<unknown>") and lineno > 0
    return {"file": filename if debug else None,
            "line": lineno if debug else None,
            "function": function, "caller": caller,
            "via": _api(via)}


def _api(function):
    """`function` when it is a function of CPython's C API or of the C
    library (PyDict_New, PyUnicode_FromFormat, strdup; glibc's internal
    alias __GI___strdup read as strdup): what the user's code called to
    allocate, which names what it made.  None for CPython's internal
    functions (new_dict, gc_alloc), which do not."""
    if not function:
        return None
    if function.startswith("__GI_"):
        function = function[len("__GI_"):].lstrip("_")
    if function.startswith(("Py", "_Py")) or function in _ALLOCATORS \
            or _runtime_symbol(function):
        return function
    return None


# ---- the object file of a function ----------------------------------------
#
# memray names a frame's function, file and line, not the shared object
# it is in.  The object is found among those mapped into the process: the
# one whose symbol names hold the function's and, with debug information,
# whose file names hold the source's; without, one that has no debug
# information (memray would have found a line in one that has).  Several
# can still match (two builds of one extension loaded at once): all are
# named.

_found = {}


def _object_files(function, source):
    key = (function, source)
    if key not in _found:
        needles = [b"\0" + function.encode() + b"\0"]
        if source:
            needles.append(os.path.basename(source).encode() + b"\0")
        found = [path for path in _mapped_objects()
                 if _holds(path, needles)]
        if not source:
            found = ([path for path in found
                      if not _holds(path, [b".debug_line\0"])] or found)
        _found[key] = found
    return list(_found[key])


def _holds(path, needles):
    try:
        with open(path, "rb") as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return all(data.find(needle) != -1 for needle in needles)
    except (OSError, ValueError):
        return False


def _mapped_objects():
    """The files mapped executable into this process, in map order, but
    the interpreter's, the C library's and memray's."""
    interpreter = {os.path.realpath(sys.executable)}
    seen, paths = set(), []
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5]
        if not path.startswith("/") or path in seen:
            continue
        seen.add(path)
        base = os.path.basename(path)
        if (path in interpreter or _memrays(path)
                or base.startswith(("libpython", "libc.", "libc-", "ld-",
                                    "libm.", "libpthread", "libstdc++",
                                    "libgcc_s", "libunwind", "liblz4",
                                    "libdebuginfod"))
                or base.startswith("_core.")):
            continue
        paths.append(path)
    return paths
