"""What a thread run before the process's first reading leaves to that
reading: the native_bytes delta around a joined C thread of a 64 KiB stack
(pthread_create through ctypes, its body sched_yield: no Python runs in
it), in three snapshot pairs, each in a fresh interpreter, in two orders:

    warmed first   the thread runs once, then the three pairs (the first
                   pair's first snapshot is the engine's first heap
                   reading: its settling runs there)
    engine first   one snapshot first, then the thread once, then the pairs

    python bench/first_thread.py [--python PATH]

--python runs another interpreter (its environment needs leakcheck
installed: an older build, to compare).  Printed: each order's three
deltas in bytes.  A clean thread reads 0 in every pair of either order;
the engine's own settling evicting the thread's cached stack reads as
growth in the first pair of "warmed first" (glibc then gives the thread a
new stack and TLS vector).
"""

import argparse
import subprocess
import sys

PROGRAM = '''\
import ctypes
import sys

import leakcheck

libc = ctypes.CDLL(None, use_errno=True)
start = ctypes.cast(libc.sched_yield, ctypes.c_void_p)


def run_thread():
    attr = ctypes.create_string_buffer(64)      # pthread_attr_t: 56 bytes
    thread = ctypes.c_ulong()
    assert libc.pthread_attr_init(attr) == 0
    assert libc.pthread_attr_setstacksize(attr, ctypes.c_size_t(64 * 1024)) == 0
    assert libc.pthread_create(ctypes.byref(thread), attr, start, None) == 0
    libc.pthread_attr_destroy(attr)
    assert libc.pthread_join(thread, None) == 0


if sys.argv[1] == "engine":
    leakcheck.snapshot("native_bytes")
run_thread()
deltas = []
for _ in range(3):
    before = leakcheck.snapshot("native_bytes")
    run_thread()
    deltas.append((leakcheck.snapshot("native_bytes") - before)["native_bytes"])
print(" ".join(f"{d:+d}" for d in deltas))
'''

ORDERS = (("warmed first", "warmed"), ("engine first", "engine"))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    args = p.parse_args(argv)
    print(f"native_bytes around a joined 64 KiB thread, three pairs "
          f"({args.python})")
    for label, order in ORDERS:
        proc = subprocess.run([args.python, "-c", PROGRAM, order],
                              capture_output=True, text=True, timeout=120,
                              cwd="/")
        if proc.returncode != 0:
            sys.exit(f"first_thread: {label} failed:\n{proc.stderr}")
        print(f"  {label:13s} {proc.stdout.strip()}")


if __name__ == "__main__":
    main()
