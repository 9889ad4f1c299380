"""Evidence from the process: new file descriptors and what they point to
(fds), new threads with their names and targets (threads)."""

import os
import threading
import time

from . import TOP, Evidence
from .objects import describe

__all__ = ["Fds", "Threads", "open_fds", "describe_fds", "tasks",
           "describe_threads"]

THREAD_WAIT = 0.2         # seconds new threads get to end before counting


class Fds(Evidence):
    """The descriptors opened by the runs and still open:
    Diagnosis.fds."""

    probes = frozenset({"fds"})

    def before(self):
        self.fds_before = open_fds()

    def after(self):
        # Now, not in fill(): other kinds' runs of their own come between.
        self.fds = describe_fds(sorted(open_fds() - self.fds_before))

    def fill(self, diagnosis):
        diagnosis.fds = self.fds


class Threads(Evidence):
    """The threads started by the runs and still alive after a moment:
    Diagnosis.threads."""

    probes = frozenset({"threads"})

    def before(self):
        self.tasks_before = tasks()

    def after(self):
        self.threads = _new_threads(self.tasks_before)

    def fill(self, diagnosis):
        diagnosis.threads = self.threads


def open_fds():
    """The open descriptors.  Listing /proc/self/fd opens one more, which
    is closed again once listed: it is left out, and so are the two the
    engine keeps open on this process's /proc/<pid>/fd and task folders
    to read the fds and threads probes through."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return set()
    kept = {f"/proc/{os.getpid()}/fd", f"/proc/{os.getpid()}/task"}
    fds = set()
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target not in kept:
            fds.add(int(name))
    return fds


def describe_fds(fds):
    result = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue    # closed meanwhile
        result.append({"fd": fd, "target": target})
    return result[:TOP * 3]


def tasks():
    """The native ids of this process's threads."""
    try:
        return {int(tid) for tid in os.listdir("/proc/self/task")}
    except OSError:
        return set()


def _new_threads(before):
    """The threads started since `before` (native ids) that are still
    alive, after giving them a moment to end."""
    deadline = time.monotonic() + THREAD_WAIT
    while True:
        new = tasks() - before
        if not new or time.monotonic() >= deadline:
            break
        time.sleep(0.005)
    return describe_threads(sorted(new))


def describe_threads(tids):
    python = {getattr(t, "native_id", None): t for t in threading.enumerate()}
    result = []
    for tid in tids:
        thread = python.get(tid)
        if thread is not None:
            result.append({"name": thread.name,
                           "target": _thread_target(thread),
                           "daemon": thread.daemon, "native_id": tid,
                           "python": True})
        else:
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    name = f.read().strip()
            except OSError:
                continue    # ended meanwhile
            result.append({"name": name, "target": None, "daemon": None,
                           "native_id": tid, "python": False})
    return result


def _thread_target(thread):
    target = getattr(thread, "_target", None)
    if target is not None:
        return _callable_name(target)
    if type(thread).run is not threading.Thread.run:
        return _callable_name(type(thread).run)
    return None


def _callable_name(fn):
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if name is None:
        return describe(fn)
    return f"{module}.{name}" if module else name
