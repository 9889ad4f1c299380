"""Eight threads allocate and free (small and large blocks, raw buffers,
dicts, lists, strings) while the main thread takes snapshots as fast
as it can; a scope around all of it must come out clean: what the threads
allocated they freed, and the allocator hook's per-thread counts and its
table of blocks must still add up after that contention.

    python bench/stress_threads.py [--seconds 30] [--threads 8]

Prints the snapshots taken and the scope's deltas; exits 1 when the scope
leaked, 0 otherwise.  PYTHONTRACEMALLOC=1 runs the hook in its table mode
(tracemalloc installed first).  The test suite runs it for 2 seconds in
both modes (tests/python/api/test_threads.py)."""

import argparse
import sys
import threading
import time

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


def run(seconds, count):
    stop = threading.Event()
    workers = [threading.Thread(target=churn, args=(stop, i + 1),
                                name=f"churn-{i}") for i in range(count)]
    for t in workers:
        t.start()
    snapshots = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        leakcheck.snapshot(PROBES)
        snapshots += 1
    stop.set()
    for t in workers:
        t.join()
    return snapshots


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    run(1.0, args.threads)          # what a first thread start allocates
    with leakcheck.scope(probes=PROBES) as outer:
        snapshots = run(args.seconds, args.threads)
    print(f"{args.threads} threads, {args.seconds:g} s: {snapshots} "
          f"snapshots; scope deltas {outer.deltas}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except leakcheck.LeakError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
