"""Every report command on hostile input: exit 2 with one line naming the
file and what is wrong, or a result; never a traceback, a wait, or an
empty or torn output file.

Run as a command it tries every case, then as many random byte strings
and JSON values, and counts what was handled:

    python tests/python/report/test_report_hostile.py [--random N] [--seed S]
"""

import json
import os
import random
import signal
import stat
import subprocess
import sys
import tempfile

import pytest

from leakcheck.report import JOURNAL_SCHEMA, REPORT_SCHEMA, dump
from leakcheck.report.files import MAX_DIGITS

from report_helpers import command, handled, leak, refused, report_of, write

SURROGATE = "t.py::test_\udcff"
DEEP = "[" * 100000 + "]" * 100000
HEADER = {"schema": dump.SCHEMA}


def _journal(*events):
    """A journal's text: its header, then `events`, each a line."""
    head = {"schema": JOURNAL_SCHEMA, "pid": 0, "host": "", "report": {}}
    return "".join(json.dumps(e) + "\n" for e in (head,) + events)


def _dump(head, *entries):
    return "".join(json.dumps(e) + "\n" for e in (head,) + entries)


# Each case: (name, command, what the input file holds, the arguments
# after the file, the pattern of the one error line ({path} the file), or
# None when the command runs.  "FIFO" is a FIFO, a path starting with "/"
# that path itself.
CASES = [
    # html
    ("html: a lone surrogate in an id", "html",
     report_of(leak(SURROGATE)), ["-o", "{dir}/page.html"], None),
    ("html: a diagnosis that is a string", "html",
     report_of(leak(diagnosis="text")), ["-o", "{dir}/page.html"],
     '*report {path}: * has a "diagnosis" that is not an object'),
    ("html: a diagnosis that is a list", "html",
     report_of(leak(diagnosis=[1, "x"])), ["-o", "{dir}/page.html"],
     '*has a "diagnosis" that is not an object'),
    ("html: a delta of 10**400", "html",
     report_of(leak(deltas={"blocks": [10 ** 400, 1, 1]})),
     ["-o", "{dir}/page.html"],
     '*report {path}: * has "deltas" that are not lists of integers*'),
    ("html: a FIFO", "html", "FIFO", ["-o", "{dir}/page.html"],
     "*report {path} is not a regular file"),
    ("html: deep nesting", "html", DEEP, ["-o", "{dir}/page.html"],
     "*report {path} is not a leakcheck file: its JSON nests too deeply*"),
    ("html: a directory", "html", "/", ["-o", "{dir}/page.html"],
     "*report / is not a regular file"),
    # gate
    ("gate --format github: an environment that is a string", "gate",
     report_of(leak(), environment="x"), ["--format", "github"],
     '*report {path}: "environment" is not an object'),
    ("gate --format github: an environment that is a list", "gate",
     report_of(leak(), environment=[1]), ["--format", "github"],
     '*report {path}: "environment" is not an object'),
    ("gate: a journal line with an unknown verdict", "gate:journal",
     _journal({"record": {"id": "a", "verdict": "maybe"}}), [],
     "*journal {path}, line 2, has verdict 'maybe', not one of *"),
    ("gate: a journal line with no verdict", "gate:journal",
     _journal({"record": {"id": "a"}}), [],
     "*journal {path}, line 2, has verdict None, not one of *"),
    ("gate: a journal whose report is not an object", "gate:journal",
     _journal().replace('"report": {}', '"report": [1]'), [],
     '*journal {path}, line 1, has no "report" object'),
    ("gate: a journal whose report is a string", "gate:journal",
     _journal().replace('"report": {}', '"report": "leakcheck-report/1"'),
     [], '*journal {path}, line 1, has no "report" object'),
    ("gate: /dev/zero", "gate", "/dev/zero", [],
     "*report /dev/zero is not a regular file"),
    ("gate: a number with too many digits", "gate",
     '{"schema": "leakcheck-report/1", "tests": [], "x": '
     + "1" * (MAX_DIGITS + 1) + "}", [],
     f"*report {{path}} is not a leakcheck file: it holds an integer of "
     f"{MAX_DIGITS + 1} digits, out of range"),
    ("gate: NaN", "gate", '{"schema": "leakcheck-report/1", "tests": [], '
     '"x": NaN}', [], "*report {path} is not a leakcheck file: it holds "
     "the number NaN, out of range"),
    ("gate: bytes that are not UTF-8", "gate", b"\xff\xfe{}", [],
     "*report {path} is not UTF-8 text"),
    ("gate: an empty file", "gate", "", [],
     "*report {path} is not valid JSON: *"),
    ("gate: a run_id that is a number", "gate",
     report_of(environment={"run_id": 5}), [],
     '*report {path}: "environment": "run_id" is not a non-empty string'),
    # show and load_dump
    ("show: a FIFO", "show", "FIFO", [], "*dump {path} is not a regular file"),
    ("show: /dev/zero", "show", "/dev/zero", [],
     "*dump /dev/zero is not a regular file"),
    ("show: deep nesting", "show", DEEP, [],
     "*dump {path}: line 1 nests too deeply to read"),
    ('show: "deltas": [1]', "show", _dump(dict(HEADER, deltas=[1])), [],
     '*dump {path}: line 1 has "deltas" that are not lists of integers by '
     'probe'),
    ('show: {"objects": 5} and no object', "show",
     _dump(dict(HEADER, objects=5)), [],
     "*dump {path} lists 0 objects, its header says 5 (a truncated file?)"),
    ("show: a nested leaking", "show", _dump(dict(HEADER,
                                                  leaking=[["blocks"]])),
     [], '*dump {path}: line 1 has a "leaking" that is not a list of probe '
         'names'),
    ("show: a size of 10**400", "show",
     _dump(dict(HEADER, objects=1), {"type": "list", "size": 10 ** 400}),
     [], '*dump {path}: line 2 has no string "type" and integer "size"'),
    ("show: a lone surrogate in a type", "show",
     _dump(dict(HEADER, objects=1), {"type": "T\udcff", "size": 8}), [],
     None),
]


