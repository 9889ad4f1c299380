"""The C lines of a leak: diagnose() re-runs the code under memray and
names the line of leakylib.c that allocated what survived, per run, with
its object file and the Python line that called into it; a cheap
diagnosis only when the C heap alone grew.

memray is the optional extra leakcheck[native]; ./scripts/test installs
it, and there these tests must not skip (LEAKCHECK_TESTS_NEED_MEMRAY)."""

import gc
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

import leakcheck
from leakcheck._evidence.native import NOTE_CHEAP, NOTE_NO_MEMRAY

LEAKYLIB = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "leakylib", "leakylib.c")

try:
    import memray
except ImportError:
    memray = None

if memray is None and os.environ.get("LEAKCHECK_TESTS_NEED_MEMRAY"):
    raise ImportError("memray is needed here (pip install 'leakcheck[native]')")
needs_memray = pytest.mark.skipif(memray is None,
                                  reason="memray is not installed")


def c_line(marker):
    """The line of leakylib.c whose text holds `marker`."""
    with open(LEAKYLIB) as f:
        lines = f.read().splitlines()
    hits = [i for i, text in enumerate(lines, 1) if marker in text]
    assert len(hits) >= 1, marker
    return hits


PYMEM_LINE = c_line("if ((p = PyMem_Malloc(n)) == NULL)")[0]   # leak_pymem
MALLOC_LINE = c_line("if ((p = malloc(n)) == NULL)")[0]        # leak_native
LIST_LINE = c_line("list = PyList_New(n);")[0]                  # new_list
STRDUP_LINE = c_line("if ((copy = strdup(text)) == NULL)  /*")[0]  # leak_strdup
DICT_LINE = c_line("if ((dict = PyDict_New()) == NULL)")[0]     # str_dict


def leak_pymem(leaky):
    leaky.leak_pymem(3000)                          # PYMEM_CALL


def leak_native(leaky):
    leaky.leak_native(5000)                         # NATIVE_CALL


def leak_list(leaky):
    leaky.leak_new_list(3)                          # LIST_CALL


def leak_strdup(leaky):
    leaky.leak_strdup("s" * 3000)                   # STRDUP_CALL


PYMEM_CALL = leak_pymem.__code__.co_firstlineno + 1
NATIVE_CALL = leak_native.__code__.co_firstlineno + 1
LIST_CALL = leak_list.__code__.co_firstlineno + 1
STRDUP_CALL = leak_strdup.__code__.co_firstlineno + 1


def site_of(diagnosis, function):
    sites = [s for s in diagnosis.native if s["function"] == function]
    assert len(sites) == 1, diagnosis.native
    return sites[0]


@needs_memray
@pytest.mark.parametrize("func, probes, function, line, size, call", [
    (leak_pymem, ["blocks", "py_bytes"], "leak_pymem", PYMEM_LINE, 3000,
     PYMEM_CALL),
    (leak_native, ["native_bytes"], "leak_native", MALLOC_LINE, 5000,
     NATIVE_CALL),
    # glibc's strdup() mallocs for its caller: the line is the caller's.
    (leak_strdup, ["native_bytes"], "leak_strdup", STRDUP_LINE, 3001,
     STRDUP_CALL),
], ids=["PyMem_Malloc", "malloc", "strdup"])
def test_repeat_names_the_c_line_per_run(leaky, func, probes, function,
                                         line, size, call):
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.repeat(func, leaky, probes=probes)
    diagnosis = info.value.diagnosis
    site = site_of(diagnosis, function)
    assert (site["file"], site["line"]) == (LEAKYLIB, line)
    assert (site["bytes"], site["blocks"]) == (size, 1)      # per run
    # Another build of leakylib loaded by an earlier test holds the same
    # function and source: every build that does is named.
    assert leaky.__file__ in site["objects"]
    assert {os.path.basename(path) for path in site["objects"]} == \
        {os.path.basename(leaky.__file__)}
    assert site["caller"] == {"file": __file__, "line": call,
                              "function": func.__name__}
    if function == "leak_strdup":
        # What it called, named without glibc's alias (__GI___strdup).
        assert site["via"] == "strdup"
        assert "3001 bytes in 1 block, made by strdup()" in str(info.value)
    # The message says it, and the JSON-ready form carries it.
    text = str(info.value)
    # Named by file name; whole where two builds of it are loaded.
    objects = (site["objects"] if len(site["objects"]) > 1
               else [os.path.basename(leaky.__file__)])
    assert (f"leakylib.c:{line} {function}() in {' or '.join(objects)}: "
            f"{size} bytes in 1 block" in text), text
    assert f"called from {os.path.relpath(__file__)}:{call} " \
           f"{func.__name__}" in text
    assert diagnosis.to_dict()["native"][0] == site


