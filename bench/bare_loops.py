"""The leak verdicts of bench_suite.py checked without leakcheck: each
test's body in a bare loop, watching sys.getallocatedblocks(), the number
of GC-tracked objects and the C heap, per call, in windows of `--calls`;
on a debug build also the total reference count (sys.gettotalrefcount()),
the only reading of a reference leaked to an object that lives on anyway.

    python bench/bare_loops.py [--work DIR] [--calls 500] [--windows 5]

Run it after bench_suite.py, whose built sdists in DIR it imports (default:
the same folder); the sdists not built there are named and left out.  A
real leak grows in every window; growth that stops or swings back and
forth is none.  The C heap is read with glibc's mallinfo2()
less the chunks waiting in the main thread's malloc cache (tcache), which
mallinfo2 counts as in use: without that, a loop of a few hundred calls
reads the cache filling up (up to ~240 KB) as growth.
"""

import argparse
import contextlib
import ctypes
import functools
import gc
import glob
import os
import sys


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
        "fsmblks", "uordblks", "fordblks", "keepcost")]


def _heap_reader():
    """The C heap in use less the main thread's tcache (glibc 2.30+ layout,
    its chunk checked), or None where that cannot be read."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2
    with open("/proc/self/maps") as f:
        heap = [line for line in f if line.rstrip().endswith("[heap]")]
    if not heap:
        return None
    start = int(heap[0].split("-")[0], 16)
    if ctypes.c_size_t.from_address(start + 8).value & ~7 != 0x290:
        return None
    counts = (ctypes.c_uint16 * 64).from_address(start + 16)

    def read():
        info = libc.mallinfo2()
        cached = sum(n * (32 + 16 * i) for i, n in enumerate(counts))
        return info.uordblks + info.hblkhd - cached
    return read


def _cases(work):
    """(name, body) of each check; the sdists' folders go on sys.path."""
    def folder(pattern):
        found = sorted(d for d in glob.glob(os.path.join(work, pattern))
                       if os.path.isdir(d))
        return found[-1] if found else None

    built = {name: folder(name + "-*") for name in SDISTS}
    missing = [name for name, path in built.items() if path is None]
    if len(missing) == len(SDISTS):
        sys.exit(f"bare_loops: no sdist built in {work}: run "
                 f"bench/bench_suite.py first")
    if missing:
        print(f"not built in {work}, so not looped: {', '.join(missing)}")
    cases = []
    if built["msgpack"]:
        cases += _msgpack_cases(built["msgpack"])
    if built["ujson"] and built["simplejson"] and built["pyyaml"]:
        cases += _json_yaml_cases(built["ujson"], built["simplejson"],
                                  built["pyyaml"])
    if built["pyrsistent"] and built["regex"]:
        cases += _pyrsistent_regex_cases(built["pyrsistent"], built["regex"])
    if built["zstandard"]:
        cases += _zstandard_cases(built["zstandard"])
    if built["msgpack"] and built["ujson"]:
        cases += _test_functions(built["msgpack"], built["ujson"])
    if built["cbor2"]:
        cases += _cbor2_cases(built["cbor2"])
    return cases


# The sdists whose tests are looped, as bench_suite.py names them.
SDISTS = ("msgpack", "ujson", "simplejson", "pyyaml", "pyrsistent", "regex",
          "zstandard", "cbor2")


def _msgpack_cases(msgpack_dir):
    """msgpack's leak verdicts that need a body of their own, and the
    clean twins; Packer.getbuffer() leaks a reference a call (the refs
    probe of a debug build reads it; no block grows)."""
    sys.path[:0] = [msgpack_dir, os.path.join(msgpack_dir, "test")]
    import msgpack
    import test_buffer
    import test_pack

    def msgpack_strict_map_key():
        try:
            msgpack.unpackb(msgpack.packb({1: 2}), strict_map_key=True)
        except ValueError:
            pass

    def msgpack_pack_no_getbuffer():    # the clean twin of the two below
        packer = msgpack.Packer(autoreset=False, use_bin_type=True)
        packer.pack([1, 2])
        bytes(packer.bytes())

    return [("msgpack unpackb(strict_map_key=True) refusing an int key",
             msgpack_strict_map_key),
            ("msgpack test_buffer.test_packer_getbuffer",
             test_buffer.test_packer_getbuffer),
            ("msgpack test_pack.test_get_buffer", test_pack.test_get_buffer),
            ("msgpack Packer.pack and bytes() (clean twin of getbuffer)",
             msgpack_pack_no_getbuffer)]


