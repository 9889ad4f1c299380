"""A clean test's reported run is read too: when it grew nothing, it is the
measured run and the test runs once.  What pytest keeps of that run (its
reports, what hooks keep of them, PYTEST_CURRENT_TEST) must not read as
growth, and a leak must still be caught."""

import json
import os
import subprocess
import sys

import pytest

# Where a clean test's reported run reads as nothing (and it runs once):
# from 3.11 on, release builds and the 3.11 debug build.  On the 3.14
# debug build a test that prints still reads more references after the
# run (not found yet); up to 3.10, see below.
RUNS_ONCE = sys.version_info >= (3, 11) and (
    not hasattr(sys, "gettotalrefcount") or sys.version_info < (3, 12))


def _grew_nothing(rec):
    """Whether a measured reported run read nothing: every probe 0, but
    the probes that count bytes, which may read up to 32 bytes less (glibc
    serves the same request with a chunk 16 bytes larger, now and then)."""
    return all(d == [0] or (probe in ("py_bytes", "native_bytes")
                            and -32 <= d[0] <= 0 and len(d) == 1)
               for probe, d in rec["deltas"].items())


def _clean_ones_run_once(pytester, read_report, module, source, clean,
                         leak):
    """Runs `source` as `module`: `clean` tests that pass and `leak`, a
    test that leaks; checks that it is a leak verdict and that the clean
    ones ran once (but for one run that glibc's heap moves).  Returns the
    report's records, by test id, the leak's among them."""
    pytester.makepyfile(**{module: source})
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=clean, failed=1)
    _, recs = read_report()
    leak_id = f"{module}.py::{leak}"
    assert recs[leak_id]["verdict"] == "leak", recs[leak_id]
    missed = [rec for test_id, rec in recs.items()
              if test_id != leak_id and not rec["warmup_measured"]]
    assert len(missed) <= 1, missed
    return recs


ONCE = '''
import logging

import pytest

_KEPT = []


@pytest.fixture
def numbers():
    return list(range(10))


@pytest.mark.parametrize("i", range(6))
def test_clean(i, numbers, tmp_path, caplog):
    logging.getLogger("once").info("quiet")
    (tmp_path / "f.txt").write_text("x")
    assert numbers[i] == i


class TestGroup:
    @pytest.mark.parametrize("i", range(5))
    def test_method(self, i):
        assert i >= 0


@pytest.mark.parametrize("i", range(2))
def test_prints(i):
    print("said", i)


@pytest.mark.parametrize("i", range(4))
def test_leaky(i):
    _KEPT.append([])


@pytest.mark.parametrize("i", range(2))
def test_prints_and_leaks(i):
    print("leaking", i)
    _KEPT.append([])
'''

# A conftest that keeps each report on the item, as many do to look at the
# outcome in a fixture's teardown.
KEEPS_REPORTS = '''
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)


@pytest.fixture(autouse=True)
def outcome_seen(request):
    yield
    assert request.node.rep_call.passed
'''