@pytest.mark.parametrize("function, filename", [
    ("__GI___strdup", "./string/strdup.c"),
    ("__strdup", ""),
    ("strdup", "<unknown>"),
    ("strndup", ""),
    ("__vasprintf_internal", "./libio/vasprintf.c"),
    ("___asprintf", "./stdio-common/asprintf.c"),
    ("__libc_malloc", "./malloc/malloc.c"),
    ("operator new(unsigned long)",
     "../../../../src/libstdc++-v3/libsupc++/new_op.cc"),
    ("_Znwm", ""),
    ("xdup", "/build/glibc-2.36/string/xdup.c"),
], ids=lambda v: v or "no-file")
def test_the_c_runtimes_helpers_are_skipped_to_the_users_frame(function,
                                                               filename):
    from leakcheck._evidence.native import _site
    user = ("parse", "/src/ext/parse.c", 41, False)
    stack = [(function, filename, 42, False), user,
             ("cfunction_call", "Objects/methodobject.c", 1, False),
             ("test_parse", __file__, 7, True)]
    site = _site(stack, ((), ()))
    assert (site["function"], site["file"], site["line"]) == \
        ("parse", "/src/ext/parse.c", 41)


def test_a_users_function_is_not_taken_for_the_runtimes():
    from leakcheck._evidence.native import _theirs
    assert not _theirs("checksum", "/src/ext/string/checksum.c")
    assert not _theirs("checksum", "")      # no debug info, not libc's
    assert not _theirs("strings_new", "src/strings.c")


@needs_memray
def test_a_forgotten_object_is_named_at_its_c_line(leaky):
    diagnosis = leakcheck.diagnose(lambda: leak_list(leaky), ["objects"])
    # The list and its three ints (made on the next lines of new_list).
    sites = {(s["file"], s["line"]): s for s in diagnosis.native}
    site = sites[LEAKYLIB, LIST_LINE]
    assert site["function"] == "new_list" and site["blocks"] >= 1
    assert site["caller"]["line"] == LIST_CALL


# CPython 3.14 tracks every dict; before, a dict of strings is untracked.
DICTS_OF_STRINGS_TRACKED = gc.is_tracked({"a": "b"})


def _gc_callback(phase, info):
    pass


@pytest.fixture
def gc_callback(request):
    """A callback in gc.callbacks, as hypothesis installs to time the
    collections, or none."""
    if request.param:
        gc.callbacks.insert(0, _gc_callback)
    yield request.param
    if request.param:
        gc.callbacks.remove(_gc_callback)


@needs_memray
@pytest.mark.parametrize("gc_callback", [False, True], indirect=True,
                         ids=["no_gc_callback", "with_a_gc_callback"])
def test_a_leaked_dict_the_gc_does_not_track_gets_its_c_line(leaky,
                                                             gc_callback):
    # A dict of strings only is not tracked by the collector (before
    # CPython 3.14, which tracks every dict): objects does not grow and no
    # census names its type.  Taken from CPython's free list, memray would
    # see no allocation of it: the diagnosis empties the free lists before
    # each run, and PyDict_New() names it.  A gc callback's info dict,
    # freed after the collection emptied the lists, would be that dict.
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.repeat(lambda: leaky.leak_str_dict(3))
    assert {"blocks", "py_allocs"} <= set(info.value.diagnosis.leaking)
    diagnosis = info.value.diagnosis
    if DICTS_OF_STRINGS_TRACKED:
        assert "objects" in diagnosis.leaking
        assert any(o["type"] == "dict" for o in diagnosis.objects)
    else:
        assert "objects" not in diagnosis.leaking
        assert diagnosis.objects == []
    sites = {(s["file"], s["line"]): s for s in diagnosis.native}
    site = sites[LEAKYLIB, DICT_LINE]
    assert site["function"] == "str_dict" and site["via"] == "PyDict_New"
    assert site["blocks"] == 1
    text = str(info.value)
    assert (f"leakylib.c:{DICT_LINE} str_dict()" in text
            and "made by PyDict_New()" in text), text
    no_type = any(n.startswith("no type: what grew is no object the "
                               "garbage collector tracks")
                  for n in diagnosis.notes)
    assert no_type != DICTS_OF_STRINGS_TRACKED