def _json_yaml_cases(ujson_dir, simplejson_dir, pyyaml_dir):
    sys.path[:0] = [ujson_dir, simplejson_dir, os.path.join(pyyaml_dir,
                                                            "lib")]
    import simplejson
    import ujson

    def ujson_big_int():
        ujson.loads("18446744073709551616")

    def ujson_small_int():          # the clean twin
        ujson.loads("123")

    def simplejson_skipkeys():
        simplejson.dumps({(1, 2): 1, "a": 2}, skipkeys=True, sort_keys=True)

    cases = [("ujson loads of an int beyond 64 bits", ujson_big_int),
             ("ujson loads of a small int (clean twin)", ujson_small_int),
             ("simplejson dumps(skipkeys=True, sort_keys=True)",
              simplejson_skipkeys)]
    legacy = os.path.join(pyyaml_dir, "tests", "legacy_tests")
    sys.path.insert(0, legacy)
    import test_constructor
    for name in ("construct-bool", "construct-float", "construct-pairs",
                 "construct-python-none"):
        data = os.path.join(legacy, "data", name + ".data")
        code = os.path.join(legacy, "data", name + ".code")
        cases.append((f"pyyaml test_constructor_types {name}",
                      lambda d=data, c=code:
                      test_constructor.test_constructor_types(d, c)))
    return cases


def _pyrsistent_regex_cases(pyrsistent, regex_dir):
    # pyrsistent's field types, cached per (key, value) type: a class made
    # per call is a new entry each call; and regex's test that compiles a
    # pattern of a fresh str subclass per call (its cache is bounded at 500
    # entries: growth that stops after 500 calls).
    sys.path[:0] = [pyrsistent, os.path.join(pyrsistent, "tests"),
                    regex_dir]
    import class_test
    import record_test
    from regex.tests import test_regex
    return [
        ("pyrsistent class_test.test_enum_key_type",
         class_test.test_enum_key_type),
        ("pyrsistent record_test.test_pmap_field_create_from_nested_"
         "serialized_data",
         record_test.test_pmap_field_create_from_nested_serialized_data),
        ("pyrsistent record_test.test_pvector_field_create_from_nested_"
         "serialized_data",
         record_test.test_pvector_field_create_from_nested_serialized_data),
        ("regex RegexTests.test_bug_764548 (a cache bounded at 500)",
         test_regex.RegexTests("test_bug_764548").test_bug_764548),
        ("regex RegexTests.test_hg_bugs (growth that dies out)",
         test_regex.RegexTests("test_hg_bugs").test_hg_bugs),
    ]


def _zstandard_cases(zstandard_dir):
    # zstandard's unittest classes (a package, tests/, importing its
    # common module relatively), each with a clean twin of the same calls.
    sys.path.insert(0, zstandard_dir)
    from tests import test_compressor_stream_writer as zwriter
    from tests import test_decompressor_stream_writer as zdwriter
    import zstandard

    frame = zstandard.ZstdCompressor().compress(b"foo" * 1024)

    def zstandard_decompress():     # the clean twin
        zstandard.ZstdDecompressor().decompress(frame)

    return [
        ("zstandard TestCompressor_stream_writer.test_tarfile_compat",
         zwriter.TestCompressor_stream_writer(
             "test_tarfile_compat").test_tarfile_compat),
        ("zstandard TestDecompressor_stream_writer.test_write_exception",
         zdwriter.TestDecompressor_stream_writer(
             "test_write_exception").test_write_exception),
        ("zstandard ZstdDecompressor().decompress (clean twin)",
         zstandard_decompress),
    ]


def _test_functions(msgpack_dir, ujson_dir):
    # The other msgpack and ujson verdicts: their tests take no fixture,
    # so each test function is the loop's body.  The sdists themselves go
    # on sys.path too: without simplejson and pyyaml built, no other case
    # put ujson there.
    sys.path[:0] = [os.path.join(msgpack_dir, "test"),
                    os.path.join(ujson_dir, "tests"), msgpack_dir, ujson_dir]
    import test_except
    import test_obj
    import test_sequnpack
    import test_ujson
    return [(f"{func.__module__}.{func.__name__}", func) for func in (
        test_except.test_invalidvalue,
        test_except.test_raise_from_object_hook,
        test_obj.test_an_exception_in_objecthook1,
        test_obj.test_an_exception_in_objecthook2,
        test_sequnpack.test_maxbuffersize_file,
        test_ujson.test_default_function)]


