"""What a test observes under --leaks is what plain pytest shows it: the
settling between runs leaves no trace a test can see."""

import pytest

NONE_COUNT = '''
import sys


class Thing:
    def method(self):
        return 1


def work():
    thing = Thing()
    for name in ("method", "missing_a", "missing_b", "__len__"):
        getattr(thing, name, None)
    return thing.method()


def test_warm():
    work()


def test_none_refcount_is_stable():
    # As ujson's tests check their encoder: None's count around a call.
    before = sys.getrefcount(None)
    work()
    after = sys.getrefcount(None)
    assert after == before
'''


@pytest.mark.parametrize("args", [[], ["--leaks"],
                                  ["--leaks", "--leaks-repeat=8"]],
                         ids=["plain", "leaks", "leaks-repeat-8"])
def test_none_refcount_around_a_call(pytester, args):
    pytester.makepyfile(test_none=NONE_COUNT)
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=2)
