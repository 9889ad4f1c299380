"""Native heap growth is judged by default: memory no Python probe sees (a
forgotten malloc(), a buffer above pymalloc's limit that grows with no new
object) fails the test without probes= or --leaks-probes, and the same code
that frees what it takes passes."""

import ctypes.util

import pytest

from plugin_helpers import install_plugin, run_with

NATIVE = '''
import ctypes
import ctypes.util

import pytest

libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
_BUFFER = bytearray()

def checksum(data, keep):
    block = libc.malloc(64 * 1024)     # a C function's scratch buffer
    ctypes.memset(block, 1, 64 * 1024)
    if not keep:
        libc.free(block)               # the twin frees it
    return sum(data)

@pytest.mark.noleak
def test_malloc_forgotten():
    checksum(b"abc", keep=True)

@pytest.mark.noleak
def test_malloc_freed():
    checksum(b"abc", keep=False)

@pytest.mark.noleak
def test_buffer_grows():
    _BUFFER.extend(b"x" * 4096)         # no new object: bytes above 512

@pytest.mark.noleak
def test_buffer_reused():
    _BUFFER.clear()
    _BUFFER.extend(b"x" * 4096)
'''


pytestmark = pytest.mark.skipif(
    ctypes.util.find_library("c") is None, reason="needs the C library")


@pytest.mark.parametrize("how", ["marker", "--leaks"])
def test_native_leaks_fail_with_the_default_probes(pytester, read_report,
                                                   how):
    pytester.makepyfile(test_native=NATIVE)
    args = ["-p", "no:cacheprovider", "--leaks-report=r.json"]
    if how == "--leaks":
        pytester.makeconftest("")
        args.append("--leaks")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 1, result.stdout.str()
    _, recs = read_report()
    verdicts = {tid.split("::")[1]: rec["verdict"] for tid, rec in recs.items()}
    assert verdicts == {"test_malloc_forgotten": "leak",
                        "test_malloc_freed": "clean",
                        "test_buffer_grows": "leak",
                        "test_buffer_reused": "clean"}, result.stdout.str()
    malloc = recs["test_native.py::test_malloc_forgotten"]
    assert "native_bytes" in malloc["leaking"], malloc
    # Every measured run grew by at least the block it kept.
    assert all(d >= 64 * 1024 for d in malloc["deltas"]["native_bytes"]), \
        malloc
    result.stdout.fnmatch_lines(["*test_malloc_forgotten*native_bytes*"])


def test_a_malloc_through_ctypes_names_its_python_line(pytester,
                                                       read_report):
    # memray never sees ctypes' malloc (a pointer from dlsym()): the
    # failure and the report name the Python line that made the call.
    pytester.makepyfile(test_native=NATIVE)
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--leaks-report=r.json",
        "-k", "test_malloc_forgotten")
    assert result.ret == 1, result.stdout.str()
    source = (pytester.path / "test_native.py").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1)
                if "block = libc.malloc(64 * 1024)" in text)
    _, recs = read_report()
    lines = recs["test_native.py::test_malloc_forgotten"]["diagnosis"][
        "heap_lines"]
    assert lines and lines[0]["line"] == line, lines
    assert lines[0]["function"] == "checksum"
    assert lines[0]["file"].endswith("test_native.py")
    assert lines[0]["bytes"] >= 64 * 1024
    result.stdout.fnmatch_lines([
        "Python lines that ran when the C heap grew and kept it*",
        f"  test_native.py:{line} checksum: +* bytes"])


# An installed pytest plugin whose hook runs many lines in every test's call
# phase (as pytest-timeout's, pytest-asyncio's and hypothesis' hooks do).
BUSY_PLUGIN = '''
import pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    total = 0
    for i in range(15000):
        total += i
    return (yield)
'''


def test_an_installed_plugins_lines_are_the_harness(pytester, read_report):
    # The line tracer of a C heap's growth reads the heap at every line it
    # traces, and gives up past 20,000 events a run: an installed plugin's
    # hook (30,000 line events here) is the harness's, not traced, so the
    # test's line is still found, and the plugin's own lines never named.
    folder = pytester.mkdir("installed")
    install_plugin(folder, "pytest_busy", BUSY_PLUGIN, "pytest-busy", "1.0",
                   "busy")
    pytester.makepyfile(test_native=NATIVE)
    result = run_with(pytester, folder, "-p", "no:cacheprovider",
                      "--leaks-report=r.json", "-k", "test_malloc_forgotten")
    assert result.ret == 1, result.stdout.str()
    _, recs = read_report()
    diagnosis = recs["test_native.py::test_malloc_forgotten"]["diagnosis"]
    result.stdout.fnmatch_lines(["plugins:*busy-1.0*"])
    assert not any("trace events" in note for note in diagnosis["notes"]), \
        diagnosis["notes"]
    lines = diagnosis["heap_lines"]
    assert lines and lines[0]["function"] == "checksum", lines
    assert not any(entry["file"].endswith("pytest_busy.py")
                   for entry in lines), lines
