"""tracemalloc started after leakcheck's allocator hook keeps a trace record
per block it traces, allocated and freed through the raw domain: the
probes must not read those records as the code's growth.  Left running,
it is gated at the next snapshot; started and stopped between two
snapshots, a record dropped inside the free or resize of its block
counts as its allocation did.  What remains per start and stop is
CPython's own: the few tracebacks tracemalloc.stop() keeps (3.10 to
3.12), one per allocation site, never one per block.

Each case runs in a fresh interpreter, under the interpreter's own
allocators and under PYTHONMALLOC=malloc."""

import json
import os
import subprocess
import sys

import pytest

BLOCKS = 2000

SCRIPT = r"""
import json, sys, tracemalloc
import leakcheck

BLOCKS = int(sys.argv[1])
PROBES = ["py_allocs", "py_bytes"]

def work():
    blocks = [bytearray(1000) for _ in range(BLOCKS)]   # over 512 bytes
    for block in blocks:
        block.extend(bytes(3000))                       # resized, moved
    del blocks

def cycle():
    tracemalloc.start()
    work()
    tracemalloc.stop()

def grown(run):
    run()
    before = leakcheck.snapshot(probes=PROBES)
    run()
    after = leakcheck.snapshot(probes=PROBES)
    return {name: after[name] - before[name] for name in PROBES}

out = {"cycle": grown(cycle)}
tracemalloc.start()
leakcheck.snapshot(probes=PROBES)       # the gate goes on here
out["running"] = grown(work)
tracemalloc.stop()
print(json.dumps(out))
"""


@pytest.mark.parametrize("allocator", [None, "malloc"])
def test_tracemallocs_records_are_not_growth(tmp_path, allocator):
    env = dict(os.environ)
    env.pop("PYTHONMALLOC", None)
    env.pop("PYTHONTRACEMALLOC", None)
    if allocator:
        env["PYTHONMALLOC"] = allocator
    script = tmp_path / "records.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(BLOCKS)],
                          env=env, capture_output=True, text=True, check=True)
    out = json.loads(done.stdout)
    # Far under a record per block: only what CPython itself keeps.
    assert out["cycle"]["py_allocs"] < BLOCKS // 20
    assert out["running"]["py_allocs"] < BLOCKS // 20
