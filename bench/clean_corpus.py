"""Clean verdicts in a row: generates a corpus of clean tests (json, re,
logging, warnings, dataclasses, asyncio, joined threads, tempfile,
subprocess, decimal, enum, a warm lru_cache, sockets, sqlite3, ...), runs
it under `pytest --leaks` until at least --verdicts tests have been judged,
and counts the verdicts.  Every test in the corpus is clean: a leak verdict
is a false alarm, printed with its deltas.

    python bench/clean_corpus.py [--verdicts 1000] [--python PYTHON]
                                 [--repeat N] [--probes P] [-n WORKERS]

PYTHON is an interpreter with leakcheck and pytest installed (default:
this one).  Exits 1 on any false alarm or error verdict, 0 otherwise; the
last line is the tally, with how many clean tests ran once (their
reported run alone measured).  tests/python/plugin/test_plugin_corpus.py runs a
small round of it in ./scripts/test.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HEADER = '''
import asyncio
import base64
import collections
import contextlib
import copy
import csv
import dataclasses
import datetime
import decimal
import enum
import functools
import hashlib
import io
import itertools
import json
import logging
import pathlib
import pickle
import queue
import random
import re
import socket
import sqlite3
import string
import struct
import subprocess
import sys
import tempfile
import textwrap
import threading
import typing
import unittest
import uuid
import warnings
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest


@dataclasses.dataclass
class Point:
    x: int
    y: int = 0
    tags: list = dataclasses.field(default_factory=list)


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


@functools.lru_cache(maxsize=64)
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


fib(40)                                  # warm: every key is in the cache

LOG = logging.getLogger("corpus")
'''

# One clean test body per entry; {n} is the variant number.
BODIES = {
    "json": 'assert json.loads(json.dumps({{"a": [1, {n}], "b": "x" * {n}}}))'
            '["a"] == [1, {n}]',
    "re": 'assert re.match(r"(\\d+)-{n}$", "12-{n}").group(1) == "12"\n'
          '    assert re.sub("[aeiou]", "", "variant {n}") == "vrnt {n}"',
    "logging": 'LOG.warning("message %d", {n})\n'
               '    logging.getLogger("corpus.child").info("quiet %s", {n})',
    "warnings": 'with warnings.catch_warnings(record=True) as seen:\n'
                '        warnings.simplefilter("always")\n'
                '        warnings.warn("corpus {n}", UserWarning)\n'
                '    assert len(seen) == 1',
    "dataclasses": 'p = Point({n}, tags=["a"])\n'
                   '    assert dataclasses.asdict(dataclasses.replace(p, y=2))'
                   ' == {{"x": {n}, "y": 2, "tags": ["a"]}}',
    "asyncio": 'async def main():\n'
               '        await asyncio.sleep(0)\n'
               '        return {n}\n'
               '    assert asyncio.run(main()) == {n}',
    "threads": 'out = []\n'
               '    threads = [threading.Thread(target=out.append, args=(i,))'
               ' for i in range(3)]\n'
               '    for t in threads:\n'
               '        t.start()\n'
               '    for t in threads:\n'
               '        t.join()\n'
               '    assert sorted(out) == [0, 1, 2]',
    "executor": 'with ThreadPoolExecutor(max_workers=2) as pool:\n'
                '        assert list(pool.map(abs, [-1, -{n}])) == [1, {n}]',
    "tempfile": 'with tempfile.TemporaryDirectory() as d:\n'
                '        path = pathlib.Path(d, "f{n}.txt")\n'
                '        path.write_text("x" * {n})\n'
                '        assert path.read_text() == "x" * {n}',
    "tmp_path": 'def inner(p):\n'
                '        (p / "g").write_bytes(b"{n}")\n'
                '        return (p / "g").read_bytes()\n'
                '    with tempfile.NamedTemporaryFile() as f:\n'
                '        f.write(b"abc")\n'
                '        f.flush()',
    "subprocess": 'r = subprocess.run([sys.executable, "-c", "print({n})"],'
                  ' capture_output=True, text=True, check=True)\n'
                  '    assert r.stdout.strip() == "{n}"',
    "decimal": 'with decimal.localcontext() as ctx:\n'
               '        ctx.prec = 6\n'
               '        assert decimal.Decimal("1.{n}") * 3 == '
               'decimal.Decimal("1.{n}") + decimal.Decimal("1.{n}") * 2',
    "enum": 'assert Color({n} % 3 + 1) in Color\n'
            '    assert [c.name for c in Color] == ["RED", "GREEN", "BLUE"]',
    "lru_cache": 'assert fib(30) == 832040 and fib({n} % 40) >= 0',
    "collections": 'c = collections.Counter("variant{n}")\n'
                   '    d = collections.deque(range({n}), maxlen=5)\n'
                   '    assert c["v"] == 1 and len(d) <= 5',
    "datetime": 'd = datetime.datetime(2020, 1, {n} % 28 + 1, 12, 30)\n'
                '    assert datetime.datetime.fromisoformat(d.isoformat()) '
                '== d',
    "strptime": 'assert datetime.datetime.strptime("2021-03-{n:02d}", '
                '"%Y-%m-%d").day == {n}',
    "io": 'buf = io.StringIO()\n'
          '    csv.writer(buf).writerow(["a", {n}])\n'
          '    assert buf.getvalue().startswith("a,{n}")',
    "struct": 'assert struct.unpack("<iq", struct.pack("<iq", {n}, -{n})) '
              '== ({n}, -{n})',
    "hashlib": 'assert len(hashlib.sha256(b"{n}").hexdigest()) == 64\n'
               '    assert zlib.decompress(zlib.compress(b"x" * {n})) '
               '== b"x" * {n}',
    "pickle": 'p = Point({n}, 1, ["t"])\n'
              '    assert pickle.loads(pickle.dumps(p)) == copy.deepcopy(p)',
    "typing": 'assert typing.get_args(typing.Dict[str, typing.List[int]]) '
              '== (str, typing.List[int])',
    "exceptions": 'def fail():\n'
                  '        raise ValueError("bad {n}")\n'
                  '    with pytest.raises(ValueError, match="bad {n}"):\n'
                  '        fail()',
    "socket": 'a, b = socket.socketpair()\n'
              '    with a, b:\n'
              '        a.sendall(b"{n}")\n'
              '        assert b.recv(16) == b"{n}"',
    "sqlite": 'with contextlib.closing(sqlite3.connect(":memory:")) as db:\n'
              '        db.execute("create table t (x)")\n'
              '        db.execute("insert into t values (?)", ({n},))\n'
              '        assert db.execute("select x from t").fetchone() '
              '== ({n},)',
    "queue": 'q = queue.Queue()\n'
             '    for i in range({n} % 7 + 1):\n'
             '        q.put(i)\n'
             '    assert q.get() == 0',
    "random": 'r = random.Random({n})\n'
              '    assert sorted(r.sample(range(100), 5)) == '
              'sorted(random.Random({n}).sample(range(100), 5))',
    "text": 'assert textwrap.fill("word " * {n}, 20).count("\\n") >= 0\n'
            '    assert string.Template("$a-$b").substitute(a={n}, b=2) '
            '== "{n}-2"',
    "base64": 'assert base64.b64decode(base64.b64encode(b"{n}")) == b"{n}"\n'
              '    assert uuid.UUID(int={n}).int == {n}',
    "itertools": 'assert list(itertools.islice(itertools.count({n}), 3)) == '
                 '[{n}, {n} + 1, {n} + 2]\n'
                 '    assert functools.reduce(lambda a, b: a + b, range({n}),'
                 ' 0) == sum(range({n}))',
    "comprehensions": 'd = {{i: str(i) for i in range({n} * 10)}}\n'
                      '    assert sorted(d, reverse=True)[0] == {n} * 10 - 1',
    "generator": 'def gen():\n'
                 '        yield from range({n})\n'
                 '    assert sum(gen()) == sum(range({n}))',
    "monkeypatch": 'pass  # fixture: see signature',
    "capsys": 'print("out {n}")\n'
              '    assert capsys.readouterr().out == "out {n}\\n"',
    "caplog": 'with caplog.at_level(logging.INFO):\n'
              '        LOG.info("logged {n}")\n'
              '    assert "logged {n}" in caplog.text',
}

FIXTURES = {"monkeypatch": "monkeypatch", "capsys": "capsys",
            "caplog": "caplog", "tmp_path": "tmp_path"}
EXTRA = {
    "monkeypatch": '    monkeypatch.setenv("CORPUS_{n}", "1")\n'
                   '    monkeypatch.setattr("os.sep", "/")\n',
    "tmp_path": '    assert inner(tmp_path) == b"{n}"\n',
}

UNITTEST = '''

class TestUnit{n}(unittest.TestCase):
    def setUp(self):
        self.data = list(range({n}))

    def test_unit(self):
        self.assertEqual(len(self.data), {n})
        with self.subTest(n={n}):
            self.assertTrue(True)
'''


def test_file(n):
    """The source of corpus file number n (variant n of every body)."""
    parts = [HEADER]
    for name, body in BODIES.items():
        fixture = FIXTURES.get(name)
        params = fixture if fixture else ""
        text = body.format(n=n + 1)
        parts.append(f"\n\ndef test_{name}_{n}({params}):\n    {text}\n"
                     + EXTRA.get(name, "").format(n=n + 1))
    parts.append(UNITTEST.format(n=n + 1))
    return "".join(parts)


def tests_per_file():
    return len(BODIES) + 1


def run_round(python, folder, files, args):
    """Runs the corpus once; returns the report's test records."""
    report = folder / "report.json"
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "--leaks", f"--leaks-report={report}", *args,
           *[str(folder / f"test_corpus_{i}.py") for i in range(files)]]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    if not report.exists():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"clean_corpus: no report from {cmd!r}")
    with open(report, encoding="utf-8") as f:
        return json.load(f)["tests"], proc


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=1000)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--repeat", type=int, default=None)
    parser.add_argument("--probes", default=None)
    parser.add_argument("-n", dest="workers", default=None)
    parser.add_argument("--files", type=int, default=10,
                        help="corpus files per round")
    args = parser.parse_args(argv)
    extra = []
    if args.repeat is not None:
        extra.append(f"--leaks-repeat={args.repeat}")
    if args.probes:
        extra.append(f"--leaks-probes={args.probes}")
    if args.workers:
        extra += ["-n", args.workers]
    files = max(1, min(args.files,
                       -(-args.verdicts // tests_per_file())))
    tally = {"leak": 0, "clean": 0, "error": 0, "skipped": 0}
    once = 0            # clean verdicts whose test ran once
    rounds = 0
    with tempfile.TemporaryDirectory(prefix="clean-corpus-") as tmp:
        folder = pathlib.Path(tmp)
        for i in range(files):
            (folder / f"test_corpus_{i}.py").write_text(test_file(i))
        while sum(tally.values()) < args.verdicts:
            rounds += 1
            records, proc = run_round(args.python, folder, files, extra)
            for rec in records:
                tally[rec["verdict"]] += 1
                if rec["verdict"] == "clean" and rec.get("test_runs") == 1:
                    once += 1
                if rec["verdict"] in ("leak", "error"):
                    print(f"FALSE ALARM {rec['verdict']}: {rec['id']} "
                          f"{rec.get('deltas')} {rec.get('reason') or ''}")
            if tally["error"] and not records:
                break
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True).stdout.strip()
    judged = tally["leak"] + tally["clean"]
    print(f"clean_corpus: Python {version}, {rounds} rounds of "
          f"{files * tests_per_file()} tests: {judged} verdicts, "
          f"{tally['clean']} clean, {tally['leak']} false alarms, "
          f"{tally['error']} errors, {tally['skipped']} skipped; "
          f"{once} of the clean ran once")
    return 1 if tally["leak"] or tally["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
