"""The crash journal read and written in-process: its shapes, its lock."""

import fnmatch
import json
import os
import socket

import pytest

import leakcheck.report as lcreport
from leakcheck.report import files, journal
from leakcheck.report.files import RawJSON

from report_helpers import command


def test_a_bad_journal_is_unusable_input(tmp_path):
    path = tmp_path / "r.json.journal"
    path.write_text(
        '{"schema": "leakcheck-journal/1", "report": {}}\nnot json\n{}\n')
    result = command("gate", tmp_path / "r.json")
    assert result.status == 2
    assert result.err == [f"leakcheck gate: error: journal "
                          f"{path}, line 2, is not valid JSON: "
                          f"Expecting value: line 1 column 1 (char 0)"]
    path.write_text('{"schema": "other"}\n')
    result = command("gate", tmp_path / "r.json")
    assert result.status == 2
    assert fnmatch.fnmatch(result.err[0], f"leakcheck gate: error: journal "
                                          f"{path} has schema 'other', *")


@pytest.mark.parametrize("lines, error", [
    (['{"schema": "leakcheck-journal/1", "report": []}'],
     'journal {path}, line 1, has no "report" object'),
    (['{"schema": "leakcheck-journal/1", "report": {}}',
      '{"record": {"id": "t.py::test_a", "verdict": "maybe"}}'],
     "journal {path}, line 2, has verdict 'maybe', not one of "
     + ", ".join(journal.VERDICTS)),
    (['{"schema": "leakcheck-journal/1", "report": {}}',
      '{"record": {"id": "t.py::test_a"}}'],
     "journal {path}, line 2, has verdict None, not one of "
     + ", ".join(journal.VERDICTS)),
])
def test_a_journal_of_the_wrong_shape_says_what(tmp_path, lines, error):
    path = tmp_path / "r.json.journal"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(lcreport.UnusableInput) as e:
        lcreport.load_report(str(tmp_path / "r.json"))
    assert str(e.value) == error.format(path=path)


def test_a_held_journal_is_not_taken(tmp_path):
    """The writer's lock: a second writer of the same journal is refused,
    naming the first; once the first is done, the path is free again."""
    path = str(tmp_path / "r.json.journal")
    first = journal.Journal(path, {})
    with pytest.raises(journal.InUse) as e:
        journal.Journal(path, {})
    assert e.value.strerror == journal.MSG_IN_USE.format(
        pid=os.getpid(), host=socket.gethostname())
    assert journal.read(path)["tests"] == []       # the first one's, intact
    first.write({"start": "t"})
    first.close(remove=True)
    assert not os.path.lexists(path)
    second = journal.Journal(path, {})
    second.close(remove=True)


def test_a_record_written_is_read_back_where_write_said(tmp_path):
    path = str(tmp_path / "r.json.journal")
    j = journal.Journal(path, {})
    record = {"id": "t", "n": [1, 2], "x": 0.1, "s": "\u00e9\ud800"}
    events = [{"start": "t"}, {"record": record}, {"finish": "t"}]
    where = j.write(*events)
    assert len(where) == 3
    # The record's text, as the report writes an entry; the line is JSON.
    text = j.read_record(where[1])
    assert isinstance(text, RawJSON)
    assert text == json.dumps(record) and json.loads(text) == record
    assert j.write({"done": True}) == [(where[-1][0] + where[-1][1],
                                        len('{"done":true}\n'))]
    # The lines, then NUL bytes as far as the file is reserved ahead
    # (Journal._copy); cut back to its lines when kept at the close.
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) >= j.size and not data[j.size:].strip(b"\0")
    assert [json.loads(line) for line in data[:j.size].splitlines()][1:] \
        == [*events, {"done": True}]
    size = j.size
    j.close(remove=False)
    assert os.path.getsize(path) == size


def test_a_journal_left_open_reads_as_its_lines(tmp_path):
    # A process that dies leaves the reserve after the last line: a
    # reader takes it for a torn last line, and every event is there.
    path = str(tmp_path / "r.json.journal")
    j = journal.Journal(path, {})
    events = [{"start": f"{i:04d}" + "t" * 500} for i in range(3000)]
    for event in events:
        j.write(event)
    assert j.size > journal.WINDOW          # a line across two windows
    assert os.path.getsize(path) > j.size
    # Read as a dead run's: every test began, none ended.
    doc = journal.read(path)
    assert [t["id"] for t in doc["tests"]] == [e["start"] for e in events]
    assert {t["verdict"] for t in doc["tests"]} == {"crashed"}
    with open(path, "rb") as f:
        lines = f.read()[:j.size].splitlines()
    assert [json.loads(line) for line in lines][1:] == events
    j.close(remove=True)


def test_a_journal_that_cannot_be_mapped_is_appended_to(tmp_path,
                                                        monkeypatch):
    def refused(*args, **kwargs):
        raise OSError(19, "No such device")
    monkeypatch.setattr(journal.mmap, "mmap", refused)
    path = str(tmp_path / "r.json.journal")
    j = journal.Journal(path, {})
    where = j.write({"start": "t"}, {"record": {"id": "t"}})
    assert not j.mapped
    assert os.path.getsize(path) == j.size
    assert j.read_record(where[1]) == '{"id": "t"}'
    with open(path) as f:
        assert [json.loads(line) for line in f][1:] == [
            {"start": "t"}, {"record": {"id": "t"}}]
    j.close(remove=True)


def test_a_record_text_is_what_the_report_writes_of_it_read_back(tmp_path):
    # What JSON has no type for is written as its str(), which is what a
    # reader gets back: the text copied into the report is the text the
    # record read back would be written as.
    path = str(tmp_path / "r.json.journal")
    j = journal.Journal(path, {})
    record = {"id": "t", "where": tmp_path, 1: (2, 3), "nan": float("nan")}
    text = j.read_record(j.write({"record": record})[0])
    assert text == files.encode_entry(json.loads(text))
    assert json.loads(text)["where"] == str(tmp_path)
    j.close(remove=True)