@pytest.mark.parametrize("conftest", ["none", "keeps reports"])
def test_a_clean_test_runs_once_and_a_leak_is_still_caught(
        pytester, read_report, conftest):
    pytester.makepyfile(test_once=ONCE)
    if conftest == "keeps reports":
        pytester.makeconftest(KEEPS_REPORTS)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-rP")
    result.assert_outcomes(passed=13, failed=6)
    _, recs = read_report()
    for test_id in [f"test_once.py::test_leaky[{i}]" for i in range(4)] + \
            [f"test_once.py::test_prints_and_leaks[{i}]" for i in range(2)]:
        rec = recs[test_id]
        assert rec["verdict"] == "leak" and rec["test_runs"] >= 4, rec
        assert rec["warmup_measured"] is False
    # The failure of a leak shows what its reported run printed, once.
    for i in range(2):
        assert result.stdout.str().count(f"leaking {i}\n") == 1
    # Past the first of each (whose run fills what is filled once), the
    # clean tests ran once: each reported run grew nothing and was measured.
    # But one: when the plugin freezes the objects earlier tests left (every
    # few dozen tests, session.YOUNG_BLOCKS), the next test's run replaces
    # some of them (pytest's log capture buffers), which reads as growth.
    # Up to 3.10, where a code object keeps the frame of its last call and
    # a frame from the freelist is resized in place, a reported run moves
    # the C heap by a few hundred bytes (its calls differ from the previous
    # test's): there the clean tests run more than once, as before.  On the
    # 3.11 debug build they run once too: the total reference count reads
    # what pytest adds to the item's stash in the run (made before its
    # first snapshot) and what tmp_path's teardown drops of the stand-ins'.
    once = [f"test_once.py::test_clean[{i}]" for i in range(2, 6)] + \
        [f"test_once.py::TestGroup::test_method[{i}]" for i in range(2, 5)]
    missed = []
    for test_id in once:
        rec = recs[test_id]
        assert rec["verdict"] == "clean", rec
        if not rec["warmup_measured"]:
            assert rec["test_runs"] >= 2, rec
            missed.append(rec)
            continue
        assert rec["test_runs"] == 1 and rec["runs"] == 1, rec
        assert _grew_nothing(rec), rec
    if RUNS_ONCE:
        assert len(missed) <= 1, missed
    # What a test printed is in its reports, which a stand-in could not
    # hold: it is kept out of the process while the snapshot after the run
    # reads, so a test that prints runs once too (but the session's first
    # print, which makes what capturing keeps from then on), and what it
    # printed is all in its report.
    for i in range(2):
        rec = recs[f"test_once.py::test_prints[{i}]"]
        assert rec["verdict"] == "clean", rec
    rec = recs["test_once.py::test_prints[1]"]
    if RUNS_ONCE:
        assert rec["test_runs"] == 1 and rec["warmup_measured"], rec
    result.stdout.fnmatch_lines(["*test_prints?0?*", "*Captured stdout call*",
                                 "said 0", "*test_prints?1?*",
                                 "*Captured stdout call*", "said 1"])


# One-method unittest classes: pytest replaces its log capture's StringIO
# in every phase, whose 1-byte buffer lands now in a 32-byte chunk of
# glibc's, now in a 48-byte one, so that a clean test's reported run can
# read 16 or 32 bytes less in py_bytes and native_bytes.  Some in every
# few dozen did, and ran twice more.
UNITTEST_CLASSES = "import unittest\n" + "".join(f'''

class TestText{n}(unittest.TestCase):
    def test_upper(self):
        self.assertEqual("a{n}".upper(), "A{n}")
''' for n in range(150))


@pytest.mark.skipif(not RUNS_ONCE, reason="clean tests run once from 3.11 "
                    "on, and on the 3.11 debug build")
def test_unittest_methods_run_once_as_often_as_functions(pytester,
                                                         read_report):
    pytester.makepyfile(test_classes=UNITTEST_CLASSES)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=150)
    _, recs = read_report()
    # Past the session's first tests, which fill what is filled once,
    # every one ran once (but for one run that glibc's heap moves).
    missed = [rec for test_id, rec in recs.items()
              if not rec["warmup_measured"] and
              test_id not in (f"test_classes.py::TestText{n}::test_upper"
                              for n in range(2))]
    assert len(missed) <= 1, missed
    for rec in recs.values():
        assert rec["verdict"] == "clean", rec
        if rec["warmup_measured"]:
            assert rec["test_runs"] == 1 and _grew_nothing(rec), rec


