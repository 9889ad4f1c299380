"""A leaked file descriptor is named by its number and what it points to
(the /proc/self/fd target: a path, socket:[inode], pipe:[inode]) in the
failure, in the JSON report, in the dump and in ``python -m leakcheck
show``."""

import json
import os
import re
import sys

LEAKY = '''
import os
import socket

_KEPT = []

def test_pipe():
    r, w = os.pipe()
    _KEPT.append(r)
    os.close(w)

def test_socket():
    _KEPT.append(socket.socket().detach())

def test_file():
    _KEPT.append(os.open(__file__, os.O_RDONLY))

def test_closed():
    os.close(os.open(__file__, os.O_RDONLY))
'''

# What each test leaves open, as /proc/self/fd names it.
TARGETS = {"test_pipe": r"pipe:\[\d+\]", "test_socket": r"socket:\[\d+\]",
           "test_file": None}      # the test file's path (set below)


def test_a_leaked_fd_is_named_by_what_it_is_everywhere(pytester):
    path = pytester.makepyfile(test_fds=LEAKY)
    targets = dict(TARGETS, test_file=re.escape(str(path)))
    result = pytester.runpytest_subprocess(
        "--leaks", "--leaks-report=report.json", "--leaks-dump=out")
    result.assert_outcomes(failed=3, passed=1)
    text = result.stdout.str()

    report = json.loads((pytester.path / "report.json").read_text())
    tests = {t["id"].split("::")[1]: t for t in report["tests"]}
    assert tests["test_closed"]["verdict"] == "clean"
    # One dump per leak (memray's captures may lie beside them).
    dumps = sorted(p for p in (pytester.path / "out").iterdir()
                   if not p.name.endswith(".memray.bin"))
    assert len(dumps) == 3
    for name, target in targets.items():
        test = tests[name]
        # A debug build also counts the references the kept descriptors'
        # numbers take.
        assert test["verdict"] == "leak"
        assert set(test["leaking"]) - {"refs"} == {"fds"}, test["leaking"]
        fds = test["diagnosis"]["fds"]
        # One per re-run of the diagnosis, each a number and its target.
        assert len(fds) == test["diagnosis"]["runs"] >= 1, fds
        for entry in fds:
            assert isinstance(entry["fd"], int) and entry["fd"] > 2
            assert re.fullmatch(target, entry["target"]), entry
            # The failure says it as "fd -> target".
            assert f"  {entry['fd']} -> {entry['target']}\n" in text + "\n"

        dump = next(p for p in dumps if f"_{name}-" in p.name)
        shown = pytester.run(sys.executable, "-m", "leakcheck", "show",
                             str(dump))
        assert shown.ret == 0, shown.stderr.str()
        lines = shown.stdout.lines
        assert any(line.startswith("leaked: ")
                   and line.endswith("fds +1 +1 +1 +1") for line in lines), \
            lines
        assert "file descriptors the re-runs left open (fd -> what it " \
               "is):" in lines
        assert [line for line in lines if line.startswith("  ")] == \
            [f"  {e['fd']} -> {e['target']}" for e in fds]
        assert not any("no surviving objects" in line for line in lines)


def test_a_dump_with_malformed_fds_is_refused(tmp_path):
    import pytest
    import leakcheck
    dump = tmp_path / "x.leaks.jsonl"
    dump.write_text(json.dumps({"schema": "leakcheck-dump/1", "test": "t",
                                "objects": 0, "fds": [{"fd": "3"}]}) + "\n")
    with pytest.raises(ValueError, match='"fds"'):
        leakcheck.load_dump(dump)
