"""Probes, snapshots, and the errors bad arguments get."""

import collections.abc
import json
import os
import subprocess
import sys

import pytest

import leakcheck
from conftest import RELEASE_BUILD
from leaks import IDS, LEAKS

PYTHON_PROBES = ("refs", "blocks", "py_bytes", "py_allocs", "objects",
                 "garbage")


def test_every_exported_name_exists():
    for name in leakcheck.__all__:
        assert hasattr(leakcheck, name), name
    assert set(leakcheck.__all__) >= {
        "snapshot", "scope", "refcounts", "watch", "assert_finalized",
        "assert_no_garbage", "repeat", "probes", "LeakError", "Series",
        "diagnose", "Diagnosis", "ProbeInfo", "PROBE_NAMES",
        "DEFAULT_PROBES", "Snapshot"}


IMPORT_COLLECTIONS = """
import gc
full = []
gc.callbacks.append(
    lambda phase, info: full.append(1)
    if phase == "start" and info["generation"] == 2 else None)
import leakcheck
leakcheck.probes()
print(len(full))
"""


def test_importing_leakcheck_collects_nothing(tmp_path):
    """Importing leakcheck and asking what its probes can read make no full
    collection: a pytest session with the plugin installed imports it, and
    one collection of a large heap costs tens of milliseconds.  The first
    reading makes them."""
    import subprocess
    out = subprocess.run([sys.executable, "-c", IMPORT_COLLECTIONS],
                         capture_output=True, text=True, check=True,
                         cwd=tmp_path)
    assert out.stdout.split() == ["0"], out


# A program's object in a reference cycle, reachable from its module alone:
# prints what the module's globals hold when the object is finalized.
FINALIZED_IN_A_CYCLE = """
import os
import sys
import types

mod = types.ModuleType("held_in_a_cycle")
mod.marker = "intact"


class Node:
    def __del__(self, write=os.write, ns=mod.__dict__):
        write(1, f"{ns.get('marker')}\\n".encode())


node = Node()
node.cycle = node
mod.node = node
sys.modules[mod.__name__] = mod
del node
"""
SNAPSHOT_FIRST = """
import leakcheck
leakcheck.snapshot(["objects"])
"""


def test_a_snapshot_leaves_the_finalization_of_the_program_alone(tmp_path):
    """The interpreter's finalization empties sys.modules and collects: the
    program's objects go then, their modules' globals intact.  The engine
    held the settle callable, whose module reaches every module's globals,
    and so kept them all alive in that collection: they went only after
    their globals were cleared, and finalization walked them all once more
    (bench/bench_regions.py --regions exit: a fifth more instructions at
    the end of a pytest session under --leaks than without)."""
    runs = [_fresh_output(script, tmp_path).split()
            for script in (FINALIZED_IN_A_CYCLE,
                           FINALIZED_IN_A_CYCLE + SNAPSHOT_FIRST)]
    assert runs == [["intact"], ["intact"]], runs


def test_probes_lists_every_probe_and_why_one_is_missing():
    infos = leakcheck.probes()
    assert [p.name for p in infos] == list(leakcheck.PROBE_NAMES)
    by_name = {p.name: p for p in infos}
    for p in infos:
        assert isinstance(p, leakcheck.ProbeInfo)
        assert p.available == (p.reason is None), p
        assert p.unit and p.doc
        assert p.tolerance >= 0 and p.threshold >= 1
    for name in ("blocks", "py_bytes", "py_allocs", "objects", "garbage",
                 "fds", "threads"):
        assert by_name[name].available, by_name[name]
    if RELEASE_BUILD:
        assert not by_name["refs"].available
        assert "debug build" in by_name["refs"].reason
    else:
        assert by_name["refs"].available
    assert not by_name["valgrind"].available
    assert by_name["valgrind"].reason


def test_default_probes_are_the_python_probes_the_heap_fds_and_threads():
    # 3.9/3.10's kept frames change size under recursion: a single delta
    # reads py_bytes moving (see leakcheck/_probes.py); native_bytes sees
    # the memory above pymalloc's limit there.
    old_frames = {"py_bytes"} if sys.version_info < (3, 11) else set()
    assert set(leakcheck.DEFAULT_PROBES) == (
        set(PYTHON_PROBES) - old_frames) | {"native_bytes", "fds", "threads"}