def _path(tmp, content):
    if content == "FIFO":
        path = os.path.join(tmp, "input")
        os.mkfifo(path)
        return path
    if isinstance(content, str) and content.startswith("/"):
        return content
    return write(os.path.join(tmp, "input"), content)


def _argv(tmp, name, content, rest):
    path = _path(tmp, content)
    if name.endswith(":journal"):
        os.rename(path, os.path.join(tmp, "r.json.journal"))
        path = os.path.join(tmp, "r.json.journal")
        return "gate", path, [os.path.join(tmp, "r.json")]
    return name, path, [path] + [a.format(dir=tmp) for a in rest]


def try_case(tmp, name, content, rest, pattern):
    """Runs one case in the folder `tmp`; what went wrong, or None."""
    name, path, argv = _argv(tmp, name, content, rest)
    result = command(name, *argv)
    page = os.path.join(tmp, "page.html")
    if pattern is None:
        if not handled(result, name) or result.status == 2:
            return f"refused: {result!r}"
    elif not refused(result, name, pattern.format(path=path)):
        return f"not refused as {pattern!r}: {result!r}"
    elif os.path.lexists(page):
        return "a page was written for unusable input"
    return None


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_hostile_input(tmp_path, case):
    _, name, content, rest, pattern = case
    assert try_case(str(tmp_path), name, content, rest, pattern) is None


def test_a_lone_surrogate_in_an_id_is_escaped_on_the_page(tmp_path):
    path = write(tmp_path / "r.json", report_of(leak(SURROGATE)))
    result = command("html", path, "-o", tmp_path / "page.html")
    assert result.status == 0 and result.err == []
    assert "test_\\udcff" in (tmp_path / "page.html").read_text()


def test_show_prints_a_lone_surrogate_escaped(tmp_path):
    path = write(tmp_path / "d.leaks.jsonl", _dump(
        dict(HEADER, objects=1), {"type": "T\udcff", "size": 8}))
    result = command("show", path)
    assert result.status == 0
    assert any("T\udcff" in line for line in result.out)


def test_a_baseline_on_dev_full_is_refused_and_the_device_stays(tmp_path):
    path = write(tmp_path / "r.json", report_of(leak()))
    result = command("gate", path, "--write-baseline", "/dev/full")
    assert refused(result, "gate", "*cannot write baseline /dev/full: No "
                                   "space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_an_unwritable_page_is_refused_and_nothing_is_left(tmp_path):
    path = write(tmp_path / "r.json", report_of(leak()))
    out = tmp_path / "ro"
    out.mkdir()
    (out / "page.html").write_text("old")
    out.chmod(0o500)
    try:
        result = command("html", path, "-o", out / "page.html")
    finally:
        out.chmod(0o700)
    if os.geteuid() == 0:       # root writes anyway: a whole page
        assert result.status == 0
        assert (out / "page.html").read_text().rstrip().endswith("</html>")
    else:
        assert refused(result, "html", f"*cannot write {out}/page.html: *")
        assert (out / "page.html").read_text() == "old"
    assert sorted(os.listdir(out)) == ["page.html"]


KILLED_WHILE_WRITING = """
import os, signal, sys
from leakcheck import __main__ as cli
def die(fd):
    os.kill(os.getpid(), signal.SIGKILL)
os.fsync = die              # killed with the page written, not yet renamed
cli.main(sys.argv[1:])
"""


def test_a_page_killed_while_written_leaves_the_old_one_whole(tmp_path):
    path = write(tmp_path / "r.json", report_of(leak()))
    page = tmp_path / "page.html"
    page.write_text("the old page")
    argv = ["html", path, "-o", str(page)]
    killed = subprocess.run([sys.executable, "-c", KILLED_WHILE_WRITING]
                            + argv, cwd=tmp_path)    # not the source tree
    assert killed.returncode == -signal.SIGKILL
    assert page.read_text() == "the old page"
    result = command(*argv)
    assert result.status == 0
    assert page.read_text().rstrip().endswith("</html>")


def test_a_journal_whose_report_is_no_object_never_says_schema(tmp_path):
    write(tmp_path / "r.json.journal",
          _journal().replace('"report": {}', '"report": 5'))
    result = command("gate", tmp_path / "r.json")
    assert result.status == 2 and len(result.err) == 1
    assert "expected" not in result.err[0]


# ---- random input ----------------------------------------------------------

def _random_json(rng, depth=0):
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, -1, 1, 2 ** 63, -2 ** 63 - 1, 10 ** 400,
                           rng.randrange(-10 ** 6, 10 ** 6)])
    if kind == 3:
        return rng.choice([0.5, -1e300, 1.5])
    if kind in (4, 5):
        return rng.choice(["", "leak", "clean", "crashed", "blocks",
                           "\udcff", "t.py", "leakcheck: x", "é",
                           REPORT_SCHEMA, dump.SCHEMA])
    if kind == 6:
        return [_random_json(rng, depth + 1)
                for _ in range(rng.randrange(4))]
    keys = ["id", "verdict", "leaking", "deltas", "diagnosis", "tests",
            "schema", "environment", "objects", "type", "size", "native",
            "allocations", "runs", "file", "line", "judged", "record",
            "start", "report", "sites", "fds", "rootdir", "run_id"]
    return {rng.choice(keys): _random_json(rng, depth + 1)
            for _ in range(rng.randrange(5))}


