"""Clean code never looks leaky: what the interpreter and the standard
library fill on first use is settled away before every snapshot, and the
measurement does not measure itself."""

import argparse
import codecs
import datetime
import sys
import fnmatch
import json
import linecache
import re
import struct
import threading
import typing
import uuid
import warnings
from collections.abc import Iterable, Mapping

import pytest

import leakcheck

WORKLOADS = []


def workload(func):
    WORKLOADS.append(func)
    return func


class Point:
    def __init__(self, x):
        self.x = x


@workload
def objects_made_and_dropped():
    sorted((Point(i) for i in range(200)), key=lambda p: -p.x)


@workload
def containers():
    {str(i): [i, (i, i)] for i in range(300)}
    bytearray(100000)


@workload
def regular_expressions():
    re.sub(r"(\d+)-(\w+)", r"\2:\1", "123-abc 456-def")


@workload
def json_round_trip():
    json.loads(json.dumps({"a": [1, 2.5, "x", None], "b": {"c": True}}))


@workload
def abc_checks():
    isinstance(10**9, Mapping), isinstance(Point(1), Iterable)


@workload
def exceptions():
    try:
        {}["missing"]
    except KeyError as e:
        str(e)


@workload
def threads_started_and_joined():
    t = threading.Thread(target=sum, args=([1, 2],))
    t.start()
    t.join()


@workload
def argument_parsing():
    parser = argparse.ArgumentParser()
    parser.add_argument("--x", type=int)
    parser.parse_args(["--x", "3"])


@workload
def dates():
    datetime.datetime.strptime("2024-01-02", "%Y-%m-%d").isoformat()


@workload
def closures_and_generators():
    def outer(a):
        return lambda: a
    sum(outer(i)() for i in range(100))


@workload
def reference_cycles():
    a = [Point(0)]
    a.append(a)


def ids(funcs):
    return [f.__name__ for f in funcs]


# threading keeps its threads in a WeakSet and dicts that resize now and
# then as threads come and go: about one scope in 300 around a thread
# started and joined reads +1 block.  A series never sees that every run.
SCOPE_WORKLOADS = [w for w in WORKLOADS
                   if w is not threads_started_and_joined]


@pytest.mark.parametrize("work", SCOPE_WORKLOADS, ids=ids(SCOPE_WORKLOADS))
def test_clean_workloads_pass_a_scope_every_time(work):
    work()
    for _ in range(10):
        with leakcheck.scope():
            work()


@pytest.mark.parametrize("work", WORKLOADS, ids=ids(WORKLOADS))
def test_clean_workloads_pass_a_series_every_time(work):
    # 3.9/3.10 swap the frames they keep for recursive functions (re's
    # parser) for new ones now and then: run the code a few times first.
    leakcheck.snapshot()
    for _ in range(5):
        work()
    for _ in range(3):
        series = leakcheck.repeat(work, repeat=4)
        assert not series.leaked


FIRST_USES = {
    "abc": lambda cls, fresh: isinstance(cls(), Mapping),
    "re": lambda cls, fresh: re.compile("(?P<x>%s)+" % fresh),
    "typing": lambda cls, fresh: (typing.List[cls], typing.Optional[cls]),
    "fnmatch": lambda cls, fresh: fnmatch.fnmatch(fresh, "*%s" % fresh),
    "struct": lambda cls, fresh: struct.calcsize("<%dsI" % len(fresh)),
    # Two spellings whose codec module is imported at startup: the lookup
    # fills encodings' cache and the interpreter's, not sys.modules.
    "codecs": lambda cls, fresh: codecs.lookup("U8" if fresh == "warm"
                                               else "UTF8"),
    "linecache": lambda cls, fresh: linecache.getline(__file__, 1),
    "type-cache": lambda cls, fresh: getattr(cls, "attr_" + fresh, None),
    "warnings": lambda cls, fresh: warnings.warn("first use " + fresh),
}


@pytest.mark.filterwarnings("ignore:first use")
@pytest.mark.parametrize("cache", list(FIRST_USES))
def test_first_use_caches_are_settled_away(cache):
    """A scope around the first use of a cache settle() clears is clean.
    (Each alone: several first uses at once add enough new interned names
    and dict entries that a table somewhere may resize, a block that
    stays.)"""
    if cache == "codecs" and not hasattr(codecs, "unregister"):
        pytest.skip("3.9's codecs has no unregister(), the one way to clear "
                    "the interpreter's codec lookup cache")
    fresh = uuid.uuid4().hex

    class Fresh:
        pass

    Fresh()
    warnings.warn("first use, before")      # the module's registry exists
    first_use = FIRST_USES[cache]
    first_use(Fresh, "warm")    # the code's first run (not the cache's)
    with leakcheck.scope() as s:
        first_use(Fresh, fresh)
    assert not s.leaked, s.report


def test_settle_keeps_linecache_entries_no_file_backs():
    linecache.cache["<leakcheck-test>"] = (3, None, ["x\n"], "<leakcheck-test>")
    try:
        leakcheck.snapshot()
        assert "<leakcheck-test>" in linecache.cache
        linecache.getline(__file__, 1)
        assert __file__ in linecache.cache
        leakcheck.snapshot()
        assert __file__ not in linecache.cache
        # A lazy entry (lines not read yet) goes too.
        linecache.cache["lazy-leakcheck-test"] = (lambda: "x\n",)
        leakcheck.snapshot()
        assert "lazy-leakcheck-test" not in linecache.cache
        assert "<leakcheck-test>" in linecache.cache
    finally:
        linecache.cache.pop("<leakcheck-test>", None)
        linecache.cache.pop("lazy-leakcheck-test", None)


def test_a_fresh_interpreter_passes_its_first_scope(tmp_path):
    """No warm-up of leakcheck itself is needed: the very first scope of a
    process around clean code passes (frames that 3.9/3.10 keep, the
    with statement's own references on debug builds, ...)."""
    import subprocess
    import sys
    script = tmp_path / "first.py"
    script.write_text(
        "import leakcheck\n"
        "def work():\n"
        "    return sorted([3, 1, 2])\n"
        "work()\n"
        "with leakcheck.scope():\n"
        "    work()\n"
        "@leakcheck.scope()\n"
        "def decorated():\n"
        "    work()\n"
        "decorated()\n"
        "print('clean')\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "clean\n"
