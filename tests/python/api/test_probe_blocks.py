"""The blocks probe read from the allocator hook's count: after the snapshot
that learns the offset, every reading must equal what a walk of
pymalloc's pools (sys.getallocatedblocks) counts at the same instant,
whatever the code did with blocks meanwhile."""

import subprocess
import sys
import threading
import tracemalloc

import pytest

import leakcheck
from leakcheck import _core

PROBES = ["blocks", "py_bytes", "py_allocs"]


def counted_and_walked():
    leakcheck.snapshot(probes=PROBES)
    found = _core.blocks_check()
    if found is None:
        pytest.skip("the allocator hook does not count pymalloc's blocks "
                    "here (pymalloc does not serve the mem and object "
                    "domains, or a hook runs under ours)")
    return found


def small_and_large():
    kept = [[i] for i in range(5000)]            # small blocks
    kept += [b"x" * n for n in (600, 4096, 70000)]  # chunks over 512 bytes
    kept += [{str(i): i for i in range(n)} for n in (3, 50, 2000)]
    del kept[::3]
    return kept


def resizes():
    """Blocks resized within pymalloc, from small to a chunk, from a chunk
    back to small, and freed at each size."""
    out = []
    for start, end in ((8, 400), (8, 9000), (9000, 16), (300, 0)):
        b = bytearray(start)
        b.extend(bytes(max(end - start, 0)))
        del b[end:]
        out.append(bytes(b))
        buf = [0] * (start // 8)
        buf.extend(range(end // 8))
        out.append(buf)
    return out


def test_counted_blocks_equal_the_walk():
    counted, walked = counted_and_walked()
    assert counted == walked
    kept = small_and_large()
    counted, walked = _core.blocks_check()
    assert counted == walked
    kept.append(resizes())
    del kept
    counted, walked = _core.blocks_check()
    assert counted == walked


def test_counted_blocks_equal_the_walk_across_threads():
    counted_and_walked()
    results = []

    def work():
        results.append(small_and_large())
        results.append(resizes())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counted, walked = _core.blocks_check()
    assert counted == walked
    results.clear()
    counted, walked = _core.blocks_check()
    assert counted == walked


def test_counted_blocks_after_tracemalloc_ran():
    counted_and_walked()
    tracemalloc.start(5)
    try:
        kept = small_and_large()
        leakcheck.snapshot(probes=PROBES)     # a gate over tracemalloc
        kept.append(resizes())
    finally:
        tracemalloc.stop()
    leakcheck.snapshot(probes=PROBES)
    leakcheck.snapshot(probes=PROBES)
    counted, walked = _core.blocks_check()
    assert counted == walked
    del kept
    counted, walked = _core.blocks_check()
    assert counted == walked


def test_a_snapshot_reads_blocks_as_the_walk_does():
    before = leakcheck.snapshot(probes=PROBES)
    counted_and_walked()
    kept = small_and_large()
    after = leakcheck.snapshot(probes=PROBES)
    counted, walked = _core.blocks_check()
    assert counted == walked
    assert after["blocks"] - before["blocks"] > 3000
    del kept


# Run in a process of its own: a callback registered before leakcheck is
# imported runs after leakcheck's own at the exit (atexit runs them last
# in, first out).
AT_EXIT = '''
import atexit

def after_leakcheck():
    from leakcheck import _core
    # 0: no domain has ours on top any more.  (Not blocks_check(): it
    # puts the hook back.)
    print("at exit, released again:", _core.release_hook())
    restored = _core.hook_restored()
    leakcheck.snapshot(probes=PROBES)
    print("put back:", _core.hook_restored() - restored)
    with leakcheck.scope(probes=["py_bytes", "py_allocs"]):
        pass
    print("a scope after it: passed")

atexit.register(after_leakcheck)
import leakcheck
from leakcheck import _core
PROBES = ["blocks", "py_bytes", "py_allocs"]
leakcheck.snapshot(probes=PROBES)
print("before the exit, counted:", _core.blocks_check() is not None)
'''


def test_the_hook_comes_off_at_exit_and_back_at_a_snapshot_after(tmp_path):
    """At the interpreter's exit leakcheck takes its allocator hook off the
    mem and object domains (their frees in the teardown would all go
    through it, counted for nobody): a callback that runs after leakcheck's
    finds none of its hooks on top there, and a snapshot there puts them
    back in both domains."""
    counted_and_walked()            # skips where the hook counts no blocks
    # Run elsewhere than the source tree, which holds no built _core.
    done = subprocess.run([sys.executable, "-c", AT_EXIT], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "before the exit, counted: True",
        "at exit, released again: 0",
        "put back: 2",
        "a scope after it: passed",
    ], done.stdout + done.stderr