def _libc_malloc():
    import ctypes
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def ctypes_leak(libc):
    libc.malloc(4096)                               # CTYPES_CALL


def ctypes_clean(libc):
    block = libc.malloc(4096)
    scratch = libc.malloc(8192)                     # freed on the next line
    libc.free(scratch)
    libc.free(block)


CTYPES_CALL = ctypes_leak.__code__.co_firstlineno + 1


def test_a_malloc_through_ctypes_names_the_python_line():
    # ctypes calls malloc through a pointer from dlsym(), which memray's
    # hooks never see: the diagnosis finds the line from the heap itself.
    libc = _libc_malloc()
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.repeat(ctypes_leak, libc)
    diagnosis = info.value.diagnosis
    assert diagnosis.leaking == ["native_bytes"]
    assert diagnosis.native == []
    lines = diagnosis.heap_lines
    assert lines[0]["file"] == __file__ and lines[0]["line"] == CTYPES_CALL
    assert lines[0]["function"] == "ctypes_leak"
    assert 4096 <= lines[0]["bytes"] <= 4096 + 64          # the chunk
    assert len(lines) == 1, lines
    text = str(info.value)
    assert (f"  {os.path.relpath(__file__)}:{CTYPES_CALL} ctypes_leak: "
            f"+{lines[0]['bytes']} bytes") in text, text
    if memray is not None:
        assert any("bypasses its hooks" in n for n in diagnosis.notes)
    assert diagnosis.to_dict()["heap_lines"] == lines


def test_memory_a_line_takes_and_a_later_one_frees_is_not_charged():
    libc = _libc_malloc()
    ctypes_clean(libc)
    diagnosis = leakcheck.diagnose(lambda: ctypes_clean(libc),
                                   ["native_bytes"])
    assert diagnosis.heap_lines == []


@needs_memray
def test_what_python_code_keeps_has_no_c_line(monkeypatch):
    started = []

    class Tracker(memray.Tracker):
        def __enter__(self):
            started.append(self)
            return super().__enter__()

    monkeypatch.setattr(memray, "Tracker", Tracker)
    kept = []
    diagnosis = leakcheck.diagnose(lambda: kept.append([]), ["objects"])
    assert diagnosis.objects and diagnosis.native == []
    # No C site kept a block a run under the first tracker: none is
    # started for one run to compare with.
    assert len(started) == 1


@needs_memray
def test_what_each_run_replaces_in_c_is_not_charged(leaky):
    """The blocks a call frees and makes again outlive the runs (the last
    call's): the run under a tracker of its own shows as many, so their
    line did not grow; the leak beside it did."""
    def run():
        leaky.replace_native(4)
        leaky.leak_native(5000)

    run()
    diagnosis = leakcheck.diagnose(run, ["native_bytes"])
    assert [s["function"] for s in diagnosis.native] == ["leak_native"]
    # A cheap diagnosis has no such run: what a run replaces is told apart
    # only when it is a block (one copy left).
    cheap = leakcheck.diagnose(run, ["native_bytes"], cheap=True)
    assert sorted(s["function"] for s in cheap.native) == \
        ["leak_native", "replace_native"]


