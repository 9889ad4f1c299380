"""Helpers of the report layer's tests (a module of its own name: the
tests of tests/python run in one pytest, where "conftest" names three
modules)."""

import fnmatch
import io
import json
import os

from leakcheck import __main__ as cli
from leakcheck.report import REPORT_SCHEMA, record


class Result:
    """What a command did: its exit status and output lines."""

    def __init__(self, status, out, err):
        self.status = status
        self.out = out.splitlines()
        self.err = err.splitlines()

    def __repr__(self):
        return f"<exit {self.status}, out {self.out!r}, err {self.err!r}>"


def command(*argv):
    """Runs ``python -m leakcheck ARGV`` in this process."""
    args = cli.build_parser().parse_args([os.fspath(a) for a in argv])
    out, err = io.StringIO(), io.StringIO()
    status = args.run(args, out=out, err=err)
    return Result(status, out.getvalue(), err.getvalue())


def refused(result, name, pattern="*"):
    """Whether `result` is the refusal of an unusable input: exit 2, and
    on stderr one line naming the command and the file `name`, matching
    `pattern`."""
    return (result.status == 2 and len(result.err) == 1
            and result.err[0].startswith(f"leakcheck {name}: error: ")
            and fnmatch.fnmatchcase(result.err[0], pattern))


def handled(result, name):
    """Whether `result` is one a command may end with on any input: it ran
    (exit 0, or 1 for the gate's verdict) with nothing on stderr, or it
    refused the input in one line."""
    if result.status == 2:
        return refused(result, name)
    return result.status in (0, 1) and result.err == []


def report_of(*records, **fields):
    """A report document holding `records`."""
    doc = {"schema": REPORT_SCHEMA, "partial": False, "partial_reasons": [],
           "created": "2026-11-27T00:00:00Z", "environment": None,
           "settings": None, "probes": None, "summary": None,
           "tests": list(records)}
    doc.update(fields)
    return doc


def leak(test_id="t.py::test_a", **fields):
    """The record of a leak in blocks, as the plugin would write it."""
    fields.setdefault("leaking", ["blocks"])
    fields.setdefault("runs", 3)
    fields.setdefault("deltas", {"blocks": [1, 1, 1]})
    fields.setdefault("thresholds", {"blocks": 1})
    fields.setdefault("file", "t.py")
    fields.setdefault("line", 3)
    return record(test_id, "leak", "failed", **fields)


def write(path, value):
    """Writes `value` to `path`: bytes and str as they are (a lone
    surrogate too), anything else as JSON; returns the path as a str."""
    path = os.fspath(path)
    if isinstance(value, bytes):
        data = value
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
    else:
        data = json.dumps(value).encode("ascii")
    with open(path, "wb") as f:
        f.write(data)
    return path
