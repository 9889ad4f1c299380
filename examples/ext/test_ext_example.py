"""Tests of the example extension, each run with the leaky module and with
its fixed twin.  The noleak marker repeats every test and fails it when
something grows in every run: the leaky variants of the last three fail
with a report of what grew, their fixed twins pass.

    pytest examples/ext            # the marker alone does it
    pytest --leaks examples/ext    # same verdicts; --leaks hunts in any test
"""

import zlib

import pytest

pytestmark = pytest.mark.noleak


def test_squares(ext):
    assert ext.squares([1, 2, 3]) == [1, 4, 9]


def test_squares_rejects_non_int(ext):
    with pytest.raises(TypeError, match="item 1 is str, not int"):
        ext.squares([1, "2", 3])


# The probes can be named (here the allocator's: native_bytes, fds and the
# others are not read); py_bytes shows the bytes the lost PyMem_Malloc()
# scratch copy keeps, beside blocks and py_allocs.
@pytest.mark.noleak(probes=["blocks", "py_allocs", "py_bytes"])
def test_checksum(ext):
    data = bytes(range(256)) * 8
    assert ext.checksum(data) == zlib.adler32(data)


# A lost malloc() is invisible to the Python probes: only the C heap
# (native_bytes, glibc's count of bytes in use) sees it.
@pytest.mark.noleak(probes=["native_bytes"])
def test_histogram(ext):
    assert ext.histogram(bytes(range(256)), 4) == [64, 64, 64, 64]