# Tests whose frame outlives their run: an ExceptionInfo kept in a local
# holds the traceback, which holds the test's frame (a cycle the snapshot
# collects).  From 3.11 on, a frame object that outlives its frame makes
# one for its caller's frame, and so on up to the first frame still
# running: the one the runs return to, whose object was made in the first
# run only (one block: the reported run read it as growth).
FRAMES_KEPT = "".join(f'''

def test_kept_{n}():
    with pytest.raises(ValueError) as excinfo:
        int("x{n}")
    assert "invalid" in str(excinfo.value)
''' for n in range(30)) + '''

_KEPT = []


def test_keeps_its_error():
    with pytest.raises(ValueError) as excinfo:
        int("y")
    _KEPT.append(excinfo.value)
'''


@pytest.mark.skipif(not RUNS_ONCE, reason="clean tests run once from 3.11 "
                    "on, and on the 3.11 debug build")
def test_a_test_whose_frame_outlives_its_run_runs_once(pytester,
                                                       read_report):
    recs = _clean_ones_run_once(pytester, read_report, "test_frames",
                                "import pytest\n" + FRAMES_KEPT, 30,
                                "test_keeps_its_error")
    del recs["test_frames.py::test_keeps_its_error"]
    for rec in recs.values():
        assert rec["verdict"] == "clean", rec


# The size of os.environ's dict after each test, written at the end.
ENVIRON_SIZES = '''
import json
import os
import sys

_SIZES = []


def pytest_runtest_logfinish(nodeid, location):
    _SIZES.append(sys.getsizeof(os.environ._data))


def pytest_unconfigure(config):
    with open("environ_sizes.json", "w") as f:
        json.dump(_SIZES, f)
'''
CLEAN_30 = "".join(f'''

def test_clean_{n}():
    assert {n} >= 0
''' for n in range(30))


@pytest.mark.parametrize("variables", [10, 20, 30])
def test_os_environs_dict_is_grown_before_the_first_snapshot(pytester,
                                                             variables):
    """pytest sets PYTEST_CURRENT_TEST in os.environ in every run and pops
    it at the end; a dict's deleted entry is not reused, so after a few
    runs its table is made anew, larger the first time (on 3.11, with 10
    to 30 variables, the 7th to 18th test's reported run read py_bytes and
    native_bytes +1088, and the test ran twice more).  Grown before the
    first test's snapshot, it keeps its size through the session.  When
    that happens depends on how many variables there are: the session
    gets as many as the test says, and nothing else."""
    pytester.makeconftest(ENVIRON_SIZES)
    pytester.makepyfile(test_clean=CLEAN_30)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": str(pytester.path)}
    env.update((f"LEAKCHECK_FILLER_{i}", "x")
               for i in range(variables - len(env)))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p",
         "no:cacheprovider", "--leaks", "-q"], cwd=pytester.path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout
    sizes = json.loads((pytester.path / "environ_sizes.json").read_text())
    assert len(sizes) == 30 and len(set(sizes)) == 1, sizes


# A leak of the C heap first: its diagnosis traces (memray's profile hook,
# or the heap's line tracer without memray).  From 3.12 on, a code object
# that first runs after a trace allocates its instrumentation data then,
# which each clean test's reported run read as growth: they all ran twice
# more.  The diagnosis gives it to the code loaded already.
AFTER_A_DIAGNOSIS = '''
import ctypes
import ctypes.util

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p


def test_a_leak():
    libc.malloc(64 * 1024)
''' + "".join(f'''

def test_clean_{n}():
    assert [{n}] * 2 == [{n}, {n}]
''' for n in range(20))


@pytest.mark.skipif(not RUNS_ONCE, reason="clean tests run once from 3.11 "
                    "on, and on the 3.11 debug build")
def test_clean_tests_after_a_diagnosis_run_once(pytester, read_report):
    recs = _clean_ones_run_once(pytester, read_report, "test_after",
                                AFTER_A_DIAGNOSIS, 20, "test_a_leak")
    assert recs["test_after.py::test_a_leak"]["diagnosis"], recs


