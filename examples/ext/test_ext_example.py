"""Tests of the example extension, each run with the leaky module and with
its fixed twin.  The noleak marker repeats every test and fails it when
something grows in every run: the leaky variants of the last four fail
with a report of what grew and the C line that allocated it, their fixed
twins pass.

    pytest examples/ext            # the marker alone does it
    pytest --leaks examples/ext    # same verdicts; --leaks hunts in any test
"""

import zlib

import pytest

pytestmark = pytest.mark.noleak


def test_squares(ext):
    assert ext.squares([1, 2, 3]) == [1, 4, 9]


# A forgotten reference: the list squares() made stays alive.
def test_squares_rejects_non_int(ext):
    with pytest.raises(TypeError, match="item 1 is str, not int"):
        ext.squares([1, "2", 3])


# A lost PyMem_Malloc() scratch copy: blocks, py_allocs and py_bytes.
def test_checksum(ext):
    data = bytes(range(256)) * 8
    assert ext.checksum(data) == zlib.adler32(data)


# A lost malloc(): invisible to the Python probes, only the C heap
# (native_bytes) sees it.
def test_histogram(ext):
    assert ext.histogram(bytes(range(256)), 4) == [64, 64, 64, 64]


# A forgotten bytes object (PyBytes_FromStringAndSize, never released).
def test_hexlify(ext):
    assert ext.hexlify(b"\x00\x01\xab\xff") == "0001abff"
