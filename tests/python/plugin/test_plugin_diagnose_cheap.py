"""--leaks-diagnose=cheap over tests/python/leakylib's extension: a PyMem
block lost by C code is named at the test's Python line with no memray
re-run (a note says the C line was left out), where the default names
its C line; a malloc() only the C heap sees still gets its C line.

memray is the optional extra leakcheck[native]; ./scripts/test installs
it, and there these tests must not skip (LEAKCHECK_TESTS_NEED_MEMRAY)."""

import importlib.util
import os
import pathlib

import pytest

from leakcheck._evidence.native import NOTE_CHEAP

try:
    import memray
except ImportError:
    memray = None

if memray is None and os.environ.get("LEAKCHECK_TESTS_NEED_MEMRAY"):
    raise ImportError("memray is needed here (pip install 'leakcheck[native]')")
pytestmark = pytest.mark.skipif(memray is None,
                                reason="memray is not installed")

TESTS = pathlib.Path(__file__).resolve().parents[1]

TEST_FILE = '''
import importlib.util

spec = importlib.util.spec_from_file_location("leakylib", {path!r})
leakylib = importlib.util.module_from_spec(spec)
spec.loader.exec_module(leakylib)


def test_pymem():
    leakylib.leak_pymem(3000)


def test_malloc():
    leakylib.leak_native(5000)
'''
# The line of the call, in the file pytester writes (TEST_FILE stripped).
PYMEM_LINE = TEST_FILE.strip().splitlines().index(
    "    leakylib.leak_pymem(3000)") + 1


def _build_leakylib():
    """tests/python/api/conftest.py's build of leakylib (with -g)."""
    spec = importlib.util.spec_from_file_location(
        "leakylib_build", TESTS / "api" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_leakylib()


@pytest.mark.parametrize("mode", ["cheap", "full"])
def test_cheap_runs_memray_only_for_the_c_heap_alone(pytester, read_report,
                                                      mode):
    pytester.makepyfile(test_ext=TEST_FILE.format(path=_build_leakylib()))
    result = pytester.runpytest_subprocess(
        "--leaks", f"--leaks-diagnose={mode}", "--leaks-report=r.json")
    result.assert_outcomes(failed=2)
    _, tests = read_report()
    pymem = tests["test_ext.py::test_pymem"]["diagnosis"]
    malloc = tests["test_ext.py::test_malloc"]["diagnosis"]
    assert [s["function"] for s in malloc["native"]] == ["leak_native"]
    assert NOTE_CHEAP not in malloc["notes"]
    assert any(a["line"] == PYMEM_LINE for a in pymem["allocations"]), pymem
    if mode == "cheap":
        assert pymem["native"] == []
        assert NOTE_CHEAP in pymem["notes"]
        result.stdout.fnmatch_lines([f"note: {NOTE_CHEAP}"])
    else:
        assert [s["function"] for s in pymem["native"]] == ["leak_pymem"]
        assert NOTE_CHEAP not in pymem["notes"]
