"""The diagnosis names what leaked and where: asserted on its content."""

import gc
import json
import os
import sys
import threading

import pytest

import leakcheck
from leaks import RELEASE_BUILD, warm_after_profilers

KEYS = {"leaking", "runs", "objects", "allocations", "native", "heap_lines",
        "refcounts", "garbage", "fds", "threads", "chains", "notes",
        "capture"}


def leak_lists(leaky):
    leaky.leak_new_list(3)                          # LIST_LINE


def leak_block(leaky):
    leaky.leak_pymem(2000)                          # BLOCK_LINE


def leak_raw(leaky):
    leaky.leak_rawmem(100)                          # RAW_LINE


LIST_LINE = leak_lists.__code__.co_firstlineno + 1
BLOCK_LINE = leak_block.__code__.co_firstlineno + 1
RAW_LINE = leak_raw.__code__.co_firstlineno + 1


def caught(func, *args, **kwargs):
    with pytest.raises(leakcheck.LeakError) as info:
        leakcheck.repeat(func, *args, **kwargs)       # CAUGHT_LINE
    return info.value


CAUGHT_LINE = caught.__code__.co_firstlineno + 2


def test_a_refcount_leak_in_c_names_the_type_and_the_line(leaky):
    """On a release build too: a new object returned with a reference too
    many shows in objects, blocks and py_allocs; the diagnosis says which
    type grew and which line made it."""
    error = caught(leak_lists, leaky)
    # objects too, unless the collector is still untracking containers
    # earlier code left (one nesting level per collection): then a run
    # can read one object fewer.
    assert {"blocks", "py_allocs"} <= set(error.diagnosis.leaking)
    objects = error.diagnosis.objects
    assert objects[0] == {"type": "list", "delta": 2}   # one per re-run
    top = error.diagnosis.allocations[0]
    assert (top["file"], top["line"]) == (__file__, LIST_LINE)
    assert top["source"] == "leaky.leak_new_list(3)                          # LIST_LINE"
    assert top["count"] >= 2
    assert {"file": __file__, "line": LIST_LINE} == top["traceback"][0]
    text = error.report
    # Said per run, as the verdict says it: one list per run.
    assert "objects that grew (per run, re-running the code 2 times), most " \
           "first:\n  list  +1\n" in text
    assert f"  {__file__}:{LIST_LINE}: +" in text
    assert "      leaky.leak_new_list(3)" in text


def test_a_pymem_block_leak_names_the_line(leaky):
    error = caught(leak_block, leaky, probes=["blocks", "py_bytes"])
    assert error.diagnosis.leaking == ["blocks", "py_bytes"]
    top = error.diagnosis.allocations[0]
    assert (top["file"], top["line"]) == (__file__, BLOCK_LINE)
    assert top["size"] == 2 * 2000 and top["count"] == 2
    assert "leak_pymem(2000)" in top["source"]
    assert error.diagnosis.objects == []      # no object grew


def test_a_raw_domain_leak_names_the_line(leaky):
    error = caught(leak_raw, leaky, probes=["py_allocs"])
    top = error.diagnosis.allocations[0]
    assert (top["file"], top["line"], top["count"]) == (__file__, RAW_LINE, 2)


class Session:
    registry = []

    def __init__(self):
        Session.registry.append(self)


def test_python_objects_kept_by_a_class_attribute(leaky):
    try:
        error = caught(Session, probes=["objects"])
    finally:
        Session.registry.clear()
    assert error.diagnosis.objects[0] == {
        "type": f"{__name__}.Session", "delta": 2}
    # Session() was called by leakcheck itself: charged to the line that
    # handed it over.
    top = error.diagnosis.allocations[0]
    assert (top["file"], top["line"]) == (__file__, CAUGHT_LINE)


def test_new_file_descriptors_say_what_they_point_to(leaky, tmp_path):
    path = tmp_path / "kept-open.txt"
    path.write_text("x")
    error = caught(leaky.leak_fd, str(path), probes=["fds"])
    assert error.diagnosis.fds and len(error.diagnosis.fds) == 2
    for entry in error.diagnosis.fds:
        assert entry["target"] == str(path)
        os.close(entry["fd"])
    assert f"-> {path}" in error.report


_stop = threading.Event()


def _serve_forever():
    _stop.wait()


