"""The reported run's captured output, kept out of the process while the
snapshot after that run reads it.

What a test prints or logs is pytest's to keep: it goes into the item's
report sections, and from there into the sections of every report of the
run that follows (the teardown report holds the call's output too).  The
stand-in reports made before the snapshot that precedes the reported run
hold no output, since the output is not known then: so a clean test that
prints would read its captured text as the reported run's growth, and run
twice more to show that it grows nothing.

So between the reported run and the snapshot after it, the text the run
captured is written to a file of leakcheck's own (opened once, before the
first such snapshot, so that its descriptor is no growth) and the Python
objects that held it go; right after the snapshot they are made again
from the file, in the same lists, in the same order.  Where that is
noted is made before the snapshot that precedes the run (Spot).  Nothing
of the text is lost: when it cannot be written whole (a section that is
not strings, a full disk), nothing is parked and the run reads it as
growth, as before.
"""

import marshal
import os
import tempfile

from . import pytest_private

_file = None            # the file the text goes to, while a snapshot reads
_owner = None           # the session (its config) that opened it


def ready(config):
    """Opens the parking file, once per process: called before the
    snapshot that precedes a reported run, by the session of `config`.
    False when it cannot be opened (then nothing is parked)."""
    global _file, _owner
    if _file is None:
        try:
            _file = tempfile.TemporaryFile(prefix="leakcheck-output-")
            _owner = config
        except OSError:
            _file = False
    return _file is not False


def close(config):
    """Closes the parking file at the end of the session that opened it (a
    session run inside a test leaves the outer session's open)."""
    global _file, _owner
    if _file and _owner is config:
        _file.close()
        _file = _owner = None


class Spot:
    """Where one test's parked sections are noted: made before the
    snapshot that precedes its reported run, so that parking allocates
    nothing that outlives it (the lists are noted in slots made already,
    the length of the text is the file's own).  `start`: how many report
    sections the item held before the run."""

    __slots__ = ("targets", "start", "parked")

    def __init__(self, start):
        self.start = start
        # The item's report sections, then each report's sections.
        self.targets = [None] * (1 + MAX_REPORTS)
        self.parked = False

    def park(self, item, reports):
        """Takes the captured output of the run whose reports are
        `reports` out of them and out of the item, onto the parking file.
        False when there was nothing to park, or it could not be parked
        whole (then nothing moved)."""
        if not _file or self.parked or len(reports) > MAX_REPORTS:
            return False
        if len(pytest_private.report_sections(item)) <= self.start and \
                not any(getattr(rep, "sections", None) for rep in reports):
            return False        # the run captured nothing (most tests)
        targets = self.targets
        targets[0] = pytest_private.report_sections(item)
        for i, rep in enumerate(reports, 1):
            sections = getattr(rep, "sections", None)
            targets[i] = sections if type(sections) is list else None
        try:
            if self._write():
                for i, target in enumerate(targets):
                    if target is not None:
                        del target[self._start_of(i):]
                self.parked = True
        finally:
            if not self.parked:
                targets[:] = [None] * len(targets)
        return self.parked

    def _start_of(self, i):
        return self.start if i == 0 else 0

    def _write(self):
        """Writes the parked part of each list to the file, whole."""
        parts = [target[self._start_of(i):] if target is not None else []
                 for i, target in enumerate(self.targets)]
        # The item's sections are (phase, key, text), a report's (title,
        # text): strings all, which marshal writes and reads back as they
        # were.
        if not any(parts) or not all(
                type(part) is tuple and
                all(type(field) is str for field in part)
                for held in parts for part in held):
            return False
        try:
            data = marshal.dumps(parts)
            fd = _file.fileno()
            os.ftruncate(fd, 0)
            return os.pwrite(fd, data, 0) == len(data)
        except (OSError, ValueError):
            return False

    def restore(self):
        """Puts the parked sections back where they were."""
        if not self.parked:
            return
        self.parked = False
        fd = _file.fileno()
        parts = marshal.loads(os.pread(fd, os.fstat(fd).st_size, 0))
        targets = self.targets
        for i, (target, held) in enumerate(zip(targets, parts)):
            if target is not None:
                target[self._start_of(i):self._start_of(i)] = held
        targets[:] = [None] * len(targets)


# A run makes at most three reports (setup, call, teardown).
MAX_REPORTS = 3