def _cbor2_cases(cbor2_dir):
    # cbor2's C decoder and encoder (_cbor2), each with the same call to
    # its pure-Python twin, which the tests' `impl` fixture also runs.
    sys.path.insert(0, cbor2_dir)
    from binascii import unhexlify
    from datetime import date

    import _cbor2
    from cbor2 import _decoder, _encoder, _types

    def raises(call):
        def body():
            try:
                call()
            except Exception:
                pass
        return body

    def hook(decoder, data):
        raise RuntimeError("foo")

    long_string = unhexlify("7a00010001" + "61" * 65535 + "c3b6")
    cases = []
    for name, loads, dumps, tag in (
            ("C", _cbor2.loads, _cbor2.dumps, _cbor2.CBORTag),
            ("Python", _decoder.loads, _encoder.dumps, _types.CBORTag)):
        def recursive_hash(tag=tag, kept=None):
            value = tag(1, None)
            value.value = value
            try:
                hash(value)
            except RuntimeError:
                pass
            if kept is not None:
                kept.append(value)
        cases += [
            (f"cbor2 {name} loads of invalid UTF-8 (an error raised from "
             f"another)", raises(lambda f=loads: f(unhexlify("6198")))),
            (f"cbor2 {name} loads of a string split across reads",
             lambda f=loads: f(long_string)),
            (f"cbor2 {name} loads with an object_hook that raises",
             raises(lambda f=loads: f(unhexlify("A2616103616205"),
                                      object_hook=hook))),
            (f"cbor2 {name} dumps of a date as a timestamp",
             lambda f=dumps: f(date(2018, 12, 31),
                               datetime_as_timestamp=True)),
            (f"cbor2 {name} dumps of a date as a string (twin)",
             lambda f=dumps: f(date(2013, 3, 21))),
            # The C hash keeps id(tag) in a set when the recursion error
            # is raised: one int per tag address, so a loop that reuses
            # the same few addresses stops growing once it has seen them.
            (f"cbor2 {name} hash of a CBORTag holding itself",
             recursive_hash),
            # The same with every tag kept, so that each has an address of
            # its own, as in a test suite's runs: the C module's set grows
            # by an int a call more than the Python module's list alone.
            (f"cbor2 {name} hash of a CBORTag holding itself, each tag "
             f"kept (a new address a call)",
             functools.partial(recursive_hash, kept=[])),
        ]
    return cases


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", default=os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "leakcheck-bench-suites"))
    p.add_argument("--calls", type=int, default=500)
    p.add_argument("--windows", type=int, default=5)
    args = p.parse_args(argv)
    heap = _heap_reader()
    refs = getattr(sys, "gettotalrefcount", None)   # debug builds only
    print(f"python {sys.version.split()[0]}; per call, {args.windows} "
          f"windows of {args.calls} calls after 50 warm-up calls; C heap "
          f"{'less the tcache' if heap else 'not read here'}; references "
          f"{'read (r)' if refs else 'not read here (a release build)'}")
    # What the bodies print (regex's test_hg_bugs: a pattern's DEBUG dump)
    # goes nowhere; one redirection per case, made before its first call.
    devnull = open(os.devnull, "w")
    for name, body in _cases(args.work):
        windows = []
        with contextlib.redirect_stdout(devnull):
            for _ in range(50):
                body()
            for _ in range(args.windows):
                gc.collect()
                h0, b0, o0 = (heap() if heap else 0,
                              sys.getallocatedblocks(), len(gc.get_objects()))
                r0 = refs() if refs else 0
                for _ in range(args.calls):
                    body()
                gc.collect()
                r1 = refs() if refs else 0
                n = args.calls
                windows.append(
                    (f"{(r1 - r0) / n:+.2f}r " if refs else "") +
                    f"{(sys.getallocatedblocks() - b0) / n:+.2f}b "
                    f"{(len(gc.get_objects()) - o0) / n:+.2f}o "
                    + (f"{((heap() - h0) / n):+.1f}B" if heap else ""))
        print(f"{name}:\n  " + " | ".join(windows))
    devnull.close()


if __name__ == "__main__":
    main()
