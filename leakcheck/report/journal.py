"""The crash journal of a report.

While ``pytest --leaks-report=REPORT`` runs, the process that writes the
report keeps ``REPORT.journal``: JSON lines, each appended as its event
happens, so that a process killed at any moment (a segfault, SIGKILL, the
out-of-memory killer, ``os._exit``) leaves every event before it
readable, and the cost per test stays constant.  They are copied into
the file mapped into memory, which the kernel keeps when the process
dies, and no system call is made but once in a WINDOW of bytes; the file
is reserved on disk that far ahead, and NUL bytes follow its last line
until the session ends (a reader leaves them out as it leaves out a torn
last line).  Where the file cannot be mapped, each write is a write(2):

    {"schema": JOURNAL_SCHEMA, "pid": n, "host": name, "created": time,
     "report": {"settings": ..., "probes": ..., "environment": ...}}
    {"start": test id, "file": path, "line": n}     a test began
    {"record": {...}}                               its report record
    {"finish": test id}                             it is over
    {"partial": reason}                             the run will not finish
    {"done": true}                                  the session ended

At the end the report is written whole (atomically) from the same events,
then the journal is removed.  The writing session holds an exclusive
flock(2) on its journal from the start to the end: a second session given
the same report path finds it held and is refused (InUse) rather than
replacing the first one's journal, which would lose a crash of either.
A journal found beside a report therefore means that its run did not end
(or is still going): the journal holds everything, and ``load_report``
(leakcheck.report) builds the report from it.
A test that started and has no record is reported with the verdict
``crashed``: it is the test the process was running when it died.

Standard library only, as the gate.  The report document is
leakcheck.report.schema's.
"""

import fcntl
import json
import mmap
import os
import socket

from .files import RawJSON, UnusableInput, encode_entry, \
    one_shot_encoder, parse_json, read_text
from .schema import JOURNAL_SCHEMA, VERDICTS, document, now

SUFFIX = ".journal"

MSG_DIED = ("the process died before the session finished; rebuilt from "
            "its journal {path}")
MSG_RUNNING = ("the run is still going (process {pid}); read from its "
               "journal {path}")
MSG_CRASHED = "the process died while this test ran"
MSG_UNFINISHED = "the test had not finished when the run ended: {reason}"
MSG_IN_USE = ("another session (process {pid} on {host}) is writing this "
              "report; give each session its own report path")
MSG_IN_USE_UNKNOWN = ("another session is writing this report; give each "
                      "session its own report path")


class InUse(OSError):
    """The journal is held by another live session; str() says which."""

    def __init__(self, path, header):
        pid, host = header.get("pid"), header.get("host")
        message = (MSG_IN_USE.format(pid=pid, host=host)
                   if isinstance(pid, int) and isinstance(host, str)
                   else MSG_IN_USE_UNKNOWN)
        super().__init__(16, message, path)     # EBUSY
        self.pid = pid
        self.host = host


def journal_path(report_path):
    return os.fspath(report_path) + SUFFIX


# The bytes of the journal mapped into memory at a time, for its appends
# (Journal._copy): a multiple of any page size (mmap's offsets must be).
WINDOW = 1 << 20


def _let_go(mapping):
    """Closes a mapping of the journal, if any; None."""
    if mapping is not None:
        mapping.close()
    return None


def _write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


# One encoder for every line: json.dumps() with arguments makes a new one
# per call.  Without the check for circular references: an event is a
# tree of dicts, lists and scalars, and the check was a good part of a
# test's journaling (bench/bench_journal.py measures it).
_encode = one_shot_encoder(separators=(",", ":"), default=str)

# A record's line: its record encoded as a report's entry is (files.py),
# so that the final report copies that text instead of decoding and
# encoding each record again (read_record()).
_RECORD_HEAD = '{"record": '
_RECORD_TAIL = "}\n"


def record_line(record):
    """The journal line of the event {"record": `record`}, as text (ASCII
    only): Journal.append() takes it encoded, alone or after other lines;
    read_record() finds the record's text in it."""
    return _RECORD_HEAD + encode_entry(record) + _RECORD_TAIL


def event_line(event):
    """The journal line of `event` (any event), as text (ASCII only)."""
    if len(event) == 1 and "record" in event:
        return record_line(event["record"])
    return _encode(event) + "\n"


def _line(event):
    """The journal line of `event`, as ASCII bytes."""
    return event_line(event).encode("ascii")


def _header_of(path):
    """The first line of the journal at `path` as a dict, or {}."""
    try:
        with open(path, "rb") as f:
            header = json.loads(f.readline())
    except (OSError, ValueError):
        return {}
    return header if isinstance(header, dict) else {}