def test_a_snapshot_is_a_read_only_mapping_of_the_readable_probes():
    snap = leakcheck.snapshot()
    readable = {p.name for p in leakcheck.probes() if p.available}
    assert isinstance(snap, collections.abc.Mapping)
    assert isinstance(snap, leakcheck.Snapshot)
    assert set(snap) == set(leakcheck.DEFAULT_PROBES) & readable
    assert len(snap) == len(set(snap))
    assert "blocks" in snap and "valgrind" not in snap and 3 not in snap
    assert isinstance(snap["blocks"], int) and snap["blocks"] > 0
    assert snap.get("valgrind") is None and snap.get("valgrind", -1) == -1
    assert dict(snap) == dict(snap.items())
    assert list(snap.keys()) == list(snap)
    assert list(snap.values()) == [snap[k] for k in snap]
    assert snap == snap and json.dumps(dict(snap))
    with pytest.raises(KeyError):
        snap["valgrind"]
    with pytest.raises(TypeError):
        snap["blocks"] = 1
    assert repr(snap).startswith("Snapshot({")


def test_probes_given_as_a_string_or_a_sequence():
    assert set(leakcheck.snapshot("blocks, objects")) == {"blocks",
                                                          "objects"}
    assert set(leakcheck.snapshot(["fds"])) == {"fds"}
    assert set(leakcheck.snapshot(("threads", "fds"))) == {"fds", "threads"}


def test_two_snapshots_back_to_back_differ_by_nothing():
    """A snapshot does not count itself: the second one's object is alive
    at its own reading and not at the first one's."""
    probes = [p.name for p in leakcheck.probes() if p.available]
    leakcheck.snapshot(probes)
    for _ in range(20):
        a = leakcheck.snapshot(probes)
        b = leakcheck.snapshot(probes)
        assert set(b - a) == set(probes)
        assert all(v == 0 for v in (b - a).values()), b - a


def _glibc():
    try:
        name, version = os.confstr("CS_GNU_LIBC_VERSION").split()
        return tuple(int(x) for x in version.split(".")[:2])
    except (AttributeError, OSError, ValueError):
        return None


@pytest.mark.skipif(not (2, 30) <= (_glibc() or (0,)) <= (2, 43),
                    reason="glibc's per-thread cache has a known layout on "
                           "glibc 2.30 to 2.43 only")
def test_native_bytes_leaves_the_malloc_cache_out():
    """The interpreter's main thread finds glibc's per-thread cache (a
    non-PIE python's malloc is its own PLT entry: the cache is found
    through every thread-local block, not through malloc's address), and
    back-to-back pairs around small mallocs and frees read exactly 0."""
    info = {p.name: p for p in leakcheck.probes()}["native_bytes"]
    if "mallinfo2" not in info.doc:
        pytest.skip(f"native_bytes reads another allocator here: {info.doc}")
    assert "malloc cache" in info.doc, info.doc
    deltas = []
    for i in range(200):
        churn = [bytes(8 + 24 * ((i * 7 + k) % 40)) for k in range(i % 13)]
        del churn
        a = leakcheck.snapshot(["native_bytes"])
        b = leakcheck.snapshot(["native_bytes"])
        deltas.append((b - a)["native_bytes"])
    assert deltas == [0] * 200


# Run in a fresh interpreter: leakcheck's first reading is a thread's.
_THREAD_READS_FIRST = """
import threading

def first():
    import leakcheck
    leakcheck.snapshot(["native_bytes"])

t = threading.Thread(target=first)
t.start()
t.join()
import leakcheck
print({p.name: p for p in leakcheck.probes()}["native_bytes"].doc)
"""


def test_the_main_thread_finds_the_malloc_cache_after_a_thread_read_first(
        tmp_path):
    """Only the main thread's cache is looked for, and a reading from
    another thread before any of the main thread's used to end the search
    for good: every reading then filled the cache instead, which reads a
    chunk's growth in some heaps."""
    info = {p.name: p for p in leakcheck.probes()}["native_bytes"]
    if "malloc cache" not in info.doc:
        pytest.skip(f"the malloc cache is not read here: {info.doc}")
    out = _fresh_output(_THREAD_READS_FIRST, tmp_path)
    assert "malloc cache" in out, out


def _fresh_output(script, tmp_path):
    """What `script` prints in a fresh interpreter, run from elsewhere than
    the checkout (whose source tree would shadow the installed package)."""
    return subprocess.run([sys.executable, "-c", script],
                          capture_output=True, text=True, check=True,
                          cwd=tmp_path).stdout


# Run in a fresh interpreter: free chunks one class above the middle class
# the cache's self-test tries (class 37, 624-byte chunks), many of them in
# the heap's bins (class 38's own cache holds seven), before leakcheck's
# first reading.
_LARGER_FREE_CHUNKS = """
import ctypes
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
pairs = [(libc.malloc(632), libc.malloc(24)) for _ in range(1000)]
for chunk, guard in pairs:
    libc.free(chunk)
import leakcheck
print({p.name: p for p in leakcheck.probes()}["native_bytes"].doc)
"""


@pytest.mark.skipif(not (2, 30) <= (_glibc() or (0,)) <= (2, 43),
                    reason="glibc's per-thread cache has a known layout on "
                           "glibc 2.30 to 2.43 only")
