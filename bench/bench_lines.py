"""What --leaks adds per clean test in Python lines executed, function by
function: bench_plugin.py's fast clean tests run plain and with --leaks,
each at N and at 2N tests, with a conftest.py that counts the line events
of every Python function (sys.settrace).  The difference between the two
sizes is what each further test costs, so what a session pays once
(imports, the first freeze, the report) drops out; the difference between
--leaks and plain is leakcheck's.  Like bench_instructions.py, the count
does not move with the machine's load; unlike it, it names the Python
function, where callgrind sees only the interpreter's loop.

    python bench/bench_lines.py [--tests 200] [--python PATH] [--top 40]

Printed: the Python lines --leaks adds per test in all, by file, and the
functions that add most (lines and calls per test; a negative figure is
work --leaks does instead of pytest).  A line's cost varies (a line calling
into C can be worth hundreds of instructions), so compare functions with
bench_instructions.py before and after a change too.

The probes are fds and threads: the tracer's own counters grow at every
new function, which the memory probes would read as each test's growth
(every test would run again).  The Python work of a hunt is the same but
for its loops over the probes (two here, seven by default: the record's
deltas and thresholds), and the readings run in C either way.
"""

import argparse
import collections
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_overhead import pytest_output  # noqa: E402
from bench_plugin import generate  # noqa: E402

PROBES = "fds,threads"

CONFTEST = '''\
import atexit
import json
import os
import sys

_lines = {}
_calls = {}


def _tracer(frame, event, arg):
    code = frame.f_code
    if event == "line":
        _lines[code] = _lines.get(code, 0) + 1
    elif event == "call":
        _calls[code] = _calls.get(code, 0) + 1
    return _tracer


def pytest_configure(config):
    sys.settrace(_tracer)


def _dump():
    sys.settrace(None)
    rows = [[code.co_filename, code.co_firstlineno, code.co_name,
             _lines.get(code, 0), _calls.get(code, 0)]
            for code in set(_lines) | set(_calls)]
    with open(os.environ["BENCH_LINES_OUT"], "w") as f:
        json.dump(rows, f)


atexit.register(_dump)
'''


def counted(directory, python, args, out):
    """{(file, line, function): (lines, calls)} of one run."""
    os.environ["BENCH_LINES_OUT"] = out
    pytest_output("bench_lines", directory, python, args)
    with open(out) as f:
        rows = json.load(f)
    found = {}
    for filename, first, name, lines, calls in rows:
        key = (_short(filename), first, name)
        old = found.get(key, (0, 0))
        found[key] = (old[0] + lines, old[1] + calls)
    return found


def _short(filename):
    for marker in ("site-packages/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tests", type=int, default=200)
    p.add_argument("--python", default=sys.executable, metavar="PATH")
    p.add_argument("--top", type=int, default=40)
    args = p.parse_args(argv)
    runs = {}
    with tempfile.TemporaryDirectory(prefix="leakcheck-lines-") as d:
        sizes = []
        for factor in (1, 2):
            suite = os.path.join(d, f"suite{factor}")
            os.mkdir(suite)
            sizes.append(generate(suite, args.tests * factor,
                                  conftest=CONFTEST))
            report = os.path.join(d, f"report{factor}.json")
            for config, extra in (("plain", []), ("leaks", [
                    "--leaks", f"--leaks-probes={PROBES}",
                    f"--leaks-report={report}"])):
                runs[config, factor] = counted(
                    suite, args.python, extra,
                    os.path.join(d, f"lines-{config}-{factor}.json"))
    tests = sizes[1] - sizes[0]

    def per_test(config, key, i):
        return (runs[config, 2].get(key, (0, 0))[i]
                - runs[config, 1].get(key, (0, 0))[i]) / tests

    keys = set().union(*(set(found) for found in runs.values()))
    rows = []
    for key in keys:
        lines = per_test("leaks", key, 0) - per_test("plain", key, 0)
        calls = per_test("leaks", key, 1) - per_test("plain", key, 1)
        if lines or calls:
            rows.append((lines, calls, key))
    rows.sort(key=lambda row: -row[0])
    by_file = collections.Counter()
    for lines, _, (filename, _, _) in rows:
        by_file[filename] += lines
    total = sum(row[0] for row in rows)
    print(f"{tests} tests more ({sizes[0]} and {sizes[1]}), probes "
          f"{PROBES}: --leaks adds {total:,.0f} Python lines a test")
    print("by file:")
    for filename, lines in by_file.most_common(args.top // 2):
        print(f"  {lines:8.1f}  {filename}")
    print("by function (lines, calls a test):")
    for lines, calls, (filename, first, name) in rows[:args.top]:
        print(f"  {lines:8.1f} {calls:7.2f}  {filename}:{first} {name}")


if __name__ == "__main__":
    main()
