"""A cheap diagnosis (diagnose(..., cheap=True), the plugin's
--leaks-diagnose=cheap) does less: memray re-runs the code only when the
C heap alone grew, and the lines tracemalloc gives keep one frame.

memray is the optional extra leakcheck[native]; ./scripts/test installs
it, and there these tests must not skip (LEAKCHECK_TESTS_NEED_MEMRAY)."""

import os

import pytest

import leakcheck
from leakcheck._evidence.native import NOTE_CHEAP, NOTE_NO_MEMRAY

try:
    import memray
except ImportError:
    memray = None

if memray is None and os.environ.get("LEAKCHECK_TESTS_NEED_MEMRAY"):
    raise ImportError("memray is needed here (pip install 'leakcheck[native]')")
needs_memray = pytest.mark.skipif(memray is None,
                                  reason="memray is not installed")

PYMEM_PROBES = ["blocks", "py_allocs", "py_bytes"]


def leak_pymem(leaky):
    leaky.leak_pymem(3000)                          # PYMEM_CALL


def leak_native(leaky):
    leaky.leak_native(5000)


PYMEM_CALL = leak_pymem.__code__.co_firstlineno + 1


@needs_memray
def test_cheap_leaves_out_memray_when_python_probes_grew(leaky):
    full = leakcheck.diagnose(lambda: leak_pymem(leaky), PYMEM_PROBES)
    assert [s["function"] for s in full.native] == ["leak_pymem"]
    assert NOTE_CHEAP not in full.notes

    cheap = leakcheck.diagnose(lambda: leak_pymem(leaky), PYMEM_PROBES,
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
    monkeypatch.setitem(__import__("sys").modules, "memray", None)
    cheap = leakcheck.diagnose(lambda: leak_pymem(leaky), PYMEM_PROBES,
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