def test_the_malloc_cache_is_found_when_malloc_hands_out_a_larger_chunk(
        tmp_path):
    """malloc hands out a free chunk one class larger than asked when the
    remainder would be too small to split off.  The cache's self-test
    took such a chunk for its class's and failed (the process then filled
    the cache before each reading, which read a chunk's growth in runs
    that kept nothing: clean tests ran again, and a few failed); it holds
    such chunks aside now."""
    info = {p.name: p for p in leakcheck.probes()}["native_bytes"]
    if "mallinfo2" not in info.doc:
        pytest.skip(f"native_bytes reads another allocator here: {info.doc}")
    out = _fresh_output(_LARGER_FREE_CHUNKS, tmp_path)
    assert "malloc cache" in out, out


def test_snapshots_see_each_allocator(leaky):
    probes = ["blocks", "py_bytes", "py_allocs", "native_bytes"]
    a = leakcheck.snapshot(probes)
    leaky.leak_pymem(64)           # a pymalloc block
    b = leakcheck.snapshot(probes)
    leaky.leak_pymem(10000)        # over pymalloc's limit: a raw block
    c = leakcheck.snapshot(probes)
    leaky.leak_rawmem(300)         # the raw domain
    d = leakcheck.snapshot(probes)
    leaky.leak_native(1 << 20)     # malloc, outside CPython
    e = leakcheck.snapshot(probes)
    assert (b - a)["blocks"] == 1 and (b - a)["py_allocs"] == 1
    assert (b - a)["py_bytes"] == 0
    assert (c - b)["blocks"] == 1 and (c - b)["py_allocs"] == 1
    # Usable bytes under the release allocators (malloc rounds up a little),
    # requested bytes under the debug hooks.
    assert 10000 <= (c - b)["py_bytes"] < 10000 + 32
    assert (d - c)["py_allocs"] == 1
    assert 300 <= (d - c)["py_bytes"] < 300 + 32
    assert (d - c)["blocks"] == 0
    # 1 MiB malloc()ed, give or take what the interpreter freed meanwhile
    # (3.10: a kept frame swapped, -48 bytes)
    assert (e - d)["native_bytes"] >= (1 << 20) - 4096
    assert (e - d)["py_allocs"] == 0 and (e - d)["blocks"] == 0


def test_snapshot_difference_needs_two_snapshots():
    with pytest.raises(TypeError):
        leakcheck.snapshot() - {"blocks": 1}


@pytest.mark.parametrize("call", [
    lambda: leakcheck.snapshot(["blocks", "nope"]),
    lambda: leakcheck.scope(probes="blocks,nope"),
    lambda: leakcheck.Series(probes=["nope"]),
    lambda: leakcheck.repeat(lambda: None, probes=["nope"]),
    lambda: leakcheck.scope(tolerance={"nope": 1}),
    lambda: leakcheck.Series(tolerance={"nope": 1}),
    lambda: leakcheck.diagnose(lambda: None, ["nope"]),
], ids=["snapshot", "scope", "Series", "repeat", "scope-tolerance",
        "Series-tolerance", "diagnose"])
def test_an_unknown_probe_name_lists_the_valid_ones(call):
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "'nope'" in message
    for name in leakcheck.PROBE_NAMES:
        assert name in message


@pytest.mark.parametrize("call, argument", [
    (lambda: leakcheck.scope(tolerance=-1), "tolerance"),
    (lambda: leakcheck.scope(tolerance={"blocks": -2}), "tolerance['blocks']"),
    (lambda: leakcheck.Series(tolerance=-1), "tolerance"),
    (lambda: leakcheck.repeat(lambda: None, tolerance=-5), "tolerance"),
    (lambda: leakcheck.Series(repeat=0), "repeat"),
    (lambda: leakcheck.Series(repeat=-1), "repeat"),
    (lambda: leakcheck.Series(warmup=-1), "warmup"),
    (lambda: leakcheck.repeat(lambda: None, repeat=-3), "repeat"),
    (lambda: leakcheck.repeat(lambda: None, warmup=-1), "warmup"),
    (lambda: leakcheck.diagnose(lambda: None, ["blocks"], runs=0), "runs"),
])
def test_a_negative_count_is_refused_with_the_arguments_name(call, argument):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(argument + " must be >= ")


@pytest.mark.parametrize("call", [
    lambda: leakcheck.Series(repeat="4"),
    lambda: leakcheck.Series(warmup=1.5),
    lambda: leakcheck.scope(tolerance=True),
    lambda: leakcheck.snapshot(3),
    lambda: leakcheck.snapshot([3]),
    lambda: leakcheck.repeat(42),
])
def test_a_value_of_the_wrong_type_is_a_type_error(call):
    with pytest.raises(TypeError):
        call()


