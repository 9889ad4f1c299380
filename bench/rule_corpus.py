"""The series rule on growth that is not "every run or never": hand-written
tests whose truth is known, run under `pytest --leaks` and under
`--leaks --leaks-thorough`, with the verdict and the runs each took.

    python bench/rule_corpus.py [--python PYTHON] [-n WORKERS]

Cases (the test's name says what it is):
- test_leak_*: grow without bound: every run, every second or third run, a
  256 KiB buffer kept every second run, a leak that skips the first runs,
  a leak under a cache that fills in shrinking steps;
- test_clean_*: no leak: growth freed and kept again (back and forth),
  a cache that fills in shrinking steps, one bounded at 40 or 500 entries
  filled one a run, a cache that fills once.
Some cases are caught in one mode only (CAUGHT_IN below); the run fails
(exit 1) when a verdict differs from what its mode promises.  The last
lines are the tally per mode: verdicts, wrong ones, runs.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

SOURCE = '''
import itertools

_KEPT = []
_CACHE = {}
_BOUNDED_40 = {}
_BOUNDED_500 = {}
_COUNT = {}


def _run(name):
    """How many times the test `name` has run, this run included."""
    _COUNT[name] = _COUNT.get(name, 0) + 1
    return _COUNT[name]


def test_leak_every_run():
    _KEPT.append([])


def test_leak_every_second_run():
    if _run("second") % 2 == 1:
        _KEPT.append([])


def test_leak_every_second_run_skipping_the_first():
    if _run("second_late") % 2 == 0:
        _KEPT.append([])


def test_leak_every_third_run():
    if _run("third") % 3 == 1:
        _KEPT.append([])


def test_leak_every_third_run_skipping_the_first():
    if _run("third_late") % 3 == 0:
        _KEPT.append([])


def test_leak_buffer_every_second_run():
    if _run("buffer") % 2 == 1:
        _KEPT.append(bytearray(256 * 1024))


def test_leak_under_a_filling_cache():
    n = _run("under")
    for i in range(64 >> n):
        _CACHE[("under", n, i)] = None
    _KEPT.append([])


def test_clean_back_and_forth():
    if _run("back") % 2 == 1:
        _CACHE["back"] = [[] for _ in range(8)]
    else:
        _CACHE.pop("back", None)


def test_clean_cache_fills_in_shrinking_steps():
    n = _run("shrink")
    for i in range(256 >> n):
        _CACHE[("shrink", n, i)] = []


def test_clean_cache_bounded_at_40():
    n = _run("b40")
    if len(_BOUNDED_40) < 40:
        _BOUNDED_40[n] = []


def test_clean_cache_bounded_at_500():
    n = _run("b500")
    if len(_BOUNDED_500) < 500:
        _BOUNDED_500[type("Fresh", (), {})] = n


def test_clean_fills_once():
    _CACHE.setdefault("once", [[] for _ in range(16)])


def test_clean_nothing():
    sorted([3, 1, 2])
'''

# Where each case is promised right: "both", "thorough" (the default mode
# misses it or flags it, by design; the README says which).
CAUGHT_IN = {
    "test_leak_every_run": "both",
    "test_leak_every_second_run": "both",
    "test_leak_every_second_run_skipping_the_first": "thorough",
    "test_leak_every_third_run": "thorough",
    "test_leak_every_third_run_skipping_the_first": "thorough",
    "test_leak_buffer_every_second_run": "both",
    "test_leak_under_a_filling_cache": "both",
    "test_clean_back_and_forth": "both",
    "test_clean_cache_fills_in_shrinking_steps": "both",
    "test_clean_cache_bounded_at_40": "thorough",
    "test_clean_cache_bounded_at_500": "thorough",
    "test_clean_fills_once": "both",
    "test_clean_nothing": "both",
}

MODES = {"default": [], "thorough": ["--leaks-thorough"]}


def run_mode(python, folder, args):
    report = folder / "report.json"
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "-p", "no:randomly", "--leaks", "--leaks-diagnose=off",
           f"--leaks-report={report}", *args, "test_rule.py"]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    if proc.returncode not in (0, 1) or not report.exists():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"rule_corpus: {cmd!r} exited {proc.returncode}")
    with open(report, encoding="utf-8") as f:
        return json.load(f)["tests"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("-n", dest="workers", default=None)
    args = parser.parse_args(argv)
    extra = ["-n", args.workers] if args.workers else []
    wrong_total = 0
    with tempfile.TemporaryDirectory(prefix="rule-corpus-") as tmp:
        folder = pathlib.Path(tmp)
        (folder / "test_rule.py").write_text(SOURCE)
        for mode, flags in MODES.items():
            records = run_mode(args.python, folder, flags + extra)
            wrong = runs = 0
            for rec in records:
                name = rec["id"].split("::")[-1]
                leaky = name.startswith("test_leak_")
                promised = CAUGHT_IN[name] == "both" or mode == "thorough"
                right = (rec["verdict"] == "leak") == leaky
                ran = rec.get("test_runs", rec.get("runs", 0))
                runs += ran
                mark = "ok  " if right else ("FAIL" if promised else "miss")
                if not right and promised:
                    wrong += 1
                print(f"{mode:<9} {mark} {name:<50} {rec['verdict']:<6} "
                      f"{ran:>4} runs")
            wrong_total += wrong
            print(f"rule_corpus {mode}: {len(records)} tests, {wrong} "
                  f"wrong where promised, {runs} runs")
    return 1 if wrong_total else 0


if __name__ == "__main__":
    sys.exit(main())