def test_new_python_threads_have_their_names_and_targets():
    started = [None] * 8                # no growth of its own per run

    def start():
        thread = threading.Thread(target=_serve_forever, name="lc-worker",
                                  daemon=True)
        thread.start()
        started[started.index(None)] = thread
    try:
        error = caught(start, probes=["threads"])
        threads = error.diagnosis.threads
        assert len(threads) == 2
        for entry in threads:
            assert entry["name"] == "lc-worker"
            assert entry["target"] == f"{__name__}._serve_forever"
            assert entry["python"] is True and entry["daemon"] is True
        assert f"'lc-worker' running {__name__}._serve_forever" in \
            error.report
    finally:
        _stop.set()
        for thread in filter(None, started):
            thread.join()


def test_new_native_threads_have_their_names(leaky):
    error = caught(leaky.leak_thread, "lc-native", probes=["threads"])
    threads = error.diagnosis.threads
    assert [t["name"] for t in threads] == ["lc-native", "lc-native"]
    assert all(t["python"] is False and t["target"] is None
               for t in threads)
    assert "'lc-native' (native id" in error.report
    assert "not started by Python" in error.report


def test_garbage_lists_the_uncollectable_types(leaky, garbage_cleanup):
    error = caught(leaky.make_uncollectable, probes=["garbage"])
    assert error.diagnosis.garbage[0]["type"] == "leakylib.Legacy"
    assert error.diagnosis.garbage[0]["new"] == 4    # 2 objects x 2 runs
    assert "leakylib.Legacy: " in error.report


@pytest.mark.skipif(RELEASE_BUILD, reason="refs needs a debug build")
def test_refs_names_the_object_whose_count_grew(leaky):
    target = ["a list the C code keeps a reference to"]
    error = caught(leaky.leak_ref, target, probes=["refs"])
    grown = error.diagnosis.refcounts
    assert grown[0]["type"] == "list" and grown[0]["delta"] == 2
    assert "a list the C code keeps" in grown[0]["object"]


def test_to_dict_is_json_with_stable_keys(leaky, garbage_cleanup):
    error = caught(leak_lists, leaky)
    data = error.diagnosis.to_dict()
    assert set(data) == KEYS
    assert json.loads(json.dumps(data)) == data
    empty = leakcheck.Diagnosis().to_dict()
    assert set(empty) == KEYS and not any(empty[k] for k in KEYS - {"runs"})
    assert not leakcheck.Diagnosis() and str(leakcheck.Diagnosis()) == ""


def test_diagnose_alone(leaky):
    diagnosis = leakcheck.diagnose(lambda: leaky.leak_new_list(1),
                                   ["objects"], runs=3)
    assert isinstance(diagnosis, leakcheck.Diagnosis)
    assert diagnosis.runs == 3 and diagnosis.leaking == ["objects"]
    assert diagnosis.objects[0] == {"type": "list", "delta": 3}
    assert repr(diagnosis) == "<Diagnosis of objects>"


def test_the_objects_evidence_can_keep_what_the_runs_left_alive(leaky):
    """Request.keep_objects: the objects the runs made and did not free,
    on an unfrozen and on a frozen heap, and nothing of the objects that
    were there before."""
    from leakcheck._diagnose import _run
    from leakcheck._settle import settle_and_collect
    from leakcheck._evidence import Request
    from leakcheck._evidence.objects import TypeCensus

    old = [[] for _ in range(100)]
    kept = []

    def run_once():
        kept.append([len(kept)])
        kept.append({"k": []})
        [[] for _ in range(50)]            # made and freed
        leaky.leak_new_list(2)

    run_once()                             # first-use growth
    for frozen in (False, True):
        if frozen:
            gc.collect()
            gc.freeze()
        try:
            census = TypeCensus(Request({"objects"}, 2, keep_objects=True))
            census.before()
            assert _run(run_once, 2) is None
            settle_and_collect()
            census.after()
            diagnosis = leakcheck.Diagnosis(["objects"], 2)
            census.fill(diagnosis)
        finally:
            gc.unfreeze()
        survivors = diagnosis.survivors
        assert all(any(obj is mine for obj in survivors)
                   for mine in kept[-4:])
        assert not any(obj is mine for obj in survivors for mine in old)
        leaked = [obj for obj in survivors
                  if type(obj) is list and obj == [1000000, 1000001]]
        assert len(leaked) == 2, survivors
        assert "survivors" not in diagnosis.to_dict()
        del survivors, leaked, diagnosis, census