def _random_dict(rng, depth):
    value = _random_json(rng, depth)
    return value if isinstance(value, dict) else {}


def random_inputs(rng):
    """An endless stream of (kind, content) of random inputs: bytes, JSON
    values, and reports, dumps and journals of random parts."""
    while True:
        shape = rng.randrange(5)
        if shape == 0:
            yield "bytes", bytes(rng.randrange(256)
                                 for _ in range(rng.randrange(40)))
        elif shape == 1:
            yield "json", _random_json(rng)
        elif shape == 2:
            tests = [dict(leak(f"t{i}"), **_random_dict(rng, 1))
                     if rng.randrange(2) else _random_json(rng, 2)
                     for i in range(rng.randrange(3))]
            yield "report", report_of(*tests)
        elif shape == 3:
            head = dict(HEADER, **_random_dict(rng, 2))
            yield "dump", _dump(head, *(_random_json(rng, 1)
                                        for _ in range(rng.randrange(3))))
        else:
            yield "journal", _journal(*(_random_dict(rng, 1)
                                        for _ in range(rng.randrange(3))))


def try_random(tmp, kind, content, tally=None):
    """Runs every command on one random input; what went wrong, or None.
    `tally` {(command, exit status): count} counts what they did."""
    if kind == "journal":
        write(os.path.join(tmp, "r.json.journal"), content)
        runs = [("gate", [os.path.join(tmp, "r.json")])]
    else:
        path = write(os.path.join(tmp, "input"), content)
        runs = [("gate", [path, "--format", "github"]),
                ("html", [path, "-o", os.path.join(tmp, "page.html")]),
                ("show", [path])]
    for name, argv in runs:
        try:
            result = command(name, *argv)
        except Exception as e:          # what the count is about
            return f"{name}: {type(e).__name__}: {e}"
        if not handled(result, name):
            return f"{name}: {result!r}"
        if tally is not None:
            tally[name, result.status] = tally.get((name, result.status),
                                                   0) + 1
    return None


def test_random_inputs(tmp_path):
    rng = random.Random(0)
    stream = random_inputs(rng)
    for _ in range(150):
        kind, content = next(stream)
        tmp = tempfile.mkdtemp(dir=tmp_path)
        assert try_random(tmp, kind, content) is None, (kind, content)


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--random", type=int, default=1000, metavar="N")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    failures = []
    with tempfile.TemporaryDirectory() as top:
        for i, (label, name, content, rest, pattern) in enumerate(CASES):
            tmp = tempfile.mkdtemp(dir=top)
            problem = try_case(tmp, name, content, rest, pattern)
            if problem:
                failures.append(f"{label}: {problem}")
        stream = random_inputs(random.Random(args.seed))
        tally = {}
        for _ in range(args.random):
            kind, content = next(stream)
            tmp = tempfile.mkdtemp(dir=top)
            problem = try_random(tmp, kind, content, tally)
            if problem:
                failures.append(f"random {kind}: {problem}")
    tried = len(CASES) + args.random
    print(f"hostile inputs: {len(CASES)} named cases, {args.random} random "
          f"inputs (seed {args.seed}; each random one through gate, html "
          f"and show): {tried} tried, {tried - len(failures)} handled")
    print("random inputs, by command and exit status: " + ", ".join(
        f"{name} {status}: {n}"
        for (name, status), n in sorted(tally.items())))
    for failure in failures:
        print(f"  NOT HANDLED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
