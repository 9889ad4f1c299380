"""Async test plugins under --leaks: a corpus of async tests run under
pytest-asyncio (strict and auto mode; function, class, module and session
loop scopes; async fixtures of each scope), anyio's plugin (asyncio and
trio backends) and pytest-trio.  Tests named ``test_leak_*`` leak for real
(a list that keeps what each run appends, a task kept pending, an async
fixture that keeps its value); every other test is clean.  A leak verdict
on a clean test is a false alarm, a clean verdict on a leaking one a miss;
both are printed with their deltas.

    python bench/async_corpus.py [--verdicts 1000] [--python PYTHON]
                                 [-n WORKERS] [--flavor NAME ...]

PYTHON is an interpreter with leakcheck, pytest, pytest-asyncio, anyio,
trio and pytest-trio installed (default: this one).  Exits 1 on any false
alarm, miss or error verdict; the last line is the tally.
tests/python/plugin/test_plugin_async.py runs one round of it in
./scripts/test.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

BODIES = {
    "sleep": "await asyncio.sleep(0)",
    "gather": "assert await asyncio.gather(*(square(i) for i in range(5))) "
              "== [0, 1, 4, 9, 16]",
    "task": "t = asyncio.ensure_future(square(3))\n"
            "    assert await t == 9",
    "queue": "q = asyncio.Queue()\n"
             "    for i in range(3):\n"
             "        q.put_nowait(i)\n"
             "    assert [await q.get() for _ in range(3)] == [0, 1, 2]",
    "event": "e = asyncio.Event()\n"
             "    asyncio.get_running_loop().call_soon(e.set)\n"
             "    await e.wait()",
    "lock": "lock = asyncio.Lock()\n"
            "    async with lock:\n"
            "        await asyncio.sleep(0)",
    "wait_for": "assert await asyncio.wait_for(square(4), timeout=5) == 16",
    "agen": "assert [x async for x in counter(4)] == [0, 1, 2, 3]",
    "cancel": "t = asyncio.ensure_future(asyncio.sleep(10))\n"
              "    await asyncio.sleep(0)\n"
              "    t.cancel()\n"
              "    try:\n"
              "        await t\n"
              "    except asyncio.CancelledError:\n"
              "        pass",
    "fixture": "assert resource['n'] == 1",
}

# Bodies written for anyio and trio (no asyncio API).
ANYIO_BODIES = {
    "sleep": "await anyio.sleep(0)",
    "taskgroup": "out = []\n"
                 "    async with anyio.create_task_group() as tg:\n"
                 "        for i in range(3):\n"
                 "            tg.start_soon(append_square, out, i)\n"
                 "    assert sorted(out) == [0, 1, 4]",
    "event": "e = anyio.Event()\n"
             "    async with anyio.create_task_group() as tg:\n"
             "        tg.start_soon(setter, e)\n"
             "        await e.wait()",
    "lock": "lock = anyio.Lock()\n"
            "    async with lock:\n"
            "        await anyio.sleep(0)",
    "stream": "send, recv = anyio.create_memory_object_stream(3)\n"
              "    async with send, recv:\n"
              "        await send.send(1)\n"
              "        assert await recv.receive() == 1",
    "fixture": "assert resource['n'] == 1",
}

TRIO_BODIES = {
    "sleep": "await trio.sleep(0)",
    "nursery": "out = []\n"
               "    async with trio.open_nursery() as nursery:\n"
               "        for i in range(3):\n"
               "            nursery.start_soon(append_square, out, i)\n"
               "    assert sorted(out) == [0, 1, 4]",
    "event": "e = trio.Event()\n"
             "    async with trio.open_nursery() as nursery:\n"
             "        nursery.start_soon(setter, e)\n"
             "        await e.wait()",
    "channel": "send, recv = trio.open_memory_channel(3)\n"
               "    async with send, recv:\n"
               "        await send.send(1)\n"
               "        assert await recv.receive() == 1",
    "fixture": "assert resource['n'] == 1",
}

ASYNCIO_HELPERS = '''
import asyncio

import pytest
import pytest_asyncio

KEPT = []
TASKS = []


async def square(x):
    await asyncio.sleep(0)
    return x * x


async def counter(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def forever():
    await asyncio.Event().wait()
'''

# The leaks every flavour has: what each run appends to a module list; a
# task the test leaves pending and keeps (its coroutine must be named).
ASYNCIO_LEAKS = '''

{mark}
async def test_leak_list_{n}():
    await asyncio.sleep(0)
    KEPT.append(bytearray(64))


{mark}
async def test_leak_pending_task_{n}():
    TASKS.append(asyncio.ensure_future(forever()))
    await asyncio.sleep(0)
'''

ANYIO_HELPERS = '''
import anyio
import pytest

KEPT = []


async def append_square(out, x):
    await anyio.sleep(0)
    out.append(x * x)


async def setter(event):
    event.set()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param


@pytest.fixture
async def resource():
    await anyio.sleep(0)
    yield {"n": 1}
    await anyio.sleep(0)


@pytest.fixture
async def leaky_resource():
    await anyio.sleep(0)
    value = {"n": 1}
    KEPT.append(value)
    yield value
'''

ANYIO_LEAKS = '''

@pytest.mark.anyio
async def test_leak_list_{n}():
    await anyio.sleep(0)
    KEPT.append(bytearray(64))


@pytest.mark.anyio
async def test_leak_fixture_{n}(leaky_resource):
    assert leaky_resource["n"] == 1
'''

TRIO_HELPERS = '''
import pytest
import trio

KEPT = []


async def append_square(out, x):
    await trio.sleep(0)
    out.append(x * x)


async def setter(event):
    event.set()


@pytest.fixture
async def resource():
    await trio.sleep(0)
    yield {"n": 1}
'''

TRIO_LEAKS = '''

@pytest.mark.trio
async def test_leak_list_{n}():
    await trio.sleep(0)
    KEPT.append(bytearray(64))
'''


def _asyncio_file(n, mode, loop_scope):
    """pytest-asyncio: one module whose tests and fixtures use `loop_scope`
    (the fixtures of every scope that scope allows)."""
    strict = mode == "strict"
    mark = f'@pytest.mark.asyncio(loop_scope="{loop_scope}")' \
        if strict or loop_scope != "function" else ""
    scopes = [s for s in ("function", "class", "module", "session")
              if _wider_or_same(loop_scope, s)]
    parts = [ASYNCIO_HELPERS]
    for scope in scopes:
        parts.append(f'''

@pytest_asyncio.fixture(scope="{scope}", loop_scope="{loop_scope}")
async def resource_{scope}():
    await asyncio.sleep(0)
    yield {{"n": 1}}
    await asyncio.sleep(0)
''')
    for name, body in BODIES.items():
        params = ", ".join(f"resource_{s}" for s in scopes) \
            if name == "fixture" else ""
        text = body if name != "fixture" else " and ".join(
            f"resource_{s}['n'] == 1" for s in scopes).join(
                ("assert ", ""))
        parts.append(f"\n\n{mark}\nasync def test_{name}_{n}({params}):\n"
                     f"    {text}\n")
    parts.append(f'''

class TestInClass{n}:
    {mark}
    async def test_method(self):
        await asyncio.sleep(0)

    {mark}
    async def test_method_fixture(self, resource_{scopes[0]}):
        assert resource_{scopes[0]}["n"] == 1
''')
    parts.append(ASYNCIO_LEAKS.format(n=n, mark=mark))
    return "".join(parts)


_SCOPES = ("function", "class", "module", "session")


def _wider_or_same(loop_scope, scope):
    """Whether a fixture of `scope` can run in a loop of `loop_scope`."""
    return _SCOPES.index(scope) <= _SCOPES.index(loop_scope)


def _bodies_file(helpers, bodies, leaks, mark, n):
    parts = [helpers]
    for name, body in bodies.items():
        params = "resource" if name == "fixture" else ""
        parts.append(f"\n\n{mark}\nasync def test_{name}_{n}({params}):\n"
                     f"    {body}\n")
    parts.append(leaks.format(n=n))
    return "".join(parts)


def flavours():
    """{name: (ini text, {file name: source})}."""
    out = {}
    for mode in ("strict", "auto"):
        files = {f"test_{mode}_{scope}.py": _asyncio_file(i, mode, scope)
                 for i, scope in enumerate(_SCOPES)}
        out[f"asyncio-{mode}"] = (
            f"[pytest]\nasyncio_mode = {mode}\n"
            "asyncio_default_fixture_loop_scope = function\n", files)
    out["anyio"] = ("[pytest]\n", {
        "test_anyio.py": _bodies_file(ANYIO_HELPERS, ANYIO_BODIES,
                                      ANYIO_LEAKS, "@pytest.mark.anyio", 0)})
    out["trio"] = ("[pytest]\n", {
        "test_trio.py": _bodies_file(TRIO_HELPERS, TRIO_BODIES, TRIO_LEAKS,
                                     "@pytest.mark.trio", 0)})
    return out


# Plugins each flavour must not see: pytest-trio's trio_mode and
# pytest-asyncio's auto mode would both claim an unmarked async test.
_DISABLE = {
    "asyncio-strict": ["-p", "no:trio"],
    "asyncio-auto": ["-p", "no:trio", "-p", "no:anyio"],
    "anyio": ["-p", "no:asyncio", "-p", "no:trio"],
    "trio": ["-p", "no:asyncio", "-p", "no:anyio"],
}


def run_flavour(python, folder, name, args):
    """Runs one flavour once; returns its report's test records."""
    report = folder / "report.json"
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
           *_DISABLE[name], "--leaks",
           f"--leaks-report={report}", *args]
    proc = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    if proc.returncode not in (0, 1) or not report.exists():
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"async_corpus: {cmd!r} in {folder} exited "
                         f"{proc.returncode}")
    with open(report, encoding="utf-8") as f:
        return json.load(f)["tests"]


