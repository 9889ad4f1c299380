"""What a diagnosis costs: leakcheck.diagnose() on a large heap that is
not frozen (the Python API inside a big process; the pytest plugin freezes
the heap first, which makes it cheaper), for a leak of PyMem blocks and for
a leak of lists from the test extension that tests/python/api builds.  Best
and worst of --rounds calls each.

    python bench/bench_diagnose.py [--objects N] [--rounds N]
    python bench/bench_diagnose.py --pytest [--rounds N]

Run it with the interpreter that has leakcheck installed; on a debug build
the second case also asks for refs, whose census is the costly one.

--pytest times the diagnoses the plugin makes in a pytest process over
the four leaks of examples/ext (with C lines when memray is installed),
each round in a fresh process: the first diagnosis of a process pays for
loading what memray needs to name C frames, the later ones do not.

    python bench/bench_diagnose.py --modes [--rounds N]

--modes gives the CPU time per leak of the plugin's diagnosis
(--leaks-diagnose=cheap and =full), with memray importable and with its
import refused, over small leaking tests of each kind: Python objects
kept, a C heap block lost by examples/ext's histogram() (malloc), PyMem
blocks lost by its checksum(), a file descriptor left open.  Each kind
runs --rounds times in one pytest process (fresh per mode and memray
setting); the first diagnosis of a process is given apart (it loads
what memray and tracemalloc need), the others as their median.
"""

import argparse
import gc
import importlib.util
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python", "api"))

import conftest                                       # noqa: E402
import leakcheck                                      # noqa: E402


def load_leakylib():
    spec = importlib.util.spec_from_file_location("leakylib",
                                                  conftest.build_leakylib())
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=200000,
                        help="extra objects on the heap (default 200000)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="diagnose() calls per case (default 3)")
    parser.add_argument("--pytest", action="store_true",
                        help="time the plugin's diagnoses in pytest processes")
    parser.add_argument("--modes", action="store_true",
                        help="CPU time per leak of cheap and full diagnoses")
    parser.add_argument("--pytest-child", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--modes-child", nargs=3, help=argparse.SUPPRESS,
                        metavar=("MODE", "MEMRAY", "FOLDER"))
    args = parser.parse_args(argv)
    if args.pytest_child:
        return pytest_child()
    if args.modes_child:
        return modes_child(*args.modes_child)
    if args.modes:
        return bench_modes(args.rounds)
    if args.pytest:
        return bench_pytest(args.rounds)
    leaky = load_leakylib()
    heap = [{"k": [i, str(i)]} for i in range(args.objects // 2)]
    debug = hasattr(sys, "gettotalrefcount")
    print(f"CPython {sys.version.split()[0]}"
          f"{' (debug build)' if debug else ''}, leakcheck "
          f"{leakcheck.__version__}, {len(gc.get_objects())} tracked objects")
    cases = [
        ("PyMem blocks: blocks, py_allocs, py_bytes",
         lambda: leaky.leak_pymem(2000), ["blocks", "py_allocs", "py_bytes"]),
        ("lists: " + ("refs, " if debug else "") + "blocks, py_allocs, objects",
         lambda: leaky.leak_new_list(3),
         (["refs"] if debug else []) + ["blocks", "py_allocs", "objects"]),
    ]
    for label, leak, probes in cases:
        times = []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            diagnosis = leakcheck.diagnose(leak, probes)
            times.append(time.perf_counter() - t0)
        top = diagnosis.allocations[0] if diagnosis.allocations else None
        where = (f"{os.path.basename(top['file'])}:{top['line']}"
                 if top else "no allocation found")
        print(f"  {label:<48} best {min(times):6.3f} s, worst "
              f"{max(times):6.3f} s  (top allocation: {where})")
    del heap


def pytest_child():
    """In a pytest process: each diagnosis the plugin makes, timed; prints
    one line of JSON [[its number, seconds, C sites], ...]."""
    import json

    import pytest

    timings = []
    diagnose = leakcheck.diagnose

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        diagnosis = diagnose(*args, **kwargs)
        timings.append([f"#{len(timings) + 1}", time.perf_counter() - t0,
                        len(diagnosis.native)])
        return diagnosis

    leakcheck.diagnose = timed
    pytest.main(["-q", "-p", "no:cacheprovider", "--tb=no", "-k", "leaky",
                 os.path.join(HERE, "..", "examples", "ext")])
    print("TIMINGS " + json.dumps(timings))


def _header(what):
    """Prints the interpreter and memray's version before `what`; memray's
    version, or None when it is not installed."""
    try:
        import memray
        version = memray.__version__
    except ImportError:
        version = None
    print(f"CPython {sys.version.split()[0]}"
          f"{' (debug build)' if hasattr(sys, 'gettotalrefcount') else ''}, "
          f"memray {version or 'not installed'}: {what}")
    return version


def bench_pytest(rounds):
    import json
    import subprocess
    _header(f"the plugin's diagnoses over examples/ext, {rounds} fresh "
            f"pytest processes")
    first, later = [], []
    for _ in range(rounds):
        proc = subprocess.run([sys.executable, __file__, "--pytest-child"],
                              stdout=subprocess.PIPE, text=True, check=False)
        line = next(x for x in proc.stdout.splitlines()
                    if x.startswith("TIMINGS "))
        timings = json.loads(line[len("TIMINGS "):])
        first.append(timings[0][1])
        later += [t for _, t, _ in timings[1:]]
        print("  " + ", ".join(f"{name} {t:.2f} s ({sites} C site"
                               f"{'' if sites == 1 else 's'})"
                               for name, t, sites in timings))
    later.sort()
    print(f"first diagnosis in a process: best {min(first):.2f} s, worst "
          f"{max(first):.2f} s; later ones: median "
          f"{later[len(later) // 2]:.2f} s, worst {max(later):.2f} s")


# The small leaking tests --modes diagnoses, one kind each, every test
# repeated ROUNDS times (a parameter) so that each kind is diagnosed after
# the process's first diagnosis too.
MODES_TESTS = '''
import importlib.util
import os

import pytest

_spec = importlib.util.spec_from_file_location("ext_conftest", {conftest!r})
_ext = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_ext)
leaky = _ext._load("leaky")

ROUNDS = range({rounds})
_KEPT = []


class Kept:
    pass


@pytest.mark.parametrize("i", ROUNDS)
def test_objects(i):
    _KEPT.append(Kept())


@pytest.mark.parametrize("i", ROUNDS)
def test_c_heap(i):
    assert leaky.histogram(bytes(range(256)), 4) == [64, 64, 64, 64]


@pytest.mark.parametrize("i", ROUNDS)
def test_pymem(i):
    leaky.checksum(bytes(range(256)) * 8)


@pytest.mark.parametrize("i", ROUNDS)
def test_fd(i):
    _KEPT.append(os.open(os.devnull, os.O_RDONLY))
'''
MODES_KINDS = ("objects", "c_heap", "pymem", "fd")


def modes_child(mode, memray_setting, folder):
    """In a pytest process over MODES_TESTS in `folder`: the CPU time of
    each diagnosis the plugin makes; prints one line of JSON
    [[test id, CPU seconds, C sites], ...]."""
    import json

    if memray_setting == "refused":
        sys.modules["memray"] = None        # import memray: ImportError
    import pytest
    from pytest_leakcheck import hunt

    timings = []
    diagnose = hunt._diagnose

    def timed(h, *args, **kwargs):
        t0 = time.process_time()
        result = diagnose(h, *args, **kwargs)
        diagnosis = result[0]
        timings.append([h.item.nodeid, time.process_time() - t0,
                        len(diagnosis.native) if diagnosis else 0])
        return result

    hunt._diagnose = timed
    pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                 "--tb=no", "--leaks", f"--leaks-diagnose={mode}",
                 "--rootdir", folder, folder])
    print("TIMINGS " + json.dumps(timings))