def _claim(path):
    """A descriptor of the journal at `path`, emptied and locked for this
    process alone; InUse when a live session holds it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND
                     | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise InUse(path, _header_of(path)) from None
        except BaseException:
            os.close(fd)
            raise
        # Still the file at `path`?  A session that finishes removes its
        # journal before it lets go of it: the lock would then be on a
        # file nobody can find.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            return fd
        os.close(fd)


class Journal:
    """The writing end: a journal started afresh at `path` (what a dead
    run left there is replaced) and locked until close().  Raises InUse
    when another live session writes it, OSError when it cannot be
    written."""

    def __init__(self, path, meta):
        self.path = path
        self.fd = _claim(path)
        self.size = 0               # bytes written: the file's, once claimed
        self.view = None            # the file mapped, for read_record()
        # The part of the file that write() copies into: WINDOW bytes from
        # `base`, reserved on disk and mapped; None when not mapped, and
        # for good once `mapped` is False (the file could not be).
        self.window = None
        self.base = 0
        self.mapped = True
        self.write({"schema": JOURNAL_SCHEMA, "pid": os.getpid(),
                    "host": socket.gethostname(), "created": now(),
                    "report": meta})

    def write(self, *events):
        """Appends the events, one line each, at once: a kill leaves them
        whole or, at worst, the last line torn.  Returns where each line
        is in the file, [(offset, length)], for read_record()."""
        lines = [_line(event) for event in events]
        at = self.append(b"".join(lines))
        where = []
        for line in lines:
            where.append((at, len(line)))
            at += len(line)
        return where

    def append(self, data):
        """Appends `data`, whole lines as ASCII bytes (record_line(),
        event_line()), at once, as write() does; returns the offset of its
        first byte in the file."""
        at = self.size
        if not self.mapped or not self._copy(data):
            try:
                _write_all(self.fd, data)
            except BaseException:
                # Part of it may be written: the size is the file's.
                self.size = os.fstat(self.fd).st_size
                raise
        self.size = at + len(data)
        return at

    def read_record(self, where):
        """The JSON text of the record whose line is at `where` (what
        write() returned for it), read back from the file: a RawJSON.
        Read from the file mapped into memory (mapped again when it grew
        past the mapping), so that the final report, which reads every
        record, makes no system call per test; with pread(2) where the
        file cannot be mapped."""
        offset, length = where
        start = offset + len(_RECORD_HEAD)
        end = offset + length - len(_RECORD_TAIL)
        view = self.view
        if view is None or end > len(view):
            view = self._map()
        if view is None:
            text = os.pread(self.fd, end - start, start)
        else:
            text = view[start:end]
        return RawJSON(text.decode("ascii"))

    def _map(self):
        """The whole file mapped for reading (replacing an older mapping),
        or None when it cannot be."""
        self.view = _let_go(self.view)
        try:
            self.view = mmap.mmap(self.fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            self.view = None
        return self.view

    def _copy(self, data):
        """Copies `data` after the journal's last line, into the file
        mapped into memory (WINDOW): no system call but once in a window.
        The file is reserved on disk a window ahead (posix_fallocate: a
        full disk says so then, instead of a SIGBUS at a copy), and reads
        as NUL bytes after the last line, which a reader takes for a torn
        last line: the process's death loses nothing written, as the page
        cache keeps it.  False when the file cannot be mapped."""
        at = self.size - self.base
        if self.window is not None and at + len(data) <= WINDOW:
            self.window[at:at + len(data)] = data
            return True
        pos, end = self.size, self.size + len(data)
        try:
            while pos < end:
                window = self.window
                if window is None or pos >= self.base + WINDOW:
                    window = self._map_window(pos)
                at = pos - self.base
                n = min(end - pos, WINDOW - at)
                window[at:at + n] = data[pos - self.size:pos - self.size + n]
                pos += n
        except (OSError, ValueError, OverflowError, AttributeError):
            # (AttributeError: no posix_fallocate or MAP_SHARED here.)
            # Appended with write(2) from now on, once the file is cut back
            # to its lines (the reserve after them goes); when it cannot
            # be, the write fails (OSError) and the next one maps again.
            self.window = _let_go(self.window)
            os.ftruncate(self.fd, self.size)
            self.mapped = False
            return False
        return True

    def _map_window(self, pos):
        """Maps the WINDOW bytes of the file from the multiple of WINDOW
        at or before `pos`, reserved on disk first."""
        self.window = _let_go(self.window)
        base = pos - pos % WINDOW
        os.posix_fallocate(self.fd, base, WINDOW)
        self.window = mmap.mmap(self.fd, WINDOW, mmap.MAP_SHARED,
                                mmap.PROT_READ | mmap.PROT_WRITE,
                                offset=base)
        self.base = base
        return self.window


    def close(self, remove):
        """Closes the journal, removing it first when `remove`: removed
        while still locked, it cannot be taken from a session that starts
        meanwhile."""
        if self.fd is None:
            return
        self.view = _let_go(self.view)
        self.window = _let_go(self.window)
        if not remove and self.mapped:
            try:                # what is left has the journal's lines alone
                os.ftruncate(self.fd, self.size)
            except OSError:
                pass
        if remove:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
        os.close(self.fd)
        self.fd = None


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
    doc, running = read_state(path)
    if running:
        return None
    write(report_path, doc)
    os.unlink(path)
    return doc


def read(path):
    """The report document a journal holds (see the module's text), with
    the process's fate in "partial_reasons"; UnusableInput otherwise.
    A last line torn by a kill is left out; any other bad line makes the
    journal unusable."""
    return read_state(path)[0]


def read_state(path):
    """(the report document the journal at `path` holds, whether the
    process writing it still runs); UnusableInput as read()."""
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
    alive = not done and _alive(header)
    if alive:
        reasons.append(MSG_RUNNING.format(pid=header["pid"], path=path))
        running = {}
    elif not done:
        reasons.append(MSG_DIED.format(path=path))
    elif reasons:
        unfinished = MSG_UNFINISHED.format(reason=reasons[-1])
    created = header.get("created")
    return document(header["report"], records, running, reasons,
                    created=created if isinstance(created, str) else None,
                    unfinished=unfinished), alive