def test_an_exception_while_diagnosing_is_a_note():
    def fails():
        raise RuntimeError("only once")

    diagnosis = leakcheck.diagnose(fails, ["objects"])
    assert diagnosis.notes[0] == \
        "re-running the code raised RuntimeError: only once"


def test_a_clean_run_never_computes_a_diagnosis(leaky, monkeypatch):
    import leakcheck._diagnose as diagnosis

    def forbidden(*args, **kwargs):
        raise AssertionError("diagnosis on a clean run")

    warm_after_profilers()
    monkeypatch.setattr(diagnosis, "diagnose", forbidden)
    monkeypatch.setattr(diagnosis, "diagnose_after", forbidden)
    leakcheck.repeat(leaky.clean_new_list, 3)
    with leakcheck.scope():
        leaky.clean_new_list(3)
    leakcheck.scope()(leaky.clean_pymem)(64)


def test_tracemalloc_left_as_the_user_had_it(leaky):
    import tracemalloc
    assert not tracemalloc.is_tracing()
    caught(leak_block, leaky, probes=["blocks"])
    assert not tracemalloc.is_tracing()
    tracemalloc.start(3)
    try:
        error = caught(leak_block, leaky, probes=["blocks"])
        assert tracemalloc.is_tracing()
        assert error.diagnosis.allocations[0]["line"] == BLOCK_LINE
    finally:
        tracemalloc.stop()


def test_a_with_scope_is_diagnosed_after_the_fact():
    kept = []

    class Entry:
        pass

    Entry()
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope(probes="objects"):
            kept.extend(Entry() for _ in range(3))
    diagnosis = info.value.diagnosis
    assert diagnosis.runs == 0
    assert diagnosis.objects[0]["type"].endswith("<locals>.Entry")
    assert diagnosis.objects[0]["delta"] == 3
    assert "objects that grew (after the fact)" in info.value.report


def test_a_with_scope_names_allocation_lines_under_tracemalloc():
    import tracemalloc
    kept = []

    class Entry:
        __slots__ = ("x",)      # (3.11 cannot trace objects with a managed dict)

    Entry()
    tracemalloc.start(1)
    try:
        with pytest.raises(leakcheck.LeakError) as info:
            with leakcheck.scope(probes="objects"):
                kept.append(Entry())
                line = sys._getframe().f_lineno - 1
    finally:
        tracemalloc.stop()
    allocations = info.value.diagnosis.allocations
    assert (allocations[0]["file"], allocations[0]["line"]) == (__file__,
                                                                line)


def test_diagnose_leaves_out_memory_a_harness_allocates(tmp_path):
    """diagnose(ignore=[folder]): what lines in that folder allocate is left
    out, so a test runner's own per-run objects do not pass for the leak."""
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "runner_keeps.py").write_text(
        "KEPT = []\n"
        "def run(test):\n"
        "    KEPT.append(bytearray(64))\n"
        "    test()\n")
    sys.path.insert(0, str(harness))
    try:
        import runner_keeps
        kept = []

        def test():
            kept.append(bytearray(64))
        test_line = test.__code__.co_firstlineno + 1

        def files(diagnosis):
            return {entry["file"] for entry in diagnosis.allocations}

        plain = leakcheck.diagnose(lambda: runner_keeps.run(test),
                                   ["py_allocs"])
        assert str(harness / "runner_keeps.py") in files(plain)
        ignoring = leakcheck.diagnose(lambda: runner_keeps.run(test),
                                      ["py_allocs"], ignore=[harness])
        assert str(harness / "runner_keeps.py") not in files(ignoring)
        assert (__file__, test_line) in {
            (entry["file"], entry["line"]) for entry in ignoring.allocations}
        with pytest.raises(TypeError, match="ignore"):
            leakcheck.diagnose(lambda: None, ["py_allocs"], ignore=str(harness))
    finally:
        sys.path.remove(str(harness))
        sys.modules.pop("runner_keeps", None)


# ---- whose an allocation made through the standard library is -----------

HARNESS_SETS_ENVIRON = (
    "import os\n"
    "RUNS = []\n"
    "def run(test):\n"
    "    RUNS.append(None)\n"
    "    os.environ['LC_DIAG_HARNESS_%d' % len(RUNS)] = 'h' * 100\n"
    "    test()\n")

