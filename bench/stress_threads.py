"""Eight threads allocate and free (small and large blocks, raw buffers,
dicts, lists, strings) while the main thread takes snapshots as fast
as it can; a scope around all of it must come out clean: what the threads
allocated they freed, and the allocator hook's per-thread counts and its
table of blocks must still add up after that contention.

    python bench/stress_threads.py [--seconds 30] [--threads 8]

Prints the snapshots taken and the scope's deltas; exits 1 when the scope
leaked, 0 otherwise.  PYTHONTRACEMALLOC=1 runs the hook in its table mode
(tracemalloc installed first), where py_bytes is not judged: that mode
reads a replaced block born before the hook as growth once.  The test suite runs it for 2 seconds in
both modes (tests/python/api/test_threads.py)."""

import argparse
import itertools
import os
import sys
import threading
import time
import tracemalloc

import leakcheck

PROBES = ["blocks", "py_bytes", "py_allocs", "objects", "garbage", "threads"]


def churn(stop, seed):
    """Allocates and frees until told to stop; holds at most a few dozen
    objects at a time."""
    held = []
    n = seed
    while not stop.is_set():
        n = (n * 1103515245 + 12345) & 0x7FFFFFFF
        kind = n % 6
        if kind == 0:
            held.append(bytes(n % 2000))            # small or large
        elif kind == 1:
            held.append(bytearray(4096 + n % 8192))  # raw-sized buffer
        elif kind == 2:
            held.append({i: str(i) for i in range(n % 40)})
        elif kind == 3:
            held.append([object() for _ in range(n % 30)])
        elif kind == 4:
            held.append(str(n) * (n % 300))
        if len(held) > 40:
            del held[: n % 40]
    held.clear()


def os_threads():
    return len(os.listdir("/proc/self/task"))


def run(seconds, count, snapshots):
    """`count` threads churn for `seconds` while this one takes snapshots,
    counted by next(snapshots): an itertools.count holds its number in C,
    where an int above 256 would be one more object for the scope."""
    stop = threading.Event()
    workers = [threading.Thread(target=churn, args=(stop, i + 1),
                                name=f"churn-{i}") for i in range(count)]
    for t in workers:
        t.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        leakcheck.snapshot(PROBES)
        next(snapshots)
    stop.set()
    for t in workers:
        t.join()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    before = os_threads()
    snapshots = itertools.count()
    run(1.0, args.threads, snapshots)   # what a first thread start allocates
    deadline = time.monotonic() + 2     # their thread states go after join()
    while os_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    probes = PROBES
    if tracemalloc.is_tracing():
        # The hook's table mode knows only the sizes of blocks it saw
        # born: a block born before it that a thread frees and replaces
        # reads as growth once (README), so py_bytes is not judged here.
        probes = [p for p in PROBES if p != "py_bytes"]
        print("tracemalloc was installed first: py_bytes not judged")
    snapshots = itertools.count()
    with leakcheck.scope(probes=probes) as outer:
        run(args.seconds, args.threads, snapshots)
    snapshots = next(snapshots)
    print(f"{args.threads} threads, {args.seconds:g} s: {snapshots} "
          f"snapshots; scope deltas {outer.deltas}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except leakcheck.LeakError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