@needs_memray
def test_the_capture_is_kept_where_asked_and_nowhere_else(leaky, tmp_path,
                                                          monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    diagnosis = leakcheck.diagnose(lambda: leak_pymem(leaky), ["blocks"])
    assert diagnosis.capture is None and diagnosis.native
    assert os.listdir(scratch) == []

    kept = tmp_path / "captures"
    diagnosis = leakcheck.diagnose(lambda: leak_pymem(leaky), ["blocks"],
                                   capture_dir=kept)
    assert os.listdir(scratch) == []
    assert os.path.dirname(diagnosis.capture) == str(kept)
    assert diagnosis.to_dict()["capture"] == diagnosis.capture
    with memray.FileReader(diagnosis.capture) as reader:
        leaked = [r for r in reader.get_leaked_allocation_records()
                  if "leak_pymem" in (frame[0] for frame
                                      in r.hybrid_stack_trace()[:3])]
    assert leaked and sum(r.n_allocations for r in leaked) >= 2


@needs_memray
def test_another_tracker_running_leaves_the_verdict_and_says_why(leaky,
                                                                 tmp_path):
    with memray.Tracker(str(tmp_path / "theirs.bin")):
        with pytest.raises(leakcheck.LeakError) as info:
            leakcheck.repeat(leak_pymem, leaky, probes=["blocks"])
    diagnosis = info.value.diagnosis
    assert diagnosis.native == [] and diagnosis.allocations
    notes = [n for n in diagnosis.notes if n.startswith("no C lines")]
    assert len(notes) == 1 and "memray would not start" in notes[0]
    assert "\n" not in notes[0]


@needs_memray
def test_without_debug_info_the_function_and_its_object(leakylib_build,
                                                        monkeypatch):
    # Loading it may make it sys.modules["leakylib"]: the other tests'
    # module is put back afterwards.
    import importlib.util
    monkeypatch.setitem(sys.modules, "leakylib", sys.modules.get("leakylib"))
    path = leakylib_build(debug_info=False)
    spec = importlib.util.spec_from_file_location("leakylib", path)
    bare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bare)
    diagnosis = leakcheck.diagnose(lambda: bare.leak_pymem(3000), ["blocks"])
    site = site_of(diagnosis, "leak_pymem")
    assert (site["file"], site["line"]) == (None, None)
    assert site["objects"] == [path]
    text = str(diagnosis)
    assert f"  leak_pymem() in {os.path.basename(path)}: 3000 bytes" in text
    note = next(n for n in diagnosis.notes if "-g" in n)
    assert os.path.basename(path) in note


@needs_memray
def test_threads_allocating_meanwhile_are_no_trouble(leaky):
    import threading
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            [bytes(100) for _ in range(100)]

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        diagnosis = leakcheck.diagnose(lambda: leak_pymem(leaky), ["blocks"])
    finally:
        stop.set()
        thread.join()
    assert site_of(diagnosis, "leak_pymem")["line"] == PYMEM_LINE


def run_python(code, tmp_path, leakylib_path):
    """Runs `code` in a fresh interpreter with leakylib importable (from
    `leakylib_path`) and TMPDIR in tmp_path/tmp; returns its stdout."""
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    env = dict(os.environ, TMPDIR=str(scratch),
               PYTHONPATH=os.path.dirname(leakylib_path))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout
    return proc.stdout


@needs_memray
def test_code_that_forks_is_diagnosed_once_and_leaves_no_file(tmp_path,
                                                              leaky):
    out = run_python('''
        import os, leakcheck, leakylib

        def forks():
            leakylib.leak_pymem(3000)
            pid = os.fork()
            if pid == 0:
                leakylib.leak_pymem(3000)
                os._exit(0)
            os.waitpid(pid, 0)

        d = leakcheck.diagnose(forks, ["blocks"])
        print("pid", os.getpid(), [s["function"] for s in d.native])
    ''', tmp_path, leaky.__file__)
    # (3.12+ warns that the process forks with memray's thread running.)
    printed = [line for line in out.splitlines() if line.startswith("pid ")]
    assert len(printed) == 1 and printed[0].endswith("['leak_pymem']"), out
    assert os.listdir(tmp_path / "tmp") == []


def test_without_memray_the_verdict_stands_and_one_line_says_how(tmp_path,
                                                                 leaky):
    out = run_python('''
        import sys
        sys.modules["memray"] = None            # import memray fails
        import leakcheck, leakylib
        try:
            leakcheck.repeat(leakylib.leak_pymem, 3000, probes=["blocks"])
        except leakcheck.LeakError as e:
            print(e)
            print("native:", e.diagnosis.native)
    ''', tmp_path, leaky.__file__)
    assert "leakcheck: series" in out and "blocks" in out
    assert "native: []" in out
    note = [line for line in out.splitlines() if "no C lines" in line]
    assert note == ["note: no C lines: memray is not installed (import "
                    "memray failed); pip install 'leakcheck[native]' gives "
                    "the C line of each leak"], out


