"""What importing leakcheck costs, in CPU time: each measurement a fresh
process that first imports what a configuration holds, then reads
time.process_time() around the one import measured and prints the
difference; round after round, the median per configuration.

    python bench/bench_import.py [--rounds 15] [--python PATH]
                                 [--against PATH]

Configurations (what is imported first, then what is measured):

    bare      nothing; import leakcheck
    pytest    pytest and the modules of its own plugins; import
              pytest_leakcheck.plugin (what every pytest session with
              leakcheck installed imports, --leaks or not)
    heavy     pytest, asyncio, email, decimal, unittest, http.client and
              hypothesis when installed (a larger heap); import leakcheck

--against PATH measures each also with another interpreter (another build
of leakcheck installed), in the same rounds.
"""

import argparse
import statistics
import subprocess
import sys
import tempfile

PYTEST = ("import pytest, pkgutil, importlib, _pytest\n"
          "for m in pkgutil.iter_modules(_pytest.__path__):\n"
          "    try:\n"
          "        importlib.import_module('_pytest.' + m.name)\n"
          "    except Exception:\n"
          "        pass\n")
HEAVY = ("import pytest, asyncio, email, decimal, unittest, http.client\n"
         "try:\n"
         "    import hypothesis\n"
         "except ImportError:\n"
         "    pass\n")
CONFIGS = {
    "bare": ("", "import leakcheck"),
    "pytest": (PYTEST, "import pytest_leakcheck.plugin"),
    "heavy": (HEAVY, "import leakcheck"),
}
TIMED = "import time\n_t = time.process_time()\n{stmt}\n" \
        "print(time.process_time() - _t)\n"


def cpu(python, setup, stmt, cwd):
    """The CPU seconds of `stmt` in a fresh process, after `setup`."""
    proc = subprocess.run([python, "-c", setup + TIMED.format(stmt=stmt)],
                          cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"bench_import: {python}: {stmt} failed:\n{proc.stderr}")
    return float(proc.stdout.split()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--against", metavar="PATH")
    args = p.parse_args(argv)
    runs = {}
    pythons = [("", args.python)]
    if args.against:
        pythons.append((" (against)", args.against))
    # Not from the source tree: its leakcheck has no built engine.
    with tempfile.TemporaryDirectory(prefix="leakcheck-import-") as cwd:
        for _ in range(args.rounds):
            for name, (setup, stmt) in CONFIGS.items():
                for suffix, python in pythons:
                    runs.setdefault(name + suffix, []).append(
                        cpu(python, setup, stmt, cwd))
    print(f"{args.python}: {args.rounds} rounds, median CPU ms of the "
          f"import measured")
    for name, values in runs.items():
        print(f"  {name:18s} {statistics.median(values) * 1e3:7.1f}")
    if args.against:
        print(f"against: {args.against}")


if __name__ == "__main__":
    main()
