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