def _wrong(rec):
    """'false alarm', 'miss', 'error' or None for a right verdict."""
    leaky = "::test_leak_" in rec["id"]
    if rec["verdict"] == "error":
        return "error"
    if rec["verdict"] == "leak" and not leaky:
        return "false alarm"
    if rec["verdict"] == "clean" and leaky:
        return "miss"
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--verdicts", type=int, default=1000,
                        help="stop once this many tests were judged")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("-n", dest="workers", default=None)
    parser.add_argument("--dist", default=None,
                        help="pytest-xdist's distribution mode, with -n")
    parser.add_argument("--flavor", action="append", default=None,
                        choices=sorted(_DISABLE))
    args = parser.parse_args(argv)
    extra = ["-n", args.workers] if args.workers else []
    if args.workers and args.dist:
        extra += ["--dist", args.dist]
    chosen = {name: value for name, value in flavours().items()
              if args.flavor is None or name in args.flavor}
    tally = {"leak": 0, "clean": 0, "error": 0, "skipped": 0}
    wrong = {"false alarm": 0, "miss": 0, "error": 0}
    tests = rounds = 0
    with tempfile.TemporaryDirectory(prefix="async-corpus-") as tmp:
        folders = {}
        for name, (ini, files) in chosen.items():
            folder = pathlib.Path(tmp) / name
            folder.mkdir()
            (folder / "pytest.ini").write_text(ini)
            for fname, source in files.items():
                (folder / fname).write_text(source)
            folders[name] = folder
        while tally["leak"] + tally["clean"] < args.verdicts:
            rounds += 1
            before = sum(tally.values())
            for name, folder in folders.items():
                records = run_flavour(args.python, folder, name, extra)
                for rec in records:
                    tally[rec["verdict"]] += 1
                    why = _wrong(rec)
                    if why:
                        wrong[why] += 1
                        print(f"{why.upper()} ({name}): {rec['id']} "
                              f"{rec['verdict']} {rec.get('deltas')} "
                              f"{rec.get('reason') or ''}")
            if rounds == 1:
                tests = sum(tally.values())
            if sum(tally.values()) == before:
                break
    version = subprocess.run(
        [args.python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True, text=True).stdout.strip()
    judged = tally["leak"] + tally["clean"]
    print(f"async_corpus: Python {version}, {rounds} rounds of {tests} "
          f"tests ({', '.join(chosen)}): {judged} verdicts, "
          f"{tally['clean']} clean, {tally['leak']} leak, "
          f"{wrong['false alarm']} false alarms, {wrong['miss']} misses, "
          f"{wrong['error']} errors, {tally['skipped']} skipped")
    return 1 if any(wrong.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