@needs_memray
def test_fds_and_garbage_count_the_compared_runs_only(leaky,
                                                      garbage_cleanup):
    """memray's runs come after the compared ones: what they leave (new
    descriptors, gc.garbage) is not counted."""
    def both():
        leaky.leak_fd(os.devnull)
        leaky.make_uncollectable()
        leaky.leak_pymem(3000)

    diagnosis = leakcheck.diagnose(both, ["fds", "garbage", "blocks"])
    assert diagnosis.native                       # memray ran
    assert len(diagnosis.fds) == 2                # one per compared run
    assert diagnosis.garbage[0]["new"] == 4       # 2 objects x 2 runs


def test_the_line_tracer_gives_up_on_long_runs_and_says_so(monkeypatch):
    from leakcheck._evidence import heaplines
    monkeypatch.setattr(heaplines, "MAX_EVENTS", 50)
    libc = _libc_malloc()

    def busy():
        for _ in range(100):
            pass
        libc.malloc(4096)

    diagnosis = leakcheck.diagnose(busy, ["native_bytes"])
    assert diagnosis.heap_lines == []
    assert ("the Python lines of the C heap's growth were not looked for "
            "past 50 trace events per run") in diagnosis.notes


def test_another_tracer_is_left_alone_and_the_note_says_why():
    libc = _libc_malloc()
    seen = []

    def theirs(frame, event, arg):
        seen.append(event)
        return None

    sys.settrace(theirs)
    try:
        diagnosis = leakcheck.diagnose(lambda: ctypes_leak(libc),
                                       ["native_bytes"])
    finally:
        sys.settrace(None)
    assert diagnosis.heap_lines == []
    assert any(n.startswith("no Python line for the C heap's growth: "
                            "another trace function is set")
               for n in diagnosis.notes)
    assert seen                     # still theirs, all along


# ---- a cheap diagnosis (diagnose(..., cheap=True), --leaks-diagnose=cheap)
# runs memray only when the C heap alone grew, and keeps one frame per
# Python allocation.

CHEAP_PROBES = ["blocks", "py_allocs", "py_bytes"]


@needs_memray
def test_cheap_leaves_out_memray_when_python_probes_grew(leaky):
    full = leakcheck.diagnose(lambda: leak_pymem(leaky), CHEAP_PROBES)
    assert [s["function"] for s in full.native] == ["leak_pymem"]
    assert NOTE_CHEAP not in full.notes

    cheap = leakcheck.diagnose(lambda: leak_pymem(leaky), CHEAP_PROBES,
                               runs=1, cheap=True)
    assert cheap.native == []
    assert cheap.capture is None
    assert NOTE_CHEAP in cheap.notes
    # The Python line that called into C is still named, one frame deep.
    top = cheap.allocations[0]
    assert (top["file"], top["line"]) == (__file__, PYMEM_CALL)
    assert [(f["file"], f["line"]) for f in top["traceback"]] == \
        [(__file__, PYMEM_CALL)]
    assert f"note: {NOTE_CHEAP}" in str(cheap)


@needs_memray
def test_cheap_runs_memray_when_the_c_heap_alone_grew(leaky):
    cheap = leakcheck.diagnose(lambda: leak_native(leaky), ["native_bytes"],
                               runs=1, cheap=True)
    assert [(s["function"], s["bytes"], s["blocks"])
            for s in cheap.native] == [("leak_native", 5000, 1)]
    assert NOTE_CHEAP not in cheap.notes


def test_without_memray_cheap_says_what_it_left_out(leaky, monkeypatch):
    # Where memray would be missing anyway, the note still says why no C
    # line was looked for, not how to install memray.
    monkeypatch.setitem(sys.modules, "memray", None)
    cheap = leakcheck.diagnose(lambda: leak_pymem(leaky), CHEAP_PROBES,
                               runs=1, cheap=True)
    assert cheap.native == []
    assert NOTE_CHEAP in cheap.notes
    assert not any(note.startswith(NOTE_NO_MEMRAY.split("(")[0])
                   for note in cheap.notes)


def test_cheap_asks_no_c_lines_for_objects_and_descriptors():
    kept = []
    cheap = leakcheck.diagnose(lambda: kept.append(os.open(os.devnull,
                                                           os.O_RDONLY)),
                               ["fds"], runs=1, cheap=True)
    try:
        assert len(cheap.fds) == 1
        assert NOTE_CHEAP not in cheap.notes     # fds: no C lines to skip
    finally:
        for fd in kept:
            os.close(fd)
