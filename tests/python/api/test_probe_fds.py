"""The fds probe reads the count of open descriptors: by a listing of
/proc/self/fd where a scope or series keeps the set for its report, by
one stat() of that folder elsewhere on kernels that give the count as its
size.  Both must count what a listing counts."""

import os

import leakcheck


def listed():
    """Open descriptors, the one os.listdir opens aside."""
    return len(os.listdir("/proc/self/fd")) - 1


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
