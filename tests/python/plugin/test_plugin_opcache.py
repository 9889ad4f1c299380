"""A clean suite stays clean on CPython 3.9 and 3.10, whose opcode cache
gives a code object two blocks the 1024th time it runs.

Code run a few times per repetition (pytest's and pluggy's hooks, the
fixtures' machinery, a helper the test calls) reaches that count in some
run; when a test's measured runs each bring one more code object there,
its blocks grow every run and a clean test read as a leak (in a suite of
100 trivial tests on 3.9, the 74th or so: blocks +4 +8 +8 +14).  Settling
turns the cache off, as CPython's refleak runner does.  On 3.11 and later
the cache is gone and these tests pass as they are."""

# CPython 3.9's and 3.10's OPCACHE_MIN_RUNS (release builds).
OPCACHE_MIN_RUNS = 1024
WARMUP = 1
REPEAT = 4

# Module m's tests: trivial, with a function fixture, as a user's suite.
TRIVIAL = '''
import json, re
''' + "".join(f'''
def test_{n}(tmp_path):
    json.loads('{{"a": [1, 2, 3]}}'); re.match('a+', 'aaa')
    (tmp_path / 'x').write_text('hello')
''' for n in range(20))

# One test whose helpers reach the opcode cache's threshold one per run:
# helper_k has run MIN_RUNS - 1 - WARMUP - k times after the import, so
# one call per run brings it there in the k-th measured run.  Each helper
# looks a global up (the cache 3.9 makes is for LOAD_GLOBAL).
CROSSING = f'''
_DATA = (1, 2, 3)
''' + "".join(f'''
def helper_{k}():
    return len(_DATA)

for _ in range({OPCACHE_MIN_RUNS - 1 - WARMUP - k}):
    helper_{k}()
''' for k in range(1, REPEAT + 1)) + '''

def test_helpers_reach_the_threshold_one_per_run():
''' + "".join(f'''    helper_{k}()
''' for k in range(1, REPEAT + 1))


def test_no_clean_test_leaks_when_code_reaches_the_opcode_cache(
        pytester, read_report):
    pytester.makepyfile(**{f"test_m{m}": TRIVIAL for m in range(5)},
                        test_crossing=CROSSING)
    result = pytester.runpytest_subprocess(
        "--leaks", f"--leaks-warmup={WARMUP}", f"--leaks-repeat={REPEAT}",
        "--leaks-report=r.json", "-p", "no:xdist", "-p", "no:cacheprovider")
    _, recs = read_report()
    leaking = {test_id: rec["deltas"] for test_id, rec in recs.items()
               if rec["verdict"] != "clean"}
    assert not leaking, result.stdout.str()
    assert len(recs) == 5 * 20 + 1
    result.assert_outcomes(passed=5 * 20 + 1)


def test_a_real_leak_is_still_caught_next_to_it(pytester, read_report,
                                                leaky_source):
    """Turning the cache off hides no real leak: one list per run."""
    pytester.makepyfile(test_crossing=CROSSING, test_leaky=leaky_source)
    result = pytester.runpytest_subprocess(
        "--leaks", f"--leaks-warmup={WARMUP}", f"--leaks-repeat={REPEAT}",
        "--leaks-report=r.json")
    _, recs = read_report()
    assert recs["test_leaky.py::test_leaky"]["verdict"] == "leak"
    assert recs["test_crossing.py::"
                "test_helpers_reach_the_threshold_one_per_run"][
                    "verdict"] == "clean"
    result.assert_outcomes(passed=1, failed=1)
