"""What a diagnosis under the plugin says is about the test, not about
the harness: growth said per run, as the verdict says it; no frame of
pytest's or pluggy's in an allocation's traceback; the fixture's check()
reported at the test's line; nothing the plugin's own re-runs make."""

LIST_PER_RUN = '''
_KEPT = []


def keep():
    _KEPT.append([])                # KEEP_LINE


def test_leaks():
    keep()                          # CALL_LINE
'''


def line_of(path, marker):
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if marker in text)


def test_growth_per_run_and_no_harness_frames(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = pytester.makepyfile(test_per_run=LIST_PER_RUN)
    result = pytester.runpytest_subprocess("--leaks", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "objects that grew (per run, re-running the code 2 times), most "
        "first:",
        "  list  +1",
    ])
    # keep()'s line, called from the test's, and nothing further out.
    assert f"  {path}:{line_of(path, 'KEEP_LINE')}: +" in out
    assert f"    called from {path}:{line_of(path, 'CALL_LINE')}" in out
    called_from = [line for line in out.splitlines()
                   if line.startswith("    called from ")]
    assert called_from and not any(
        "_pytest" in line or "pluggy" in line or "pytest_leakcheck" in line
        for line in called_from), called_from


FIXTURE = '''
_KEPT = []


def test_check(leakcheck):
    leakcheck.check(_KEPT.extend, range(1000, 1100))      # CHECK_LINE
'''


def test_the_fixture_reports_at_the_test_s_line(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    path = pytester.makepyfile(test_fixture=FIXTURE)
    line = line_of(path, "CHECK_LINE")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"leaked (at {path}:{line})" in out
    assert f"  {path}:{line}: +" in out       # where it was allocated
    report = out[out.index("leakcheck: series"):]
    assert "plugin.py" not in report and "_pytest" not in report
    assert "pytest_leakcheck/fixture.py" not in report


UNTRACKED = '''
_KEPT = []


def test_leaks():
    _KEPT.append(object())          # no new object the collector tracks
'''


def test_nothing_of_the_plugin_s_own_reruns(pytester, read_report):
    """On a debug build the reference count census held every object
    while the test ran again, so what pytest replaces every run (a log
    stream, lists) outlived its run: list +4, _io.StringIO +2."""
    pytester.makepyfile(test_untracked=UNTRACKED)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-report=r.json",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    _, recs = read_report()
    diagnosis = recs["test_untracked.py::test_leaks"]["diagnosis"]
    assert diagnosis["objects"] == []
    assert "StringIO" not in result.stdout.str()
