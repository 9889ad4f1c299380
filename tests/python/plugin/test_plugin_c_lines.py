"""`pytest --leaks`, default probes, over the example C extension
(examples/ext): each leak from C fails with the extension's file.c:line
of the allocation, in the failure text and in the JSON report; the fixed
twins pass.  Without memray, or with memray busy, the verdicts stand and
one line says why there are no C lines.

memray is the optional extra leakcheck[native]; ./scripts/test installs
it, and there these tests must not skip (LEAKCHECK_TESTS_NEED_MEMRAY)."""

import os
import pathlib
import shutil

import pytest

from leakcheck._evidence import native

try:
    import memray
except ImportError:
    memray = None

if memray is None and os.environ.get("LEAKCHECK_TESTS_NEED_MEMRAY"):
    raise ImportError("memray is needed here (pip install 'leakcheck[native]')")
needs_memray = pytest.mark.skipif(memray is None,
                                  reason="memray is not installed")

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "ext"
LEAKY_C = EXAMPLE / "leaky.c"


def c_line(marker):
    lines = LEAKY_C.read_text().splitlines()
    hits = [i for i, text in enumerate(lines, 1) if marker in text]
    assert len(hits) == 1, marker
    return hits[0]


# test -> (the C line of the allocation that leaks, its function)
LEAKS = {
    "test_squares_rejects_non_int": (c_line("result = PyList_New(n);"),
                                     "squares"),           # an object
    "test_checksum": (c_line("copy = PyMem_Malloc("), "checksum"),
    "test_histogram": (c_line("table = calloc("), "histogram"),
    "test_hexlify": (c_line("scratch = PyBytes_FromStringAndSize("),
                     "hexlify"),
}


@pytest.fixture
def example(pytester):
    """The example's sources and tests, copied into the pytester folder;
    its conftest builds the modules with -g."""
    for name in ("conftest.py", "leaky.c", "fixed.c", "test_ext_example.py"):
        shutil.copy(EXAMPLE / name, pytester.path / name)
    # What is tested is the C line a diagnosis finds, not its time budget
    # (2 s at the least): a debug build on a loaded machine can spend that
    # before memray's run.
    with open(pytester.path / "conftest.py", "a") as f:
        f.write("\nimport pytest_leakcheck.settings\n"
                "pytest_leakcheck.settings.DIAGNOSE_FLOOR = 60.0\n")
    return pytester.path


def run(pytester, *args):
    return pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "-p", "no:cacheprovider",
        *args)


@needs_memray
def test_each_c_leak_fails_at_its_c_line_and_its_twin_passes(
        pytester, example, read_report, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    scratch = example / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    result = run(pytester)
    assert result.ret == 1
    out = result.stdout.str()
    _, recs = read_report()
    for rec_id, rec in recs.items():
        if "[fixed]" in rec_id or "test_squares[" in rec_id:
            assert rec["verdict"] == "clean", rec
    for test, (line, function) in LEAKS.items():
        rec = recs[f"test_ext_example.py::{test}[leaky]"]
        assert rec["verdict"] == "leak", rec
        sites = rec["diagnosis"]["native"]
        site = next(s for s in sites if s["line"] == line)
        assert site["file"] == str(example / "leaky.c")
        assert site["function"] == function
        assert site["bytes"] > 0 and site["blocks"] >= 1
        assert any(os.path.basename(path).startswith("leaky.")
                   for path in site["objects"])
        assert site["caller"]["file"] == str(example / "test_ext_example.py")
        assert site["caller"]["function"] == test
        assert f"leaky.c:{line} {function}() in leaky." in out
    # Nothing of memray's left in the temporary folder.
    assert not [name for name in os.listdir(scratch)
                if name.startswith("leakcheck-memray-")]


def test_without_memray_the_verdicts_stand_and_say_how(pytester, example,
                                                       read_report):
    pytester.makeconftest(
        "import sys\nsys.modules['memray'] = None   # import memray fails\n"
        + (example / "conftest.py").read_text())
    result = run(pytester, "-k", "checksum or histogram")
    result.assert_outcomes(passed=2, failed=2)
    _, recs = read_report()
    note = native.NOTE_NO_MEMRAY.format(reason="import memray failed")
    for test in ("test_checksum", "test_histogram"):
        rec = recs[f"test_ext_example.py::{test}[leaky]"]
        assert rec["verdict"] == "leak" and rec["diagnosis"]["native"] == []
        assert note in rec["diagnosis"]["notes"]
    assert result.stdout.str().count(f"note: {note}") == 2


@needs_memray
def test_memray_busy_the_verdicts_stand_and_say_why(pytester, example,
                                                    read_report):
    # As under `pytest --memray`: a tracker runs for the whole session.
    pytester.makeconftest((example / "conftest.py").read_text() + '''

def pytest_configure(config):
    import memray
    config._theirs = memray.Tracker(str(config.rootpath / "theirs.bin"))
    config._theirs.__enter__()


def pytest_unconfigure(config):
    config._theirs.__exit__(None, None, None)
''')
    # (Only the leaky test: on a debug build, a tracker running for the
    # whole session makes every test grow refs.)
    result = run(pytester, "-k", "checksum and leaky")
    result.assert_outcomes(failed=1)
    _, recs = read_report()
    rec = recs["test_ext_example.py::test_checksum[leaky]"]
    assert rec["verdict"] == "leak" and rec["diagnosis"]["native"] == []
    notes = [n for n in rec["diagnosis"]["notes"] if "no C lines" in n]
    assert len(notes) == 1 and "memray would not start" in notes[0]
    # The allocation lines from tracemalloc are still there.
    assert rec["diagnosis"]["allocations"]


@needs_memray
def test_built_without_debug_info_the_function_and_how_to_get_lines(
        pytester, example, read_report):
    conftest = (example / "conftest.py").read_text()
    assert '"-O1", "-g",' in conftest
    pytester.makeconftest(conftest.replace('"-O1", "-g",', '"-O1",')
                          .replace('"leakcheck-examples-', '"nodebug-'))
    result = run(pytester, "-k", "histogram")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # Both modules define histogram(): without debug information, both are
    # named.
    line = next(text for text in out.splitlines()
                if text.startswith("  histogram() in "))
    assert "leaky." in line and "fixed." in line and " or " in line
    assert "leaky.c:" not in out
    _, recs = read_report()
    rec = recs["test_ext_example.py::test_histogram[leaky]"]
    site = rec["diagnosis"]["native"][0]
    assert (site["file"], site["line"], site["function"]) == \
        (None, None, "histogram")
    assert any("built with -g, the C lines show" in note
               for note in rec["diagnosis"]["notes"])


@needs_memray
def test_a_test_that_forks_and_a_thread_that_allocates(pytester,
                                                      read_report):
    pytester.makepyfile(test_fork='''
import os
import threading

_KEPT = []


def test_forks():
    _KEPT.append(bytearray(5000))
    pid = os.fork()
    if pid == 0:
        _KEPT.append(bytearray(5000))
        os._exit(0)
    os.waitpid(pid, 0)


def test_thread_allocates():
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            [bytes(100) for _ in range(50)]

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        _KEPT.append(bytearray(5000))
    finally:
        stop.set()
        thread.join()
''')
    result = run(pytester)
    result.assert_outcomes(failed=2)
    assert result.stdout.str().count("short test summary") == 1
    _, recs = read_report()
    assert {r["verdict"] for r in recs.values()} == {"leak"}
