"""Live progress of a long hunt: shown on a terminal, erased before the
test's outcome; nothing of it in output that is not a terminal."""

import os
import pty
import subprocess
import sys

import pytest

from pytest_leakcheck import progress

# Each run takes a quarter of PROGRESS_DELAY at least: the hunt (eight runs,
# a leak: more to confirm it, then the diagnosis) outlasts the delay.
SLOW_LEAK = f'''
import time

import pytest

_KEPT = []

@pytest.mark.noleak(warmup=1, repeat=8, probes=["objects"])
def test_slow_leak():
    time.sleep({progress.PROGRESS_DELAY / 4})
    _KEPT.append([])

def test_quick():
    pass
'''


def _run_on_a_terminal(cwd, *args):
    """pytest's output (stdout and stderr) when they are a terminal."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
        env=dict(os.environ, TERM="xterm", COLUMNS="120"))
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:         # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=300) == 1
    return b"".join(chunks).decode("utf-8", "replace")


def test_progress_on_a_terminal(pytester):
    pytester.makepyfile(test_slow=SLOW_LEAK)
    out = _run_on_a_terminal(pytester.path, "--leaks", "-p", "no:xdist",
                             "-p", "no:randomly")
    line = out[out.index("test_slow.py "):]
    line = line[:line.index("[100%]")]

    def shown(what):
        return progress.MSG_PROGRESS.format(name="test_slow_leak", what=what)

    # Drawn after what pytest wrote on the line, once the delay is over
    # (not for the first runs), each time in place of the last.
    assert line.startswith("test_slow.py \x1b7 [leakcheck: test_slow_leak ")
    assert shown(progress.WHAT_RUN.format(run=1, runs=9)) not in line
    assert (shown(progress.WHAT_RUN.format(run=9, runs=9)) + "\x1b8\x1b[K"
            + shown(progress.WHAT_DIAGNOSING.format(run=10))) in line
    # Erased before pytest writes the outcomes ("L" for the leak, "." for
    # the quick test), and nothing for the quick test.
    rest = line[line.rindex("\x1b8\x1b[K") + len("\x1b8\x1b[K"):]
    assert "[leakcheck:" not in rest and "\x1b7" not in rest
    assert "L" in rest and "." in rest
    assert line.count("\x1b7") == 1
    assert "1 failed, 1 passed" in out


def test_no_progress_when_not_a_terminal(pytester):
    pytester.makepyfile(test_slow=SLOW_LEAK)
    result = pytester.runpytest_subprocess("--leaks", "-p", "no:xdist")
    result.assert_outcomes(failed=1, passed=1)
    assert "[leakcheck:" not in result.stdout.str()
    assert "\x1b7" not in result.stdout.str()


def test_no_progress_from_xdist_workers(pytester):
    """A worker's output never reaches the terminal as it is written."""
    pytester.makepyfile(test_slow=SLOW_LEAK)
    out = _run_on_a_terminal(pytester.path, "--leaks", "-n", "1")
    assert "1 failed, 1 passed" in out
    assert "[leakcheck:" not in out and "\x1b7" not in out
