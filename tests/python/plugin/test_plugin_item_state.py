"""What a test or its fixtures add to their own item (markers, keywords,
attributes, stash entries, properties) is put back between repetitions,
as function-scoped fixtures are set up again: a clean test that changes
its item stays clean, and the reported run keeps what it added."""

import itertools
import xml.etree.ElementTree as ET

import pytest

from pytest_leakcheck import hunt

ITEM_STATE = '''
import itertools

import pytest

FRESH = itertools.count()


@pytest.fixture
def marked(request):
    request.applymarker(pytest.mark.slowish)


def test_applymarker(marked):
    pass


def test_add_marker(request):
    request.node.add_marker("other")


@pytest.fixture(params=[1, 2])
def flaky_param(request):
    if request.param == 2:
        request.applymarker(pytest.mark.xfail(reason="param 2", strict=True))
    return request.param


def test_marker_per_param(flaky_param):
    assert flaky_param == 1


def test_keywords(request):
    request.node.keywords["kw%d" % next(FRESH)] = True


def test_extra_keyword_matches(request):
    request.node.extra_keyword_matches.add("match%d" % next(FRESH))


def test_user_properties(record_property, request):
    record_property("fresh%d" % next(FRESH), 1)
    request.node.user_properties.append(("also", next(FRESH)))


@pytest.fixture
def stores(request):
    request.node.stored = [object()]                  # a new value per run
    request.node.__dict__.setdefault("seen", []).append(object())


def test_fixture_stores_on_node(stores):
    pass


def test_stash(request):
    request.node.stash[pytest.StashKey[int]()] = next(FRESH)


def test_report_section(request):
    request.node.add_report_section("call", "mine", "text %d" % next(FRESH))


def test_suite_property(record_testsuite_property):
    record_testsuite_property("suite", "value")


class NoEq:
    """As a numpy array: comparing it raises."""

    def __eq__(self, other):
        raise ValueError("the truth value is ambiguous")

    __hash__ = object.__hash__


def test_unequal_values(request):
    request.node.__dict__.setdefault("arrays", []).append(NoEq())
    request.node.__dict__.setdefault("by_name", {})["a"] = NoEq()


class TestMethod:
    def test_self_state(self):
        # pytest gives each test a fresh instance: so does every run.
        assert not hasattr(self, "seen")
        self.seen = [object() for _ in range(3)]
'''

NAMES = ["test_applymarker", "test_add_marker", "test_marker_per_param[1]",
         "test_keywords", "test_extra_keyword_matches",
         "test_user_properties", "test_fixture_stores_on_node", "test_stash",
         "test_report_section", "test_suite_property", "test_unequal_values",
         "TestMethod::test_self_state"]


def test_a_test_that_changes_its_item_stays_clean(pytester, read_report):
    pytester.makepyfile(test_state=ITEM_STATE)
    pytester.makeini("[pytest]\nmarkers =\n    slowish\n    other\n")
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=r.json", "--junitxml=x.xml",
        "--leaks-repeat=6")
    result.assert_outcomes(passed=len(NAMES), xfailed=1)
    _, tests = read_report()
    for name in NAMES:
        rec = tests[f"test_state.py::{name}"]
        assert rec["verdict"] == "clean", (name, rec["deltas"])
    # What the reported run added stays: one property, once.
    suite = ET.parse(pytester.path / "x.xml").getroot()
    props = suite.findall(".//properties/property[@name='suite']")
    assert len(props) == 1
    case = suite.find(".//testcase[@name='test_user_properties']")
    names = [p.get("name") for p in case.findall("properties/property")]
    assert len(names) == 4 and names[1] == "also"
    assert names[2:] == [hunt.JUNIT_RUNS, hunt.JUNIT_SECONDS]


def test_markers_the_reported_run_applied_still_select(pytester):
    """-m and -k see the item as collected; markers applied at run time
    are the reported run's, once."""
    pytester.makepyfile(test_state=ITEM_STATE)
    pytester.makeini("[pytest]\nmarkers =\n    slowish\n    other\n")
    pytester.makeconftest('''
        import pytest

        @pytest.hookimpl(trylast=True)
        def pytest_runtest_logreport(report):
            if report.when == "teardown" and "test_add_marker" in report.nodeid:
                with open("markers.txt", "w") as f:
                    f.write(" ".join(sorted(report.keywords)))
    ''')
    result = pytester.runpytest_subprocess("--leaks", "-k", "add_marker")
    result.assert_outcomes(passed=1)
    keywords = (pytester.path / "markers.txt").read_text().split()
    assert keywords.count("other") == 1
