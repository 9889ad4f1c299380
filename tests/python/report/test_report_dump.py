"""The dump file's format: names, reader, summary."""

import fnmatch
import json
import os

import pytest

import leakcheck
from leakcheck.report import dump

from report_helpers import command


@pytest.mark.parametrize("content, reason", [
    (None, "cannot read dump {path}: No such file or directory"),
    ("", "dump {path} is empty"),
    ('{"schema": "leakcheck-dump/1", "objects": 1}\n{"type": "list", "si',
     "dump {path}: line 2 is not valid JSON (a truncated file?)*"),
    ('{"schema": "leakcheck-dump/1", "objects": 2}\n'
     '{"type": "list", "size": 56}\n',
     "dump {path} lists 1 objects, its header says 2 (a truncated file?)"),
    ('{"schema": "leakcheck-report/1", "tests": []}',
     "dump {path} has schema 'leakcheck-report/1', expected "
     "'leakcheck-dump/1'"),
    ("[1, 2]", "dump {path}: line 1 is not a JSON object"),
    ("[" * 100000 + "]" * 100000,
     "dump {path}: line 1 nests too deeply to read"),
    ('{"schema": "leakcheck-dump/1", "deltas": [1]}',
     'dump {path}: line 1 has "deltas" that are not lists of integers by '
     'probe'),
    ('{"schema": "leakcheck-dump/1", "leaking": [["blocks"]]}',
     'dump {path}: line 1 has a "leaking" that is not a list of probe '
     'names'),
    ('{"schema": "leakcheck-dump/1", "objects": 5.5}',
     'dump {path}: line 1 has an "objects" count that is not an integer'),
    ('{"schema": "leakcheck-dump/1", "objects": 1}\n'
     '{"type": "list", "size": 1' + "0" * 400 + '}\n',
     'dump {path}: line 2 has no string "type" and integer "size"'),
    ("FIFO", "dump {path} is not a regular file"),
])
def test_show_on_unusable_input_exits_2(tmp_path, content, reason):
    """Each a line and exit 2, never a traceback, and never a wait (a FIFO
    with no writer, /dev/zero: show hung on both)."""
    path = tmp_path / "bad.leaks.jsonl"
    if content == "FIFO":
        os.mkfifo(path)
    elif content is not None:
        path.write_text(content)
    result = command("show", path)
    assert result.status == 2
    assert result.out == []
    assert len(result.err) == 1
    assert fnmatch.fnmatch(result.err[0], "leakcheck show: error: "
                           + reason.format(path=path))
    with pytest.raises(ValueError, match="dump"):
        leakcheck.load_dump(str(path))


def test_dump_names_stay_apart():
    ids = ["a/test_x.py::test[1]", "b/test_x.py::test[1]",
           "test_x.py::test[</script>]", "test_x.py::test[<script>]"]
    names = {dump.dump_name(i) for i in ids}
    assert len(names) == len(ids)
    assert all("/" not in n and n.endswith(dump.SUFFIX) for n in names)
    assert dump.dump_name(ids[0]).startswith("test_x.py_test_1-")


def test_a_report_and_its_format_are_json(tmp_path):
    leakcheck  # the module is importable without pytest
    header = {"schema": dump.SCHEMA, "test": "t", "objects": 0}
    (tmp_path / "d.leaks.jsonl").write_text(json.dumps(header) + "\n")
    data = leakcheck.load_dump(str(tmp_path / "d.leaks.jsonl"))
    assert data["objects"] == [] and data["test"] == "t"
    assert "no surviving objects listed" in "\n".join(dump.summary(data))