ASYNC_TESTS = '''
import asyncio

import pytest

_KEPT = []


@pytest.mark.parametrize("n", range(30))
async def test_clean(n):
    await asyncio.sleep(0)
    assert n >= 0


async def test_leaky():
    await asyncio.sleep(0)
    _KEPT.append([])
'''


# From 3.14 on, pytest-asyncio warns in every async test (it gets and
# sets the deprecated event loop policy in a catch_warnings() block that
# ignores the warning): the C warnings module kept that block's copy of
# the filters, with the two pytest adds to each test's list, until the
# next test's first warning freed them in its reported run (two blocks
# fewer).  Settling points it back at warnings.filters (_settle.py).
@pytest.mark.async_plugins
@pytest.mark.skipif(not RUNS_ONCE,
                    reason="clean tests run once from 3.11 on (debug "
                    "builds: 3.11 only)")
def test_async_tests_run_once_as_often_as_functions(pytester, read_report):
    """pytest-asyncio's item names its event loop runner fixture in its
    first setup: made before the reported run (neighbours.py), a clean
    async test's reported run grows nothing, as a function's."""
    pytest.importorskip("pytest_asyncio")
    pytester.makepyfile(test_async=ASYNC_TESTS)
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "--leaks-diagnose=off",
        "-p", "no:randomly", "-p", "no:anyio", "-p", "no:trio",
        "-o", "asyncio_mode=auto",
        "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=30, failed=1)
    _, recs = read_report()
    assert recs["test_async.py::test_leaky"]["verdict"] == "leak"
    clean = [rec for test_id, rec in recs.items() if "clean" in test_id]
    assert all(rec["verdict"] == "clean" for rec in clean), clean
    # Past the first, which sets the loop's machinery up for the session.
    missed = [rec for rec in clean[1:] if rec["test_runs"] != 1]
    assert len(missed) <= 1, missed


PACKAGE_TESTS = "".join(f'''

def test_{n}():
    assert [{n}] * 2 == [{n}, {n}]
''' for n in range(3))

# A package's __init__.py with xunit module functions: pytest's setup of
# the package calls them, in the first test's setup phase as before.
XUNIT_INIT = '''
import os


def setup_module():
    with open(os.environ["XUNIT_LOG"], "a") as f:
        f.write("setup\\n")


def teardown_module():
    with open(os.environ["XUNIT_LOG"], "a") as f:
        f.write("teardown\\n")
'''


@pytest.mark.skipif(not RUNS_ONCE, reason="clean tests run once from 3.11 "
                    "on, and on the 3.11 debug build")
def test_the_first_test_of_a_package_runs_once(pytester, read_report,
                                               monkeypatch):
    """pytest sets a package up in the setup phase of its first test
    (importing its __init__.py, imported already by its test modules):
    done before the reported run when it calls nothing, that test's run
    grows nothing, as the first of a plain folder's.  A package whose
    __init__.py defines setup_module/teardown_module is set up by pytest,
    each called once."""
    names = [f"pkg{n}" for n in range(5)]
    for name in names:
        pytester.mkpydir(name)
        pytester.makepyfile(**{f"{name}/test_{name}": PACKAGE_TESTS})
    pytester.mkpydir("xunit").joinpath("__init__.py").write_text(XUNIT_INIT)
    pytester.makepyfile(**{"xunit/test_xunit": PACKAGE_TESTS})
    log = pytester.path / "xunit.log"
    monkeypatch.setenv("XUNIT_LOG", str(log))
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-p", "no:randomly")
    result.assert_outcomes(passed=18)
    _, recs = read_report()
    assert all(rec["verdict"] == "clean" for rec in recs.values()), recs
    # Past the session's first package, and but for one run that meets
    # what is filled once a session (see above).
    firsts = [recs[f"{name}/test_{name}.py::test_0"] for name in names[1:]]
    missed = [rec for rec in firsts if not rec["warmup_measured"]]
    assert len(missed) <= 1, missed
    assert log.read_text() == "setup\nteardown\n"
