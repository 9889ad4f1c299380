"""What other pytest plugins do that the hunt must know: each fact about a
third-party plugin lives here, read through the plugin object pytest
registered (never imported: a plugin disabled with ``-p no:NAME`` is not
there), and every reader falls back to the general path when the plugin's
shape is not the one known.

- pytest-rerunfailures reruns a failing test (``--reruns``, the ``flaky``
  marker) from its own pytest_runtest_protocol, which the hunt's comes
  before: reruns() says whether it would rerun an item.
- pytest-benchmark's fixture appends one result per run to a session list
  its table is made from: harness_lists().
- pytest-asyncio's async test items name their event loop runner fixture
  in their first setup: preset_async_item().
- Hook implementations of pytest_runtest_setup/teardown that do nothing
  which depends on the run they are called in (they reseed, or check a
  marker): the runner treats them as pytest's own, and keeps its fast
  paths (HARMLESS_HOOKS).
"""

import types

# (plugin module, hook name): implementations known to be harmless to the
# runner's fast paths, checked as they were written in the versions below.
# - pytest-randomly (3.x-5.x): setup, call and teardown reseed `random`
#   (and numpy, faker, ...) to a value of the test's node id and the phase
#   alone: called again, or with no run between, they set the same state.
# - pytest-benchmark (4.x-5.x): setup checks the benchmark marker's
#   arguments and raises on a bad one; it keeps nothing.
# - pytest-rerunfailures (14.x-16.x): teardown notes the next item on the
#   item and, only when its own protocol ran the item (execution_count, set
#   by that protocol alone, which the hunt's replaces), suspends the wider
#   finalizers for a rerun.
HARMLESS_HOOKS = frozenset({
    ("pytest_randomly", "pytest_runtest_setup"),
    ("pytest_randomly", "pytest_runtest_teardown"),
    ("pytest_benchmark.plugin", "pytest_runtest_setup"),
    ("pytest_rerunfailures", "pytest_runtest_teardown"),
})


def harmless(impl):
    """Whether hook implementation `impl` (a pluggy HookImpl) is one of
    HARMLESS_HOOKS: a plain implementation (no wrapper), the module's own
    function of that name."""
    plugin = impl.plugin
    function = impl.function
    if not isinstance(plugin, types.ModuleType) or \
            getattr(impl, "hookwrapper", False) or \
            getattr(impl, "wrapper", False):
        return False
    name = getattr(function, "__name__", None)
    return (plugin.__name__, name) in HARMLESS_HOOKS and \
        getattr(plugin, name, None) is function and \
        getattr(function, "__module__", None) == plugin.__name__


def reruns(item):
    """Whether pytest-rerunfailures would rerun `item` when it fails: it is
    registered, the item has reruns (the option or the marker) and its path
    is not excluded.  False when the plugin is absent or not of a known
    shape."""
    plugin = item.config.pluginmanager.get_plugin("rerunfailures")
    count = getattr(plugin, "get_reruns_count", None)
    excluded = getattr(plugin, "_is_rerun_path_excluded", None)
    if not callable(count):
        return False
    try:
        if callable(excluded) and excluded(item):
            return False
        return bool(count(item))
    except Exception:
        return False


def harness_lists(config):
    """The lists other plugins keep one record per run in, for the
    session's end: pytest-benchmark's results (its fixture appends one per
    run, stats and all).  Only the reported run's record is the test's; an
    extra run's is the harness's."""
    bench = getattr(getattr(config, "_benchmarksession", None),
                    "benchmarks", None)
    return [bench] if type(bench) is list else []


def preset_async_item(item):
    """pytest-asyncio (1.x): the setup of an async test's item
    (PytestAsyncioFunction) appends the name of its event loop runner
    fixture, `_<loop scope>_scoped_runner`, to item.fixturenames the first
    time, and caches the loop scope (a cached_property) in the item.  Done
    now, before the snapshot that precedes the reported run, that run finds
    both made, as every later run does.  Nothing for an item of another
    shape."""
    if not getattr(type(item), "__module__", "").startswith("pytest_asyncio"):
        return
    names = getattr(item, "fixturenames", None)
    try:
        scope = item._loop_scope
    except Exception:
        return
    if not isinstance(scope, str) or not isinstance(names, list):
        return
    name = f"_{scope}_scoped_runner"
    if name not in names:
        names.append(name)
