"""The series rule through the plugin: bench/rule_corpus.py's hand-written
leaks that skip runs, growth back and forth, caches that fill in shrinking
steps or for a bounded number of runs, judged as each mode promises (the
default mode and --leaks-thorough), serially and under pytest-xdist."""

import pathlib
import subprocess
import sys

import pytest

CORPUS = pathlib.Path(__file__).parents[3] / "bench" / "rule_corpus.py"


@pytest.mark.parametrize("workers", [None, "2"], ids=["serial", "xdist"])
def test_every_mode_judges_the_rule_corpus_as_it_promises(workers):
    cmd = [sys.executable, str(CORPUS)]
    if workers:
        cmd += ["-n", workers]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for mode in ("default", "thorough"):
        assert f"rule_corpus {mode}: 13 tests, 0 wrong where promised" \
            in proc.stdout, proc.stdout
    # What only the thorough mode catches is missed by the default mode,
    # as the README says: the corpus tells a miss from a right verdict.
    assert "default   miss test_leak_every_third_run " in proc.stdout
    assert "thorough  ok   test_clean_cache_bounded_at_500 " in proc.stdout


@pytest.mark.parametrize("where", ["flag", "ini"])
def test_thorough_is_a_flag_and_an_ini_key(pytester, read_report, where):
    pytester.makepyfile('''
        _N = [0]
        _KEPT = []

        def test_late():
            _N[0] += 1
            if _N[0] % 2 == 0:
                _KEPT.append([])
        ''')
    args = ["--leaks", "--leaks-report=r.json"]
    if where == "flag":
        args.append("--leaks-thorough")
    else:
        pytester.makeini("[pytest]\nleaks_thorough = true\n")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*measured runs after 1 warm-up run (thorough)*",
        "*objects*grew to a new high in * of * runs: *",
    ])
    report, _ = read_report()
    assert report["settings"]["thorough"] is True
