"""What glibc counts of the blocks it serves with mmap, against what the
process maps: mallinfo2's hblkhd (their total) and hblks (their number),
the process's virtual size, RSS and number of mappings, and leakcheck's
native_bytes reading, around a loop that resizes such blocks.

    python bench/glibc_mapped.py [--calls N] [--read N] [--work DIR]

1. `--calls` rounds of malloc, realloc (to another size) and free of a
   36 MiB block (above glibc's largest mmap threshold, so always mapped
   and resized with mremap).
2. When bench/bench_suite.py has built regex in DIR for this Python:
   `--calls` matches of regex's `(x)*` on a 50,000-character string
   (its matcher resizes large buffers).

Where glibc counts right, hblkhd is back where it was after each loop; a
glibc that miscounts (2.43 adds 16 bytes a resize, for good) moves it
while the mappings, the virtual size and the RSS stay.  native_bytes is
then read around each of `--read` more calls, as a series reads each run,
and the changes summed: 0 either way.  (Read once around all `--calls`,
it would keep the whole pages of the miscount: leakcheck rounds the
change between two readings down to whole pages, which is exact while
fewer than 256 such resizes happen between them.)
"""

import argparse
import ctypes
import glob
import os
import sys

import leakcheck
from bare_loops import _MallInfo2      # bench/ is on sys.path: the script's

LIBC = ctypes.CDLL(None)
LIBC.mallinfo2.restype = _MallInfo2
LIBC.malloc.restype = ctypes.c_void_p
LIBC.malloc.argtypes = [ctypes.c_size_t]
LIBC.realloc.restype = ctypes.c_void_p
LIBC.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
LIBC.free.argtypes = [ctypes.c_void_p]
LIBC.gnu_get_libc_version.restype = ctypes.c_char_p

MAPPED = 36 * 1024 * 1024
FIELDS = ("hblkhd", "hblks", "virtual", "rss", "mappings")


def _state():
    info = LIBC.mallinfo2()
    with open("/proc/self/statm") as f:
        size, rss = (int(n) for n in f.read().split()[:2])
    with open("/proc/self/maps") as f:
        maps = sum(1 for _ in f)
    page = os.sysconf("SC_PAGESIZE")
    return (info.hblkhd, info.hblks, size * page, rss * page, maps)


def _measure(name, body, calls, reads):
    for _ in range(10):                     # first use of everything
        body()
    start = _state()
    for _ in range(calls):
        body()
    end = _state()
    moved = ", ".join(f"{field} {b - a:+,}"
                      for field, a, b in zip(FIELDS, start, end))
    read = 0
    for _ in range(reads):
        before = leakcheck.snapshot(["native_bytes"])
        body()
        read += (leakcheck.snapshot(["native_bytes"]) - before)[
            "native_bytes"]
    print(f"{name}: {calls:,} calls moved {moved}; native_bytes read "
          f"around each of {reads:,} more calls, summed: {read:+,}")


def _resize():
    p = LIBC.malloc(MAPPED)
    p = LIBC.realloc(p, MAPPED + 5 * 4096)
    LIBC.free(p)


def _regex_match(work):
    folders = sorted(d for d in glob.glob(os.path.join(work, "regex-*"))
                     if os.path.isdir(d))
    tag = sys.implementation.cache_tag
    if not folders or not glob.glob(os.path.join(
            folders[-1], "regex", f"_regex.{tag}*.so")):
        return None
    sys.path.insert(0, folders[-1])
    import regex
    pattern = regex.compile("(x)*")
    subject = "x" * 50000
    return lambda: pattern.match(subject)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--read", type=int, default=200)
    p.add_argument("--work", default=os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "leakcheck-bench-suites"))
    args = p.parse_args(argv)
    print(f"python {sys.version.split()[0]}, glibc "
          f"{LIBC.gnu_get_libc_version().decode()}")
    _measure("malloc, realloc and free of a 36 MiB block", _resize,
             args.calls, args.read)
    match = _regex_match(args.work)
    if match is None:
        print("regex: not built for this Python in "
              f"{args.work} (run bench/bench_suite.py regex with it)")
    else:
        _measure("regex (x)* on 50,000 characters", match, args.calls,
                 args.read)


if __name__ == "__main__":
    main()