def bench_modes(rounds):
    import json
    import subprocess
    import tempfile
    memray_version = _header(f"CPU ms per leak of the plugin's diagnosis, "
                             f"{rounds} leaks of each kind per process")
    conftest_path = os.path.join(HERE, "..", "examples", "ext", "conftest.py")
    settings = ["installed", "refused"] if memray_version else ["refused"]
    with tempfile.TemporaryDirectory(prefix="bench-diagnose-") as folder:
        with open(os.path.join(folder, "test_kinds.py"), "w") as f:
            f.write(MODES_TESTS.format(
                conftest=os.path.abspath(conftest_path), rounds=rounds))
        for setting in settings:
            for mode in ("cheap", "full"):
                proc = subprocess.run(
                    [sys.executable, __file__, "--modes-child", mode,
                     setting, folder],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                    text=True, check=False, cwd=folder)
                line = next(x for x in proc.stdout.splitlines()
                            if x.startswith("TIMINGS "))
                timings = json.loads(line[len("TIMINGS "):])
                print(f"  memray {setting:<9} {mode:<5} "
                      + _modes_line(timings))


def _modes_line(timings):
    """`timings` ([[test id, CPU seconds, C sites], ...], in run order)
    as one line: the first diagnosis, then each kind's median of the
    others, in ms, with its C sites."""
    first = f"first ({timings[0][0].split('::')[1]}) " \
            f"{timings[0][1] * 1000:.0f}" if timings else "no diagnosis"
    parts = [first]
    for kind in MODES_KINDS:
        later = sorted((t, sites) for test, t, sites in timings[1:]
                       if test.split("::")[1].startswith(f"test_{kind}["))
        if later:
            t, sites = later[len(later) // 2]
            parts.append(f"{kind} {t * 1000:.0f} ({sites} C)")
    return ", ".join(parts)


if __name__ == "__main__":
    main()
