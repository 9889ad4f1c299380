"""--leaks-dump: a file per leaking test of what its runs left behind, read
by leakcheck.load_dump and summarised by ``python -m leakcheck show``;
under pytest-xdist; a folder that cannot be written; unusable dumps."""

import sys

import pytest

import leakcheck
from leakcheck import _dump
from pytest_leakcheck import settings as settingsmod

LEAKY = '''

_KEPT = []

class Leaked:
    def __init__(self):
        self.payload = bytearray(3000)

    def __repr__(self):
        # A repr the dump must never call: it would hang a real one.
        with open(os.environ["REPR_LOG"], "a") as f:
            f.write("called\\n")
        raise RuntimeError("no repr")

def test_leaks():
    _KEPT.append(Leaked())

def test_clean():
    assert sorted([3, 1, 2]) == [1, 2, 3]
'''


def run_cli(pytester, *args):
    return pytester.run(sys.executable, "-m", "leakcheck", *args)


def instance_lines(line):
    """What "allocated" may read for an instance of a class allocated at
    `line`: CPython 3.11's tracemalloc has no traceback for an instance
    whose dict is managed by the interpreter (3.9, 3.10, 3.12+ have)."""
    return (line, None) if sys.version_info[:2] == (3, 11) else (line,)


def dumps(folder):
    return sorted(folder.glob("*" + _dump.SUFFIX))


def test_dump_of_a_leaking_test(pytester, monkeypatch):
    repr_log = pytester.path / "repr.log"
    monkeypatch.setenv("REPR_LOG", str(repr_log))
    pytester.makepyfile(test_kept=LEAKY)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-dump=out")
    result.assert_outcomes(failed=1, passed=1)
    files = dumps(pytester.path / "out")
    assert len(files) == 1          # the clean test leaves none
    assert len(list((pytester.path / "out").iterdir())) <= 2   # + capture
    assert files[0].name == _dump.dump_name("test_kept.py::test_leaks")
    result.stdout.fnmatch_lines(["*" + _dump_line(files[0])])
    assert not list((pytester.path / "out").glob(".leakcheck-*"))

    data = leakcheck.load_dump(str(files[0]))
    assert data["schema"] == _dump.SCHEMA
    assert data["test"] == "test_kept.py::test_leaks"
    assert "objects" in data["leaking"]
    by_type = {}
    for entry in data["objects"]:
        by_type.setdefault(entry["type"], []).append(entry)
    leaked = by_type["test_kept.Leaked"]
    assert len(leaked) == data["runs"] == 2
    where = pytester.path / "test_kept.py"
    source = where.read_text().splitlines()
    for entry in leaked:
        assert entry["allocated"] in instance_lines(
            f"{where}:{source.index('    _KEPT.append(Leaked())') + 1}")
        assert entry["repr"] == f"<test_kept.Leaked object at {entry['id']:#x}>"
        assert entry["size"] > 0
        assert entry["chain"]["expression"].startswith("test_kept._KEPT[")
    payloads = by_type["bytearray"]
    assert len(payloads) == 2
    assert all(p["size"] >= 3000 for p in payloads)
    assert payloads[0]["chain"]["expression"].endswith("].payload")
    # Before 3.11 (and for instances whose dict was made), the instance's
    # __dict__ is an object of its own.
    assert set(by_type) - {"dict"} == {"test_kept.Leaked", "bytearray"}
    assert not repr_log.exists()    # no user repr ran

    try:
        import memray
    except ImportError:     # the leakcheck[native] extra is not installed
        assert data["capture"] is None
    else:
        # memray's capture of the diagnosis' runs, beside the dump.
        capture = files[0].parent / data["capture"]
        assert capture.name == files[0].name.replace(_dump.SUFFIX,
                                                     _dump.CAPTURE_SUFFIX)
        assert memray.FileReader(str(capture)).metadata.total_allocations > 0

    show = run_cli(pytester, "show", str(files[0]))
    assert show.ret == 0, show.stderr.str()
    show.stdout.fnmatch_lines([
        "leakcheck dump of test_kept.py::test_leaks (leakcheck-dump/1)",
        f"Total {len(data['objects'])} objects, {len(by_type)} types, *",
        "Index*Count*Size*Kind",
        "    0       2 * bytearray",
        "*       2 * test_kept.Leaked",
        "  test_kept.Leaked: 2 of 2 held by test_kept._KEPT?...?",
    ])


FIXTURE_HELD = '''
import pytest

class Entry:
    pass

@pytest.fixture(scope="module")
def registry():
    return []

def test_registers(registry):
    registry.append(Entry())
'''


def test_what_only_the_harness_holds_is_listed_too(pytester):
    """An object the test made and a module-scoped fixture keeps: pytest
    holds it, yet the test allocated it."""
    pytester.makepyfile(test_registry=FIXTURE_HELD)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-dump=out")
    result.assert_outcomes(failed=1)
    (path,) = dumps(pytester.path / "out")
    data = leakcheck.load_dump(str(path))
    entries = [e for e in data["objects"]
               if e["type"] == "test_registry.Entry"]
    assert len(entries) == 2, data["objects"]
    line = (pytester.path / "test_registry.py").read_text().splitlines() \
        .index("    registry.append(Entry())")
    for entry in entries:
        assert entry["allocated"] in instance_lines(
            f"{pytester.path / 'test_registry.py'}:{line + 1}")


def _dump_line(path):
    from pytest_leakcheck import hunt
    return hunt.MSG_DUMP.format(path=path)


def test_no_dump_for_a_clean_run(pytester):
    pytester.makepyfile(test_clean="def test_clean():\n    pass\n")
    result = pytester.runpytest_subprocess("--leaks", "--leaks-dump=out")
    result.assert_outcomes(passed=1)
    assert list((pytester.path / "out").iterdir()) == []


