"""The crash journal of a report, and the one builder of report documents.

While ``pytest --leaks-report=REPORT`` runs, the process that writes the
report keeps ``REPORT.journal``: JSON lines, each appended with one
write(2) as its event happens, so that a process killed at any moment (a
segfault, SIGKILL, the out-of-memory killer, ``os._exit``) leaves every
event before it readable, and the cost per test stays constant:

    {"schema": JOURNAL_SCHEMA, "pid": n, "host": name, "created": time,
     "report": {"settings": ..., "probes": ..., "environment": ...}}
    {"start": test id, "file": path, "line": n}     a test began
    {"record": {...}}                               its report record
    {"finish": test id}                             it is over
    {"partial": reason}                             the run will not finish
    {"done": true}                                  the session ended

At the end the report is written whole (atomically) from the same events,
then the journal is removed.  A journal found beside a report therefore
means that its run did not end (or is still going): the journal holds
everything, and ``load_report`` (leakcheck.gate) builds the report from it.
A test that started and has no record is reported with the verdict
``crashed``: it is the test the process was running when it died.

Standard library only, as the gate.
"""

import datetime
import json
import os
import socket

from .gate import REPORT_SCHEMA, VERDICTS, UnusableInput, parse_json, read_text

JOURNAL_SCHEMA = "leakcheck-journal/1"
SUFFIX = ".journal"

MSG_DIED = ("the process died before the session finished; rebuilt from "
            "its journal {path}")
MSG_RUNNING = ("the run is still going (process {pid}); read from its "
               "journal {path}")
MSG_CRASHED = "the process died while this test ran"
MSG_UNFINISHED = "the test had not finished when the run ended: {reason}"


def journal_path(report_path):
    return os.fspath(report_path) + SUFFIX


def _now():
    return (datetime.datetime.now(datetime.timezone.utc)
            .strftime("%Y-%m-%dT%H:%M:%SZ"))


def crashed_record(test_id, reason, file=None, line=None, worker=None):
    """The record of a test that did not finish: its process, or its
    pytest-xdist worker, died while it ran."""
    return {"id": test_id, "verdict": "crashed", "outcome": "crashed",
            "known": False, "reason": reason, "file": file, "line": line,
            "warmup": None, "repeat": None, "runs": 0, "probes": [],
            "leaking": [], "deltas": {}, "thresholds": {},
            "diagnosis": None, "worker": worker, "unread": {},
            "threads": [], "test_runs": 0, "hunt_seconds": 0.0}


def document(meta, records, running=(), reasons=(), created=None,
             unfinished=MSG_CRASHED):
    """The report document (schema REPORT_SCHEMA) of `meta` (settings,
    probes, environment), `records` {test id: record}, and `running`
    {test id: start event} of the tests that began and never finished:
    those without a record are reported crashed, for `unfinished`."""
    records = dict(records)
    for test_id, start in dict(running).items():
        if test_id not in records:
            records[test_id] = crashed_record(
                test_id, unfinished, start.get("file"), start.get("line"),
                start.get("worker"))
    summary = {"tests": len(records)}
    summary.update({v: 0 for v in VERDICTS})
    summary["known"] = 0
    for r in records.values():
        summary[r["verdict"]] += 1
        summary["known"] += bool(r.get("known"))
    reasons = list(dict.fromkeys(reasons))
    return {
        "schema": REPORT_SCHEMA,
        "partial": bool(reasons),
        "partial_reasons": reasons,
        "created": created or _now(),
        "environment": meta.get("environment"),
        "settings": meta.get("settings"),
        "probes": meta.get("probes"),
        "summary": summary,
        "tests": [records[k] for k in sorted(records)],
    }


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


# One encoder for every line: json.dumps() with arguments makes a new one
# per call.
_encode = json.JSONEncoder(separators=(",", ":"), default=str).encode


class Journal:
    """The writing end: a journal created afresh at `path` (whatever was
    there is replaced).  Raises OSError when it cannot be written."""

    def __init__(self, path, meta):
        self.path = path
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                          | os.O_APPEND | os.O_CLOEXEC, 0o666)
        self.write({"schema": JOURNAL_SCHEMA, "pid": os.getpid(),
                    "host": socket.gethostname(), "created": _now(),
                    "report": meta})

    def write(self, event):
        """Appends one event as one line with one write: a kill leaves it
        whole or, at worst, the last line torn."""
        _write_all(self.fd, (_encode(event) + "\n").encode("ascii"))

    def close(self, remove):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if remove:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def _alive(header):
    """Whether the process that wrote `header` still runs (here)."""
    pid = header.get("pid")
    if header.get("host") != socket.gethostname() or not isinstance(pid, int) \
            or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    try:        # a zombie has died: its parent has only not reaped it yet
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def recover(report_path, write):
    """Turns the journal of a run into `report_path` when that run died,
    with `write(path, document)`, and removes the journal.  Returns the
    document, or None when there is no journal or its run still goes.
    UnusableInput when the journal cannot be read."""
    path = journal_path(report_path)
    if not os.path.lexists(path):
        return None
    doc = read(path)
    if any(r.startswith(MSG_RUNNING.split("{")[0])
           for r in doc["partial_reasons"]):
        return None
    write(report_path, doc)
    os.unlink(path)
    return doc


def read(path):
    """The report document a journal holds (see the module's text), with
    the process's fate in "partial_reasons"; UnusableInput otherwise.
    A last line torn by a kill is left out; any other bad line makes the
    journal unusable."""
    text = read_text(path, "journal")
    lines = text.split("\n")
    lines.pop()                 # "" when the last line is whole, else torn
    if not lines:
        raise UnusableInput(f"journal {path} is empty")
    events = []
    for n, line in enumerate(lines, 1):
        event = parse_json(line, f"{path}, line {n},", "journal")
        if not isinstance(event, dict):
            raise UnusableInput(f"journal {path}, line {n}, is not a "
                                f"JSON object")
        events.append(event)
    header = events[0]
    if header.get("schema") != JOURNAL_SCHEMA:
        raise UnusableInput(f"journal {path} has schema "
                            f"{header.get('schema')!r}, expected "
                            f"{JOURNAL_SCHEMA!r}")
    if not isinstance(header.get("report"), dict):
        raise UnusableInput(f"journal {path}, line 1, has no \"report\" "
                            f"object")
    records, running, reasons, done = {}, {}, [], False
    for n, event in enumerate(events[1:], 2):
        if isinstance(event.get("start"), str):
            running[event["start"]] = event
        elif isinstance(event.get("record"), dict) and isinstance(
                event["record"].get("id"), str):
            if event["record"].get("verdict") not in VERDICTS:
                raise UnusableInput(
                    f"journal {path}, line {n}, has verdict "
                    f"{event['record'].get('verdict')!r}, not one of "
                    f"{', '.join(VERDICTS)}")
            records[event["record"]["id"]] = event["record"]
        elif isinstance(event.get("finish"), str):
            running.pop(event["finish"], None)
        elif isinstance(event.get("partial"), str):
            reasons.append(event["partial"])
        elif event.get("done") is True:
            done = True
        else:
            raise UnusableInput(f"journal {path}, line {n}, is not a "
                                f"journal event")
    unfinished = MSG_CRASHED
    if not done:
        if _alive(header):
            reasons.append(MSG_RUNNING.format(pid=header["pid"], path=path))
            running = {}
        else:
            reasons.append(MSG_DIED.format(path=path))
    elif reasons:
        unfinished = MSG_UNFINISHED.format(reason=reasons[-1])
    return document(header["report"], records, running, reasons,
                    created=header.get("created"), unfinished=unfinished)