_env_keys = []


def set_an_environment_variable():
    _env_keys.append(f"LC_DIAG_TEST_{len(_env_keys)}")
    os.environ[_env_keys[-1]] = "t" * 100               # ENV_LINE


ENV_LINE = set_an_environment_variable.__code__.co_firstlineno + 2


def _frames(entry):
    return {(frame["file"], frame["line"]) for frame in entry["traceback"]}


@pytest.fixture
def harness_sets_environ(tmp_path):
    """A harness module (in its own folder) that, like pytest setting
    PYTEST_CURRENT_TEST, has os.environ allocate on every run."""
    harness = tmp_path / "harness"
    harness.mkdir()
    (harness / "runner_env.py").write_text(HARNESS_SETS_ENVIRON)
    sys.path.insert(0, str(harness))
    before = set(os.environ)
    try:
        import runner_env
        yield harness, runner_env
    finally:
        sys.path.remove(str(harness))
        sys.modules.pop("runner_env", None)
        for key in set(os.environ) - before:
            del os.environ[key]
        _env_keys.clear()


def test_what_a_harness_has_the_standard_library_allocate_is_left_out(
        harness_sets_environ):
    """The innermost frame is os.py's (or <frozen os>), in no ignored
    folder; the innermost frame outside the standard library is the
    harness's: so the allocation is the harness's."""
    harness, runner_env = harness_sets_environ
    runner_file = str(harness / "runner_env.py")

    def nothing():
        pass

    plain = leakcheck.diagnose(lambda: runner_env.run(nothing),
                               ["py_allocs"])
    assert any((runner_file, 5) in _frames(entry)
               for entry in plain.allocations), plain
    ignoring = leakcheck.diagnose(lambda: runner_env.run(nothing),
                                  ["py_allocs"], ignore=[harness])
    assert not any(runner_file in {f for f, _ in _frames(entry)}
                   for entry in ignoring.allocations), ignoring


def test_a_leak_the_code_makes_through_the_standard_library_keeps_its_line(
        harness_sets_environ):
    """The same standard library lines, called by the code under
    diagnosis inside the harness: still reported, with its line."""
    harness, runner_env = harness_sets_environ
    diagnosis = leakcheck.diagnose(
        lambda: runner_env.run(set_an_environment_variable), ["py_allocs"],
        ignore=[harness])
    ours = [entry for entry in diagnosis.allocations
            if (__file__, ENV_LINE) in _frames(entry)]
    assert ours, diagnosis
    # Charged to the standard library's line that allocated, called from
    # the test's (among the callers the report shows): it shows both.
    assert any(os.path.basename(entry["file"]) in ("os.py", "<frozen os>")
               and {"file": __file__, "line": ENV_LINE}
               in entry["traceback"][1:4]
               for entry in ours), diagnosis
    assert f"called from {__file__}:{ENV_LINE}" in str(diagnosis)
    # The harness's own variable (its line 5) is still left out.
    assert not any((str(harness / "runner_env.py"), 5) in _frames(entry)
                   for entry in diagnosis.allocations), diagnosis


def test_a_leak_through_the_standard_library_in_a_repeat_names_its_line():
    """Without a harness: leakcheck.repeat() over code that leaks through
    os.environ (leakcheck's own frames, which call the code, are not an
    owner to leave the allocation to)."""
    before = set(os.environ)
    try:
        error = caught(set_an_environment_variable, probes=["py_allocs"])
    finally:
        for key in set(os.environ) - before:
            del os.environ[key]
        _env_keys.clear()
    assert any((__file__, ENV_LINE) in _frames(entry)
               for entry in error.diagnosis.allocations), error.report


_TUPLES = []
_SHARED = []


def _keep_a_tuple():
    _TUPLES.append((_SHARED, 1))    # tracked: it holds a list


def test_leaked_tuples_are_counted_while_tracemalloc_runs():
    """The type census before the runs follows a collection too: without
    it, the tuples tracemalloc's snapshot left tracked were untracked by
    the collection before the second census and offset the leaked ones
    (simplejson's C encoder leaked a tuple per call: read as tuple -1)."""
    for _ in range(3):
        _keep_a_tuple()
    for probes in (["objects"], ["objects", "blocks"]):
        d = leakcheck.diagnose(_keep_a_tuple, probes)
        assert {"type": "tuple", "delta": 2} in d.objects, d.objects