def test_probes_none_of_which_can_be_read_here_are_refused():
    with pytest.raises(ValueError, match="none of the probes .* valgrind"):
        leakcheck.scope(probes="valgrind")


@pytest.mark.skipif(not RELEASE_BUILD, reason="refs is readable here")
def test_refs_on_a_release_build_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="refs: needs a debug build"):
        leakcheck.Series(probes=["refs"])


def test_unreadable_probes_are_named_in_reports(leaky):
    with pytest.raises(leakcheck.LeakError) as info:
        with leakcheck.scope(probes=["blocks", "valgrind"]):
            leaky.leak_pymem(64)
    assert "not read here: valgrind (not running under valgrind)" in \
        info.value.report


@pytest.mark.parametrize("case", LEAKS, ids=IDS)
def test_snapshots_see_each_leak_and_not_its_twin(case, leaky,
                                                   garbage_cleanup):
    tolerance = {p.name: p.tolerance for p in leakcheck.probes()}[case.probe]
    case.clean(leaky)
    for _ in range(5):
        a = leakcheck.snapshot([case.probe])
        case.clean(leaky)
        b = leakcheck.snapshot([case.probe])
        assert (b - a)[case.probe] <= tolerance, b - a
        del a, b
    a = leakcheck.snapshot([case.probe])
    case.leak(leaky)
    b = leakcheck.snapshot([case.probe])
    assert (b - a)[case.probe] > tolerance, b - a


def test_allocated_blocks_is_what_sys_getallocatedblocks_says():
    """From the allocator hook's count once a snapshot learnt its offset,
    else walked: either way sys.getallocatedblocks()'s figure, and it
    follows what is made and freed."""
    leakcheck.snapshot()
    before, walked = leakcheck.allocated_blocks(), sys.getallocatedblocks()
    # One int apart at most: the call's own result.
    assert abs(before - walked) <= 1
    held = [[] for _ in range(1000)]
    grown = leakcheck.allocated_blocks() - before
    # One block apart at most: an int of this frame's (3.15 counts it
    # where 3.11 does not).
    assert abs(grown - (sys.getallocatedblocks() - walked)) <= 1
    if walked:                      # pymalloc in use
        assert grown >= 1000
    del held              # (to the list freelist, partly: still blocks)
    assert abs(leakcheck.allocated_blocks() - sys.getallocatedblocks()) <= 1


WITHOUT_A_WALK = """
import sys
import leakcheck
print(leakcheck.allocated_blocks(walk=False))
leakcheck.snapshot(["fds"])
print(leakcheck.allocated_blocks(walk=False))
leakcheck.snapshot()
counted = leakcheck.allocated_blocks(walk=False)
walked = sys.getallocatedblocks()
print(abs(counted - walked) <= 1 if counted is not None else None)
"""


def test_allocated_blocks_without_a_walk_is_none_until_the_hook_counts(
        tmp_path):
    """walk=False never walks pymalloc's pools: None until a snapshot that
    reads the blocks has the allocator hook count them (in a fresh
    process: not before any snapshot, nor after one of the fds alone),
    then sys.getallocatedblocks()'s figure; None throughout without
    pymalloc, where the hook counts no block."""
    env = dict(os.environ)
    env.pop("PYTHONMALLOC", None)
    pymalloc = subprocess.run(
        [sys.executable, "-c", WITHOUT_A_WALK], env=env, check=True,
        capture_output=True, text=True, cwd=tmp_path).stdout.split()
    env["PYTHONMALLOC"] = "malloc"
    malloc = subprocess.run(
        [sys.executable, "-c", WITHOUT_A_WALK], env=env, check=True,
        capture_output=True, text=True, cwd=tmp_path).stdout.split()
    assert pymalloc == ["None", "None", "True"]
    assert malloc == ["None", "None", "None"]


def test_thread_count_follows_threads_and_await_threads_waits_them_out():
    """thread_count() is what the threads probe reads; await_threads()
    waits until the threads started since `count` are gone, within its
    timeout, and says whether they are."""
    import threading
    base = leakcheck.thread_count()
    assert base == len(os.listdir("/proc/self/task"))
    stop = threading.Event()
    started = [threading.Thread(target=stop.wait) for _ in range(3)]
    for t in started:
        t.start()
    try:
        assert leakcheck.thread_count() == base + 3
        assert leakcheck.snapshot(["threads"])["threads"] == base + 3
        # Live threads: it waits its timeout out and says no.
        assert leakcheck.await_threads(base, timeout=0.01) is False
    finally:
        stop.set()
        for t in started:
            t.join()
    assert leakcheck.await_threads(base, timeout=5.0) is True
    assert leakcheck.thread_count() == base
