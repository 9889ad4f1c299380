"""The fds probe reads the count of open descriptors: one stat() of
/proc/self/fd on kernels that give the count as its size, else a listing
of it (a scope or series also lists them where it keeps the set for its
report).  The kernel's count also has the numbers taken that name no
file yet (a thread blocked in accept() holds one): every reading counts
what the count does, in a process where it is trusted."""

import errno
import os
import socket
import threading
import time

import leakcheck


def listed():
    """Open descriptors, the one os.listdir opens aside, and the numbers
    taken that name no file yet (pytest-rerunfailures' server thread,
    blocked in accept(), holds one where it is installed): dup2() onto one
    fails with EBUSY."""
    names = {int(n) for n in os.listdir("/proc/self/fd")}
    return len(names) - 1 + len(_taken(names))


def _taken(names):
    """The numbers under the highest of `names` and a few above it that are
    taken and not open (`names`: a listing of /proc/self/fd)."""
    taken = []
    for n in range(max(names) + 16):
        if n in names:
            continue
        try:
            os.dup2(0, n)
        except OSError as e:
            if e.errno == errno.EBUSY:
                taken.append(n)
        else:
            os.close(n)
    return taken


def test_a_snapshot_counts_the_open_descriptors():
    leakcheck.snapshot(probes=["fds"])          # the first one lists
    opened = []
    try:
        for n in range(5):
            assert leakcheck.snapshot(probes=["fds"])["fds"] == listed()
            opened.append(os.open(os.devnull, os.O_RDONLY))
        r, w = os.pipe()
        opened += [r, w]
        assert leakcheck.snapshot(probes=["fds"])["fds"] == listed()
    finally:
        for fd in opened:
            os.close(fd)
    assert leakcheck.snapshot(probes=["fds"])["fds"] == listed()


def test_a_scope_sees_a_descriptor_left_open_and_names_it():
    scope = leakcheck.scope(probes=["fds"])
    fd = None
    try:
        try:
            with scope:
                fd = os.open(os.devnull, os.O_RDONLY)
        except leakcheck.LeakError as e:
            assert "/dev/null" in str(e)
        else:
            raise AssertionError("the scope did not see the descriptor")
    finally:
        if fd is not None:
            os.close(fd)


def _kept():
    """The descriptors leakcheck keeps open on /proc/self/fd and
    /proc/self/task (read through them: an fstat() instead of a stat() of
    the path), by what they name."""
    kept = {}
    me = f"/proc/{os.getpid()}/"
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target in (me + "fd", me + "task"):
            kept[target[len(me):]] = int(name)
    return kept


def test_the_descriptors_kept_on_proc_are_read_again_when_closed():
    leakcheck.snapshot(probes=["fds", "threads"])
    kept = _kept()
    assert sorted(kept) == ["fd", "task"]
    # Closed by the code under test: opened again, and the count is what a
    # listing says (the one closed counts as open again).
    with leakcheck.scope(probes=["fds", "threads"]):
        os.close(kept["fd"])
        os.close(kept["task"])
    assert leakcheck.snapshot(probes=["fds"])["fds"] == listed()
    assert sorted(_kept()) == ["fd", "task"]
    # A file of the code's own opened in the number of one: a descriptor
    # more, which the scope sees, and the folder is read through a new one.
    kept = _kept()
    os.close(kept["fd"])
    fd = os.open(os.devnull, os.O_RDONLY)
    assert fd == kept["fd"]
    try:
        snap = leakcheck.snapshot(probes=["fds"])
        assert snap["fds"] == listed()
        assert _kept()["fd"] != fd
        scope = leakcheck.scope(probes=["fds"])
        try:
            with scope:
                os.close(fd)
                fd = os.open(os.devnull, os.O_RDONLY)
                os.close(_kept()["fd"])
                other = os.open(os.devnull, os.O_RDONLY)
        except leakcheck.LeakError as e:
            assert "grew by +1 fds" in str(e), str(e)
            assert f"/proc/{os.getpid()}/" not in str(e), str(e)
        else:
            raise AssertionError("the scope did not see the descriptor")
        os.close(other)
    finally:
        os.close(fd)


def test_a_forked_child_reads_its_own_descriptors_and_threads():
    leakcheck.snapshot(probes=["fds", "threads"])   # opened in the parent
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child
        status = 1
        try:
            os.close(r)
            before = leakcheck.snapshot(probes=["fds", "threads"])
            if before["fds"] != listed() or before["threads"] != 1:
                os.write(w, f"read {dict(before)}, listed {listed()}"
                            .encode())
            else:
                extra = os.open(os.devnull, os.O_RDONLY)
                after = leakcheck.snapshot(probes=["fds"])
                os.close(extra)
                if after["fds"] != before["fds"] + 1:
                    os.write(w, f"fds {before['fds']} then {after['fds']}"
                                .encode())
                else:
                    status = 0
        finally:
            os._exit(status)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, said


def test_a_number_a_blocked_accept_holds_counts_in_every_reading():
    """A thread blocked in accept() holds the number its connection will
    get, which no listing of /proc/self/fd shows and the kernel counts.
    Every reading counts it, a series' measured snapshots too (they list
    the descriptors for their report): a run that opens nothing reads 0
    while it is held, and the number counts as one while it lasts."""
    leakcheck.snapshot(probes=["fds"])
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    got = []
    thread = threading.Thread(target=lambda: got.append(server.accept()))
    try:
        before = leakcheck.snapshot(probes=["fds"])["fds"]
        names = {int(n) for n in os.listdir("/proc/self/fd")}
        held = set(_taken(names))
        thread.start()
        deadline = time.monotonic() + 30
        while set(_taken({int(n) for n in os.listdir("/proc/self/fd")})) \
                == held:
            assert time.monotonic() < deadline, "accept() took no number"
            time.sleep(0.01)
        assert leakcheck.snapshot(probes=["fds"])["fds"] == before + 1
        series = leakcheck.Series(warmup=1, repeat=3, probes=["fds"],
                                  thorough=True)
        while series.next():
            pass
        assert series.runs >= 2
        assert series.deltas["fds"] == [0] * series.runs
        assert not series.leaked
    finally:
        with socket.create_connection(server.getsockname()):
            thread.join(30)
        for conn, _ in got:
            conn.close()
        server.close()
