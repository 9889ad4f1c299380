"""Live progress of a long hunt in the terminal.

A hunt that has run for PROGRESS_DELAY seconds shows, after what pytest
wrote on the current line, which test it hunts in and where it is: run k
of n, confirming, diagnosing.  The text is drawn past the cursor (saved
and restored with the terminal's own codes) and erased before pytest
writes the test's outcome, so the line pytest writes is unchanged.  Only
when pytest writes to a terminal, and not in a pytest-xdist worker (whose
output the terminal never sees): captured or CI output is unchanged.
"""

import os
import time

import pytest

from . import pytest_private

PROGRESS_DELAY = 2.0        # seconds of hunting before progress shows
MSG_PROGRESS = " [leakcheck: {name} {what}]"
WHAT_RUN = "run {run} of {runs}"
WHAT_CONFIRMING = "confirming, run {run}"
WHAT_DIAGNOSING = "diagnosing, run {run}"

_SAVE, _RESTORE_AND_ERASE = "\x1b7", "\x1b8\x1b[K"
_warm = False               # a first write was made in this process
# On the config: _terminal()'s (writer, file, capture manager), looked up
# at the session's first hunt.
_TERMINAL = pytest.StashKey[tuple]()


def _terminal(config, worker_id):
    """(the terminal reporter's writer, the file it writes to, the capture
    manager) where progress can show, else (None, None, None): pytest
    writes to a terminal, and this is not a pytest-xdist worker.  Read
    once a session (a few plugin and environment lookups)."""
    found = config.stash.get(_TERMINAL, None)
    if found is not None:
        return found
    found = (None, None, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if (worker_id is None and reporter is not None
            and getattr(reporter, "isatty", False)
            and os.environ.get("TERM") != "dumb"):
        writer, out = pytest_private.terminal_file(reporter)
        if writer is not None:
            found = (writer, out,
                     config.pluginmanager.get_plugin("capturemanager"))
    config.stash[_TERMINAL] = found
    return found


class Progress:
    """The progress of one test's hunt; show() is cheap until it is due."""

    def __init__(self, config, name, worker_id):
        self.name = name
        self.began = time.monotonic()
        self.shown = False
        # The writer, the file it writes to, the capture manager.
        self.writer, self.out, self.capman = _terminal(config, worker_id)
        if self.writer is None:
            return
        global _warm
        if not _warm:
            # The first write fills caches for good (the terminal's size,
            # the capture manager's): made here, writing nothing, before
            # a series' first snapshot rather than in a measured run.
            self._room()
            self._write("")
            _warm = True

    def _room(self):
        """Columns left on the line after what pytest wrote."""
        return self.writer.fullwidth - self.writer.width_of_current_line - 1

    def show(self, what, run, runs=None):
        """Shows `what` (one of the WHAT_ texts, of run `run` of `runs`)
        once the hunt has taken PROGRESS_DELAY seconds."""
        if self.writer is None or (
                not self.shown
                and time.monotonic() - self.began < PROGRESS_DELAY):
            return
        room = self._room()
        text = MSG_PROGRESS.format(name=self.name,
                                   what=what.format(run=run, runs=runs))
        if len(text) > room:
            text = text[:max(room, 0)]
        self._write((_RESTORE_AND_ERASE if self.shown else _SAVE) + text)
        self.shown = True

    def clear(self):
        """Erases what show() drew; pytest's line is as it was."""
        if self.shown:
            self._write(_RESTORE_AND_ERASE)
            self.shown = False

    def _write(self, text):
        # Not through the writer's own write(): its count of the line's
        # width (which places pytest's "[ 50%]") must not change.
        out = self.out
        if self.capman is not None:
            with self.capman.global_and_fixture_disabled():
                out.write(text)
                out.flush()
        else:
            out.write(text)
            out.flush()