def test_dumps_under_xdist(pytester):
    pytest.importorskip("xdist")
    source = "_KEPT = []\n" + "".join(
        f"def test_leaks_{i}():\n    _KEPT.append([{i}])\n\n"
        for i in range(6))
    pytester.makepyfile(test_many=source)
    pytester.makeini("[pytest]\nleaks_dump = out\n")
    result = pytester.runpytest_subprocess("--leaks", "-n", "2")
    result.assert_outcomes(failed=6)
    files = dumps(pytester.path / "out")
    assert len(files) == 6
    tests = sorted(leakcheck.load_dump(str(f))["test"] for f in files)
    assert tests == [f"test_many.py::test_leaks_{i}" for i in range(6)]
    for f in files:
        kept = leakcheck.load_dump(str(f))["objects"]
        assert any(e["type"] == "list" and e["chain"]["expression"]
                   .startswith("test_many._KEPT[") for e in kept), kept


@pytest.mark.parametrize("ini", [False, True])
def test_a_folder_that_cannot_be_written_is_a_usage_error(pytester, ini):
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    (pytester.path / "taken").write_text("a file, not a folder")
    target = pytester.path / "taken" / "dumps"
    if ini:
        pytester.makeini(f"[pytest]\nleaks_dump = {target}\n")
        result = pytester.runpytest_subprocess("--leaks")
        where = settingsmod.WHERE_INI.format(
            key="leaks_dump", inifile=pytester.path / "tox.ini")
    else:
        result = pytester.runpytest_subprocess("--leaks",
                                               f"--leaks-dump={target}")
        where = settingsmod.WHERE_CLI.format(option="--leaks-dump")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: " + settingsmod.MSG_BAD_VALUE.format(
            where=where, problem=settingsmod.PROBLEM_DUMP.format(
                value=target, reason="Not a directory"))])


class _Loud(str):
    def __repr__(self):
        raise AssertionError("user repr called")


class _Slow:
    def __repr__(self):
        raise AssertionError("user repr called")

    def __sizeof__(self):
        raise AssertionError("user __sizeof__ called")


def test_safe_repr_never_runs_user_code():
    assert _dump.safe_repr([1, "a", None, (2,), {"k": b"v"}]) == \
        "[1, 'a', None, (2,), {'k': b'v'}]"
    loud, slow = _Loud("x"), _Slow()
    assert _dump.safe_repr(loud) == f"<{__name__}._Loud object at {id(loud):#x}>"
    assert _dump.safe_repr([slow]) == \
        f"[<{__name__}._Slow object at {id(slow):#x}>]"
    text = _dump.safe_repr("y" * 10000)
    assert len(text) <= _dump.REPR_LIMIT and text.startswith("'yyy")
    deep = [[[[1]]]]
    assert _dump.safe_repr(deep) == "[[<list of 1>]]"
    assert _dump.safe_repr(list(range(1000))).endswith("...")
    assert _dump.safe_size(slow) == object.__sizeof__(slow)
    assert _dump.safe_size([]) == sys.getsizeof([])


def test_show_names_a_device_and_prints_any_type_name(pytester):
    result = run_cli(pytester, "show", "/dev/zero")
    assert result.ret == 2
    result.stderr.fnmatch_lines(["leakcheck show: error: dump /dev/zero is "
                                 "not a regular file"])
    path = pytester.path / "lone.leaks.jsonl"
    path.write_text('{"schema": "leakcheck-dump/1", "objects": 1}\n'
                    '{"type": "T\\udcff", "size": 56}\n')
    result = run_cli(pytester, "show", str(path))
    assert result.ret == 0, result.stderr.str()
    result.stdout.fnmatch_lines(["* T\\udcff"])


def test_safe_repr_of_a_list_with_unset_items():
    """A list a C function made and left on an error path (PyList_New,
    then a failure before every item was set) holds NULL items: the dump
    must not crash on it, as iterating it would."""
    import ctypes
    new_list = ctypes.pythonapi.PyList_New
    new_list.restype = ctypes.py_object
    new_list.argtypes = [ctypes.c_ssize_t]
    unset = new_list(3)
    assert _dump.safe_repr(unset) == "<list of 3, 3 of them unset (NULL)>"
    assert _dump.safe_repr([unset]) == "[<list of 3, 3 of them unset (NULL)>]"


KEEPS_BYTES = '''
_KEPT = []

def test_keeps_bytes():
    _KEPT.append(bytearray(5000))
'''


def test_show_says_what_a_memory_leak_left_when_no_object_is_listed(
        pytester):
    """A bytearray is no object the garbage collector tracks: the dump
    lists none, and show says why and which line the diagnosis found."""
    pytester.makepyfile(test_bytes=KEEPS_BYTES)
    result = pytester.runpytest_subprocess("--leaks", "--leaks-dump=out")
    result.assert_outcomes(failed=1)
    [path] = dumps(pytester.path / "out")
    result = run_cli(pytester, "show", str(path))
    assert result.ret == 0, result.stderr.str()
    text = "\n".join(result.outlines)
    assert "they are looked for when" not in text
    line = (pytester.path / "test_bytes.py").read_text().splitlines().index(
        "    _KEPT.append(bytearray(5000))") + 1
    result.stdout.fnmatch_lines([
        "the diagnosis found:",
        f"  Python line test_bytes.py:{line}: * bytes in * per run",
        # refs first on a debug build, where it grows too.
        "no surviving objects listed: what grew (*blocks*) is memory no "
        "object the garbage collector tracks holds *; the lines above say "
        "where it was allocated"])
