"""Running one test item more than once, as pytest runs it once.

pytest's own runtestprotocol() assumes one run per item: run it again and
the harness itself grows (captured output appended to the item, finalizers
added to shared fixtures, warnings recorded for the terminal), and every
clean test would "leak".  ItemRunner runs the whole protocol (setup, call,
teardown, through the hooks, so every plugin and fixture takes part) and
puts back what pytest's bookkeeping added, so that only the test's own
growth is measured:

- a run that passed tears down the item alone, so module-, class- and
  session-scoped fixtures are set up once and stay up: before the reported
  run when only pytest's own hooks take part in the setup phase (so that
  the first test of their scope does not grow by them), else in it; when
  the item is the last of their scope, the teardown phase alone tears them
  down for the next item (one more whole run, unreported but for its
  teardown, when a hook of another plugin takes part in that phase);
- output captured by pytest, user properties and warnings of the extra runs
  are dropped (the reported run keeps its own);
- what the item holds (attributes, own markers, keywords, extra keyword
  matches, stash entries) is put back as the reported run left it, and a
  test method gets a fresh instance of its class each run (_ItemState);
- finalizers that function-scoped fixtures register on the shared fixtures
  they depend on are dropped once the fixture is finished (they are no-ops
  by then, and one accumulates per run);
- a doctest's globals, which the doctest runner clears after each run, are
  put back before the next;
- a hypothesis @given test's extra runs draw the same examples every time,
  and a RuleBasedStateMachine's TestCase the same steps, and hypothesis's
  cache of strategies is emptied before each snapshot (_SameExamples);
- the tmp_path directory of an extra run is removed after it;
- reports logged from inside an extra run are dropped: pytest logs a
  subtest's report (unittest's subTest, the subtests fixture) as soon as
  it ends, and the terminal, junitxml and xdist would keep one more per
  run;
- what other plugins keep of each run for the session's end is dropped
  for the extra runs (pytest-benchmark's results: its table would list the
  test once per run).

CPython's type attribute cache, which keeps the name of every attribute
looked up (the harness builds some afresh each run), is cleared by the
settling before every snapshot, in a way the test cannot observe.

What the runner reads and puts back of pytest's internals (its setup
stack, an item's request and sections, a fixture's finalizers, the log
capture, tmp_path's counters) it reaches through pytest_private.
"""

import bdb
import contextlib
import inspect
import os
import pathlib
import shutil
import sys
import types
import warnings

import pytest

from leakcheck import cpython

from . import neighbours
from . import parking
from . import perrun
from . import pytest_private

_HOOKS = {
    "setup": "pytest_runtest_setup",
    "call": "pytest_runtest_call",
    "teardown": "pytest_runtest_teardown",
}


def _reraise(config):
    """Exceptions that end the session instead of failing the test, as
    pytest's runner decides."""
    if config.getoption("usepdb", False):
        return (pytest.exit.Exception,)
    return (pytest.exit.Exception, KeyboardInterrupt)


def _interactive(call, report):
    """Whether pytest would hand this failure to --pdb (as its runner)."""
    if call.excinfo is None or hasattr(report, "wasxfail"):
        return False
    skips = (pytest.skip.Exception, bdb.BdbQuit)
    unittest = sys.modules.get("unittest")
    if unittest is not None:
        skips += (unittest.SkipTest,)
    return not isinstance(call.excinfo.value, skips)


def call_and_report(item, ihook, when, interact=False, **kwds):
    """Runs one phase of `item` through its hook and returns its report,
    without logging it.  `ihook`: item.ihook, read once for the hunt (the
    property looks the item's conftests up at each read: a few
    microseconds a phase)."""
    hook = getattr(ihook, _HOOKS[when])
    call = pytest.CallInfo.from_call(lambda: hook(item=item, **kwds),
                                     when=when,
                                     reraise=_reraise(item.config))
    report = ihook.pytest_runtest_makereport(item=item, call=call)
    if interact and _interactive(call, report):
        ihook.pytest_exception_interact(node=item, call=call, report=report)
    return report


def report_standins(item, ihook):
    """Three reports of a passing run (setup, call, teardown), made through
    pytest_runtest_makereport before the snapshot that precedes the
    reported run, and dropped before the one after it.  The reported run's
    own reports live on (pytest logs them after the hunt), and so does
    what the hook's implementations keep of them (pytest's tmp_path keeps
    each phase's outcome in the item's stash, the teardown's alone once
    the tmp_path fixture is torn down; a conftest may keep the report on
    the item): made here first, with the stand-ins gone in the
    real ones' place, a run that grew nothing else reads as nothing.  A
    real report holds at least what its stand-in does (captured output and
    failures only add to it), so a stand-in never hides growth.  None when
    they cannot be made: the run then reads its reports as growth and is
    not taken for a measured run.  The item's funcargs are a dict while
    they are made, as in a run (pytest-benchmark's hook reads them).
    `ihook`: item.ihook, read once for the hunt."""
    none = getattr(item, "funcargs", {}) is None
    if none:
        item.funcargs = {}
    try:
        hook = ihook.pytest_runtest_makereport
        known = _of_impls(item.config, hook, _standins_known)
        reports = (pytest_private.standin_reports(item)
                   if known is not None else None)
        if reports is not None and known is not True:
            reports = pytest_private.wrap_standins(hook, known, item,
                                                   reports)
        if reports is None:
            reports = [ihook.pytest_runtest_makereport(
                           item=item, call=pytest_private.passed_call(when))
                       for when in ("setup", "call", "teardown")]
        # tmp_path's teardown deletes the phases' outcomes the stand-ins
        # kept, and the teardown report keeps its own alone: so does the
        # stash now.
        pytest_private.preset_tmp_path_result(item)
        return reports
    except Exception:
        return None
    finally:
        if none:
            item.funcargs = None


def preset_current_test(item):
    """Sets PYTEST_CURRENT_TEST to each value the item's run will give it,
    then removes it, as the run will.  pytest sets it in each phase, and
    glibc's setenv() keeps every value it was ever given, for good (the C
    heap grows by each new string once): set here, before the snapshot that
    precedes the reported run, the strings are known already when the run
    sets them.  And a run ends with the variable removed: one inherited
    from a parent pytest (pytester's runs) would otherwise go in the
    session's first reported run, which would read as less, hiding as much
    growth."""
    # os.putenv() is what os.environ's item assignment calls (setenv()),
    # without the encoding in Python and the dict entry that pop() drops.
    if not _ENVIRON_GROWN:
        _grow_environ()
    try:
        for when in ("setup", "call", "teardown"):
            os.putenv(_CURRENT_TEST, _current_test(item, when))
    except Exception:
        pass
    finally:
        # Popped only when there (a pop of a missing key raises and
        # catches KeyError twice).
        if _in_environ(_CURRENT_TEST):
            os.environ.pop(_CURRENT_TEST, None)
        os.unsetenv(_CURRENT_TEST)


_CURRENT_TEST = "PYTEST_CURRENT_TEST"


def _in_environ(name):
    """Whether os.environ holds `name`, read from its dict of encoded keys
    (`in` would look it up through __getitem__, which raises KeyError
    for a missing one); True when that dict is not of the shape known."""
    data = getattr(os.environ, "_data", None)
    encode = getattr(os.environ, "encodekey", None)
    if not isinstance(data, dict) or not callable(encode):
        return True
    try:
        return encode(name) in data
    except Exception:
        return True


_ENVIRON_GROWN = []         # one True once _grow_environ() ran


def _grow_environ():
    """Grows os.environ's dict to the size pytest's runs keep it at, once,
    before the first snapshot.  Each run sets PYTEST_CURRENT_TEST in it and
    pops it at the end, and a dict's deleted entry is not reused: after
    some runs its table is full and made anew, larger the first time only
    (later ones come back to that size), which one test's reported run read
    as py_bytes and native_bytes grown by a kilobyte (an early test of the
    session, the 5th to the 18th by how many variables the environment
    holds, on 3.11).  Set and popped here until that happens
    (a bounded number of times), with the value it has (a parent pytest's),
    or none."""
    _ENVIRON_GROWN.append(True)
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):
        return
    kept = os.environ.get(_CURRENT_TEST)
    size = sys.getsizeof(data)
    try:
        for _ in range(4 * len(data) + 64):
            os.environ[_CURRENT_TEST] = kept or ""
            os.environ.pop(_CURRENT_TEST)
            if sys.getsizeof(data) != size:
                break
    except Exception:
        pass
    finally:
        if kept is not None:
            os.environ[_CURRENT_TEST] = kept


# The plugin's module, whose pytest_runtest_makereport (hunt.on_report)
# does nothing with the report of a checked test.
_PLUGIN_MODULE = __name__.rpartition(".")[0] + ".plugin"


def _standins_known(impls):
    return pytest_private.standins_known(impls, _PLUGIN_MODULE)


def _current_test(item, when):
    """The value pytest gives PYTEST_CURRENT_TEST in phase `when`."""
    return f"{item.nodeid} ({when})".replace("\x00", "(null)")


def outcome_of(reports):
    """The outcome of a run from its reports: "passed", "failed" (the call
    failed), "error" (setup or teardown failed), "skipped", "xfailed" or
    "xpassed"."""
    for rep in reports:         # the common case first: all passed
        if rep.outcome != "passed" or hasattr(rep, "wasxfail"):
            break
    else:
        return "passed"
    for rep in reports:
        if rep.failed:
            return "failed" if rep.when == "call" else "error"
    for rep in reports:
        if hasattr(rep, "wasxfail"):
            return "xfailed" if rep.skipped else "xpassed"
        if rep.skipped:
            return "skipped"
    return "passed"


_MISSING = object()
# The setup and teardown of a node that defines none (a module, a class).
_NODE_SETUP = getattr(getattr(pytest, "Item", None), "setup", None)
_NODE_TEARDOWN = getattr(getattr(pytest, "Item", None), "teardown", None)
# The modules whose hook implementations the runner knows: pytest's own
# and this plugin's.
_OWN_PLUGINS = (pytest_private.PYTEST_PACKAGE,
                __name__.rpartition(".")[0] + ".")


def _test_function(item):
    """The plain Python function of a test item, when calling it with a
    keyword it cannot take raises before its body runs (no **kwargs); else
    None."""
    func = pytest_private.test_function(item)
    func = getattr(func, "__func__", func)
    code = getattr(func, "__code__", None)
    if not isinstance(func, types.FunctionType) or code is None or \
            code.co_flags & inspect.CO_VARKEYWORDS:
        return None
    return func


def _put_back_dict(d, saved, drop=()):
    """Makes dict `d` hold what `saved` held, in place: keys added since are
    removed, values replaced since are put back; keys in `drop` go."""
    for key in [key for key in d if key not in saved or key in drop]:
        del d[key]
    for key, value in saved.items():
        if key not in drop and d.get(key, _MISSING) is not value:
            d[key] = value


def _same(value, saved):
    """Whether a list, dict or set holds what `saved` (a copy) held, by
    identity: no element's __eq__ runs (an array's would raise)."""
    if len(value) != len(saved):
        return False
    if type(value) is list:
        return all(a is b for a, b in zip(value, saved))
    if type(value) is dict:
        return all(saved.get(k, _MISSING) is v for k, v in value.items())
    return all(x in saved for x in value)


def _hold(target, source):
    """Makes list, dict or set `target` hold what `source` holds, in place
    and by identity (no element's __eq__ runs); nothing changes, and
    nothing is allocated, when it holds that already.  How _ItemState puts
    the item back after a run, and refreshes its copies after the reported
    run."""
    if _same(target, source):
        return
    if type(target) is dict:
        _put_back_dict(target, source)
    elif type(target) is list:
        target[:] = source
    else:
        target.intersection_update(source)
        target.update(source)


class _ItemState:
    """What the item holds between runs, as the reported run left it: its
    attributes (what fixtures and hooks store on request.node), its own
    markers (request.applymarker, node.add_marker), keywords, extra keyword
    matches and stash entries; the junit XML's test suite properties.
    pytest fills these once per item; each
    extra run would add to them again (a marker applied by a fixture: one
    more per run), so they are put back after every extra run, the way
    function-scoped fixtures are set up again.  A method's instance is not
    kept: as pytest gives each test item a fresh instance of its class,
    each run gets one."""

    def __init__(self, item):
        self.drop = pytest_private.method_instance(item)
        self.attrs = dict(item.__dict__)
        # The contents of the lists, dicts and sets it holds, which a test
        # may add to in place (node.__dict__.setdefault("seen", []).append);
        # not its report sections, which ItemRunner trims itself (and takes
        # out of the process while a snapshot reads: a copy here would keep
        # them in).
        self.contents = {key: (value, type(value)(value))
                         for key, value in self.attrs.items()
                         if type(value) in (list, dict, set)
                         and key != pytest_private.REPORT_SECTIONS}
        self.markers = list(getattr(item, "own_markers", ()))
        keywords = pytest_private.keyword_markers(item)
        self.keywords = dict(keywords) if keywords is not None else None
        extra = getattr(item, "extra_keyword_matches", None)
        self.extra = set(extra) if isinstance(extra, set) else None
        storage = pytest_private.stash_storage(item)
        self.stash = dict(storage) if storage is not None else None
        self.suite = pytest_private.suite_properties(item.config)
        self.suite_len = len(self.suite) if self.suite is not None else 0

    def refresh(self, item):
        """Holds what `item` holds now, updating the copies in place: made
        before the reported run (when the series does not read it) and
        refreshed after it."""
        _put_back_dict(self.attrs, item.__dict__, self.drop)
        contents = self.contents
        for key in [key for key in contents if key not in self.attrs]:
            del contents[key]
        for key, value in self.attrs.items():
            if type(value) not in (list, dict, set) or \
                    key == pytest_private.REPORT_SECTIONS:
                continue
            held = contents.get(key)
            if held is None or held[0] is not value:
                contents[key] = (value, type(value)(value))
            else:
                _hold(held[1], value)
        markers = getattr(item, "own_markers", None)
        if isinstance(markers, list):
            _hold(self.markers, markers)
        keywords = pytest_private.keyword_markers(item)
        if self.keywords is not None and keywords is not None:
            _hold(self.keywords, keywords)
        extra = getattr(item, "extra_keyword_matches", None)
        if self.extra is not None and isinstance(extra, set):
            _hold(self.extra, extra)
        storage = pytest_private.stash_storage(item)
        if self.stash is not None and storage is not None:
            _hold(self.stash, storage)
        if self.suite is not None:
            self.suite_len = len(self.suite)

    def put_back(self, item):
        _put_back_dict(item.__dict__, self.attrs, self.drop)
        for value, saved in self.contents.values():
            _hold(value, saved)
        markers = getattr(item, "own_markers", None)
        if isinstance(markers, list):
            _hold(markers, self.markers)
        keywords = pytest_private.keyword_markers(item)
        if self.keywords is not None and keywords is not None:
            _hold(keywords, self.keywords)
        extra = item.extra_keyword_matches
        if self.extra is not None:
            _hold(extra, self.extra)
        storage = pytest_private.stash_storage(item)
        if self.stash is not None and storage is not None:
            _hold(storage, self.stash)
        if self.suite is not None:
            del self.suite[self.suite_len:]


class _SameExamples:
    """A hypothesis @given test draws new examples on every run, and its
    caches (and the test's own, keyed by examples) fill with each new
    batch: run after run reads as growth.  Its extra runs use the same
    examples each time instead: settings derived from the test's own with
    derandomize=True and no example database (no replayed failures, no
    writes), no deadline and no health checks (the runs are measured, and
    a diagnosis traces them: they are slower than the test's own).  The
    reported run keeps the test's own settings.  A RuleBasedStateMachine's
    TestCase, whose runTest runs the machine with its class's `settings`,
    has those swapped instead.

    The same examples do not make the same strategies: a strategy drawn
    inside a draw (a composite's, a flatmap's) is a new object each time,
    and hypothesis caches the strategies its functions make, keyed by their
    arguments, in a cache bounded at 1,024 entries (hypothesis 6.x).  Each
    run adds entries until it is full, and then each new one evicts an old
    one: a run reads as growth for as many runs as it takes to fill it
    (cbor2's test_invariant_encode_decode[c]: +5,879, +5,467, +5,467 and
    +3,104 blocks in its first four runs, then less as the cache filled).
    clear_cache() empties it, with hypothesis's own function
    (clear_strategy_cache(); clear_cache() in 6.141), before
    the first snapshot and after every run: each snapshot finds it empty.
    None of that where hypothesis has no such function."""

    __slots__ = ("holder", "name", "own", "fixed", "clear_cache")

    def __init__(self, holder, name, own, fixed):
        self.holder, self.name = holder, name
        self.own, self.fixed = own, fixed
        utils = sys.modules.get("hypothesis.strategies._internal.utils")
        # Its name in hypothesis 6.170, and in 6.141 (the newest for 3.9).
        clear = getattr(utils, "clear_strategy_cache",
                        getattr(utils, "clear_cache", None))
        self.clear_cache = clear if callable(clear) else _nothing

    @classmethod
    def of(cls, item):
        """The swap for `item`, or None when it is no hypothesis test (or
        hypothesis is not imported)."""
        func = getattr(getattr(item, "obj", None), "__func__",
                       getattr(item, "obj", None))
        if not getattr(func, "is_hypothesis_test", False):
            return None
        if getattr(func, "_hypothesis_state_machine_class", None) \
                is not None:
            holder, name = getattr(item, "cls", None), "settings"
            own = vars(holder).get(name) if isinstance(holder, type) \
                else None
        else:
            holder, name = func, "_hypothesis_internal_use_settings"
            own = getattr(func, name, None)
        hypothesis = sys.modules.get("hypothesis")
        if own is None or hypothesis is None:
            return None
        try:
            fixed = hypothesis.settings(
                own, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(hypothesis.HealthCheck))
        except Exception:
            return None
        return cls(holder, name, own, fixed)

    def fix(self):
        setattr(self.holder, self.name, self.fixed)

    def restore(self):
        """After an extra run: the test's own settings back, and the
        strategies the run cached gone."""
        setattr(self.holder, self.name, self.own)
        self.clear_cache()


def _nothing():
    pass


def _replace_teardown(reports, final):
    """The reports to log: the final teardown's report in place of the
    reported run's, unless only that one failed."""
    last = reports[-1]
    if final.failed or not last.failed:
        final.duration += last.duration
        reports[-1] = final
    return reports


def _own(impl):
    """Whether hook implementation `impl` is pytest's own or this
    plugin's."""
    plugin = impl.plugin
    name = (plugin.__name__ if isinstance(plugin, types.ModuleType)
            else type(plugin).__module__)
    return isinstance(name, str) and name.startswith(_OWN_PLUGINS)


def _pytest_own(config, hook):
    """Whether every implementation of `hook` (a hook caller) is pytest's
    own, this plugin's or one of another plugin's known to do nothing
    that depends on the run it is called in (neighbours.HARMLESS_HOOKS)."""
    return _of_impls(config, hook, _all_pytest_own)


def _all_pytest_own(impls):
    return all(_own(impl) or neighbours.harmless(impl) for impl in impls)


def _neighbours_to_preset(impls):
    """Of `impls`, last first, the harmless implementations that are not
    pytest's own nor this plugin's (preset_neighbour_hooks calls them)."""
    return tuple(impl for impl in reversed(impls)
                 if not _own(impl) and neighbours.harmless(impl))


# {(what is decided, a hook's implementations): the decision}, for the
# session: the decisions about a hook's implementations are asked before
# every test, and those change only when a plugin registers.
_DECIDED = pytest.StashKey[dict]()


def _of_impls(config, hook, decide):
    """decide(the implementations of `hook`, a tuple), remembered."""
    decided = config.stash.get(_DECIDED, None)
    if decided is None:
        decided = config.stash[_DECIDED] = {}
    key = (decide, tuple(hook.get_hookimpls()))
    try:
        return decided[key]
    except KeyError:
        found = decided[key] = decide(key[1])
        return found


def preset_neighbour_hooks(item, nextitem, ihook):
    """Calls the harmless implementations of pytest_runtest_setup and
    pytest_runtest_teardown that are not pytest's own nor this plugin's
    (neighbours.HARMLESS_HOOKS) once, before the snapshot that precedes
    the reported run: what they keep of the first call for an item is made
    then, not in that run (pytest-randomly caches the CRC of each node id,
    for good; pytest-rerunfailures sets two attributes on the item).  They
    set only what the run's own calls set again (the seed of `random`
    first of all), and what they raise the run raises.  `ihook`:
    item.ihook, read once for the hunt."""
    for hook in (ihook.pytest_runtest_teardown, ihook.pytest_runtest_setup):
        impls = _of_impls(item.config, hook, _neighbours_to_preset)
        if not impls:
            continue
        args = {"item": item, "nextitem": nextitem}
        for impl in impls:
            try:
                impl.function(**{name: args[name]
                                 for name in impl.argnames})
            except Exception:
                pass


def _before_fixtures(hook, item):
    """Calls the implementations of pytest_runtest_setup (`hook`) that are
    not pytest's own nor this plugin's, and that pluggy calls before
    pytest's runner sets the item's fixtures up, as the setup phase would:
    the shared fixtures set up ahead of it see what they set (the seed
    pytest-randomly gives `random`).  They are harmless ones
    (_pytest_own): the setup phase calling them again sets the same.
    False when one raised (the setup phase raises it, before any fixture),
    or pytest's runner's is not found."""
    impls = hook.get_hookimpls()
    runner = next((i for i, impl in enumerate(impls)
                   if getattr(impl.plugin, "__name__", None)
                   == pytest_private.RUNNER_PLUGIN), None)
    if runner is None:
        return False
    args = {"item": item}
    try:
        for impl in reversed(impls[runner + 1:]):
            if _own(impl):
                continue
            if not neighbours.harmless(impl):
                return False
            impl.function(**{name: args[name] for name in impl.argnames})
    except Exception:
        return False
    return True


# id(fixturedef) -> fixturedef, for every fixture definition of the session
# that is not function-scoped and keeps its finalizers in a list.
_SHARED_FIXTURES = pytest.StashKey[dict]()


def note_shared_fixture(session, fixturedef):
    """Remembers `fixturedef` (the plugin calls this from
    pytest_fixture_setup, and ItemRunner for the item's own closure) if it
    is shared: every function-scoped fixture that depends on it adds it a
    finalizer per run.  The item's closure does not list them all: a
    fixture requested at run time (request.getfixturevalue, as async test
    plugins request their event loop runner) depends on shared fixtures of
    its own."""
    shared = session.stash.setdefault(_SHARED_FIXTURES, {})
    if id(fixturedef) not in shared and \
            getattr(fixturedef, "scope", "function") != "function" and \
            pytest_private.finalizers(fixturedef) is not None:
        shared[id(fixturedef)] = fixturedef


def _forget_finished_fixtures(shared):
    """Lets go of the shared fixtures noted (note_shared_fixture) that are
    not set up and hold no finalizer: kept, every test would look at every
    module's and class's fixture of the session so far (a unittest suite
    has one per class), a cost that grows with the suite.  A fixture set
    up again is noted again by pytest_fixture_setup."""
    gone = [key for key, fd in shared.items()
            if getattr(fd, "cached_result", None) is None
            and not pytest_private.finalizers(fd)]
    for key in gone:
        del shared[key]


def _popped(stack, nextitem):
    """The nodes on pytest's setup stack that tearing down for `nextitem`
    (None: the session's end) pops, as SetupState.teardown_exact() finds
    them: those past the part of the stack `nextitem`'s chain shares."""
    needed = nextitem.listchain() if nextitem is not None else []
    nodes = list(stack)
    kept = 0
    while kept < min(len(nodes), len(needed)) and \
            nodes[kept] is needed[kept]:
        kept += 1
    return nodes[kept:]


class _Spent:
    __slots__ = ("seconds",)

    def __init__(self):
        self.seconds = float(0)


class _TimedFinalizer:
    """A finalizer on pytest's setup stack that counts its seconds (on
    perrun.wall, the hunt's costs' clock)."""

    __slots__ = ("fin", "spent")

    def __init__(self, fin, spent):
        self.fin, self.spent = fin, spent

    def __call__(self):
        began = perrun.wall()
        try:
            return self.fin()
        finally:
            self.spent.seconds += perrun.wall() - began


class ItemRunner:
    """Runs `item`: once as its reported run, then again as often as the
    series asks, and finally tears down what `nextitem` does not need.

    With `read_reported` (the series reads the reported run: one warm-up
    run), what pytest keeps of the reported run is made first, before the
    snapshot that precedes it, so that a run that grew nothing else reads
    as nothing: the wider fixtures it uses (set up under `timed`, the
    test's time limit), the values of PYTEST_CURRENT_TEST, the session's
    tmp_path base and the counter of the test's name, the item's stash
    entry for its xfail marks, stand-ins of its reports (dropped once the
    real ones exist)."""

    def __init__(self, item, nextitem, ihook, read_reported=False,
                 timed=contextlib.nullcontext):
        self.item = item
        self.nextitem = nextitem
        # item.ihook, read once by the caller: the property looks the
        # item's conftests up at each read.
        self.ihook = ihook
        # The nodes from the session down to the item, and to the next
        # item: each run's teardown compares them (listchain() makes a
        # list, walking up the tree, at each call).
        self._chain = item.listchain()
        self._next_chain = (nextitem.listchain() if nextitem is not None
                            else None)
        # The teardown target of every run but the last: the item's
        # parent, whose chain keeps every collector (and its fixtures) up.
        self._parent = item.parent
        self._sections = 0
        self._properties = 0
        # The seconds (perrun.wall) of pytest's own work (the wider
        # fixtures' setup and teardown) in the phases the runner adds to
        # the test's: the rest of those phases is leakcheck's.
        self.pytests_seconds = float(0)
        # The seconds (perrun.wall) of the reported run's phases alone:
        # what run_reported() does after them is leakcheck's.  A float of
        # its own from the start, replaced by another in the run: no
        # growth of it.
        self.reported_seconds = float(0)
        # Made now, before the snapshot that precedes the reported run, so
        # that what the runner keeps is not that run's growth: the shared
        # fixtures this item uses, and none that is finished.
        _forget_finished_fixtures(
            item.session.stash.setdefault(_SHARED_FIXTURES, {}))
        for fds in pytest_private.fixture_defs(item).values():
            for fd in fds:
                note_shared_fixture(item.session, fd)
        self._shared = item.session.stash.setdefault(_SHARED_FIXTURES, {})
        # Reads item.obj, which can make an instance of the test's class.
        self._examples = _SameExamples.of(item)
        if self._examples is not None:
            self._examples.clear_cache()
        # Up to 3.10, the test function's first call would leave it the
        # frame it keeps for the next: made now, it is not the reported
        # run's growth.
        test_function = (_test_function(item) if cpython.ZOMBIE_FRAMES
                         else None)
        if test_function is not None:
            cpython.make_frames(test_function)
        # The request pytest made when it collected the item goes now: each
        # run makes its own (as pytest's runtestprotocol does when an item
        # runs again), so that the reported run ends holding what it began
        # with.
        if pytest_private.holds_request(item):
            pytest_private.drop_request(item)
        # So does the instance it made for a method: each run gets a fresh
        # one, and leaves none (a unittest item drops its TestCase in its
        # teardown; the runner drops a test method's after each run).
        pytest_private.drop_instance(item)
        self._standins = None
        # Lists other plugins keep a record per run in; an extra run's
        # records are dropped after it.
        self._harness = neighbours.harness_lists(item.config)
        if read_reported:
            # Before the item's state is copied: the hooks that make what
            # the run keeps may add to the item (pytest's tmp_path plugin:
            # its stash).
            self._make_ready(timed)
        # Where the reported run's captured output is noted while the
        # snapshot after it reads (parking.py).
        self._spot = (parking.Spot(len(pytest_private.report_sections(item)))
                      if read_reported and parking.ready(item.config)
                      else None)
        # What each extra run is put back to.  A series that reads the
        # reported run makes it only when extra runs are due (ready_again:
        # most tests run once), after the reported run, as that run left
        # the item; else now, before any snapshot.
        self._state = None if read_reported else _ItemState(item)
        self.torn_down = False  # True once torn down for the next item
        dtest = getattr(item, "dtest", None)
        globs = getattr(dtest, "globs", None)
        self._globs = dict(globs) if isinstance(globs, dict) else None

    def _make_ready(self, timed):
        """Makes what pytest keeps of the reported run, before the snapshot
        that precedes it (see the class)."""
        item = self.item
        preset_neighbour_hooks(item, self.nextitem, self.ihook)
        neighbours.preset_async_item(item)
        pytest_private.check_node_types(item, self._chain)
        if self._preset_collectors():
            self._set_up_shared(timed)
        preset_current_test(item)
        self._preset_tmp_path()
        pytest_private.preset_xfail_marks(item)
        self._standins = report_standins(item, self.ihook)

    def _next_for_teardown(self):
        """The item the last teardown prepares for: pytest's nextitem, or
        None when the session is stopping (everything is torn down)."""
        session = self.item.session
        if session.shouldfail or session.shouldstop:
            return None
        return self.nextitem

    def _needs_wider_teardown(self):
        """Whether tearing down for the next item tears down more than the
        item itself (the item is the last of its module, class, ...)."""
        if self._next_for_teardown() is None:
            return True
        chain = self._chain[:-1]
        return self._next_chain[:len(chain)] != chain

    def _protocol(self, interact, extra):
        """setup, call (when setup passed), teardown: a copy of pytest's
        runtestprotocol(log=False).  When the run passed, the teardown tears
        down the item alone, so that the next run finds wider fixtures set
        up; else it tears down for the next item.  An extra run removes the
        tmp_path it was given."""
        item = self.item
        hasrequest = pytest_private.has_request(item)
        if hasrequest:
            pytest_private.make_request(item)
        tmp = None
        try:
            reports = [call_and_report(item, self.ihook, "setup", interact)]
            if reports[0].passed:
                if extra:
                    tmp = self._tmp_path()
                reports.append(call_and_report(item, self.ihook, "call",
                                               interact))
            keep = outcome_of(reports) == "passed"
            target = self._parent if keep else self._next_for_teardown()
            reports.append(call_and_report(item, self.ihook, "teardown",
                                           interact, nextitem=target))
            self.torn_down = not keep or not self._needs_wider_teardown()
        finally:
            if hasrequest:
                pytest_private.drop_request(item)
            if tmp is not None:
                self._recycle(tmp)
        return reports

    def _preset_collectors(self):
        """The run's setup pushes the collectors above the item not set up
        yet (for the first test of a package, a module, a class) onto
        pytest's setup stack, where they stay for the next tests.  Pushed
        now, as pytest's SetupState.setup() does, when their setup does
        nothing (a module, a class: xunit functions are fixtures) or only
        finds a package's __init__ module (one that defines no xunit
        module function: its setup runs now), that is not the run's growth.
        """
        stack = pytest_private.setup_stack(self.item.session)
        if stack is None:
            return False
        chain = self._chain[:-1]
        nodes = list(stack)
        if nodes != chain[:len(nodes)] or \
                not pytest_private.stack_settled(stack):
            return False    # pytest's own setup says what is wrong
        for col in chain[len(nodes):]:
            if getattr(type(col), "setup", None) is not _NODE_SETUP and \
                    not pytest_private.set_up_inert_package(col):
                return False
            pytest_private.push(stack, col, [col.teardown])
        return True

    def _shared_to_set_up(self):
        """The names of the item's fixtures wider than a function that are
        not up yet, when _set_up_shared() may set them up (see there);
        else ()."""
        item = self.item
        defs = pytest_private.fixture_defs(item)
        names = [name for name in getattr(item, "fixturenames", ())
                 if defs.get(name)
                 and getattr(defs[name][-1], "scope", "function")
                 != "function"
                 and getattr(defs[name][-1], "cached_result", 0) is None]
        if not names or not pytest_private.can_make_request(item) or \
                not _pytest_own(item.config,
                                item.ihook.pytest_runtest_setup) or \
                any(item.get_closest_marker(m) is not None
                    for m in ("skip", "skipif", "xfail")):
            return ()
        if pytest_private.output_capture_unknown(item.config) or \
                pytest_private.log_capture_unknown(item.config):
            return ()
        return names

    def _set_up_shared(self, timed):
        """Sets up the item's fixtures wider than a function (session,
        package, module, class) that are not up yet, before the snapshot
        that precedes the reported run: the first test of their scope would
        grow by them, and run once more for it.  pytest's setup then finds
        them up, as it does for the next tests of their scope.

        Done as the setup phase does it (under `timed`, the test's time
        limit), with pytest's output and log capture on, so that what they
        print or log is in the test's setup sections, and only where
        nothing else could change what that phase does first: every
        pytest_runtest_setup implementation is pytest's own, this
        plugin's or a harmless one of another plugin (called first, as
        that phase calls it: _before_fixtures), and the item has no skip,
        skipif or xfail marker (pytest skips before any fixture).  A
        fixture that fails or skips keeps that outcome, which pytest's
        setup raises from its cache, as for the scope's later tests; what
        it printed stays captured."""
        item = self.item
        names = self._shared_to_set_up()
        if not names:
            return
        capture = pytest_private.output_capture(item.config)
        logs = pytest_private.log_capture(item.config)
        reraise = _reraise(item.config)
        os.environ[_CURRENT_TEST] = _current_test(item, "setup")
        # On pytest's setup stack, as in its setup phase (a request of an
        # item not on it is a request made in its teardown), with nothing to
        # finish: the shared fixtures' finalizers go on their own nodes.
        stack = pytest_private.setup_stack(item.session)
        pytest_private.push(stack, item, [])
        pytest_private.new_request(item)
        try:
            with contextlib.ExitStack() as phase:
                phase.enter_context(timed())
                # Nested as pytest's hook wrappers are: the log capture
                # outside the output capture.
                if logs is not None:
                    phase.enter_context(
                        pytest_private.logging_phase(logs, item, "setup"))
                if capture is not None:
                    phase.enter_context(
                        pytest_private.capture_phase(capture, item, "setup"))
                if not _before_fixtures(item.ihook.pytest_runtest_setup,
                                        item):
                    return
                began = perrun.wall()
                try:
                    for name in names:
                        pytest_private.getfixturevalue(item, name)
                finally:
                    self.pytests_seconds += perrun.wall() - began
        except BaseException as e:
            # The setup phase raises it again (a fixture's outcome is
            # cached), or does what is left.
            if isinstance(e, reraise):
                raise
        finally:
            stack.pop(item, None)
            pytest_private.drop_request(item)
            if logs is not None:
                pytest_private.drop_logging_phase(item)
                pytest_private.fresh_log_buffers(item.config)

    def _preset_tmp_path(self):
        """When the test uses tmp_path: the session's base directory, which
        the first tmp_path makes (importing getpass for the user's name),
        is made now; and pytest 9 numbers tmp_path directories with a
        counter per name, which gains an entry the first time a name is
        used: made now, with the number the run will take (0)."""
        item = self.item
        factory = pytest_private.tmp_path_factory(item.config)
        if factory is None or \
                "tmp_path" not in getattr(item, "fixturenames", ()):
            return
        try:
            factory.getbasetemp()
        except Exception:
            pass            # the run's tmp_path raises it, as its error
        counters = pytest_private.tmp_path_counters(item.config)
        if counters is not None:
            counters.setdefault(pytest_private.tmp_path_name(item), 0)

    def _tmp_path(self):
        """The tmp_path this run of the item got, when pytest made it.

        An extra run's directory is removed after it and its numbered name
        given to the next run: each new name would stay in memory for good
        on CPython 3.12, where pathlib interns path parts and interned
        strings are immortal.  The reported run's own directory stays."""
        funcargs = getattr(self.item, "funcargs", None)
        tmp = funcargs.get("tmp_path") if isinstance(funcargs, dict) else None
        factory = pytest_private.tmp_path_factory(self.item.config)
        if not isinstance(tmp, pathlib.Path) or factory is None:
            return None
        try:
            base = factory.getbasetemp()
        except Exception:
            return None
        return tmp if base in tmp.parents else None

    def _recycle(self, tmp):
        """Removes an extra run's tmp_path and lets the next run have the
        same name: pytest 9 numbers them with a counter per name (older
        versions take the highest number on disk, plus one)."""
        shutil.rmtree(tmp, ignore_errors=True)
        counters = pytest_private.tmp_path_counters(self.item.config)
        if counters is None:
            return
        # The name is prefix + number, and a prefix may end in digits too
        # (test_1 + 1 is "test_11"): the split is the one whose prefix's
        # counter stands right after this number.  Were the name not given
        # back, every run would make a new one, and 3.12 interns path parts
        # for good: a block per run.
        name = tmp.name
        start = len(name)
        while start > 0 and name[start - 1].isdigit():
            start -= 1
        for split in range(len(name) - 1, start - 1, -1):
            key, number = name[:split].lower(), int(name[split:])
            if counters.get(key) == number + 1:
                counters[key] = number
                return

    def run_reported(self):
        """The test's own run, whose reports pytest will log; remembers
        what later runs must not grow.  When the run did not pass it is
        torn down for the next item, as pytest would.  The phases' time
        is `reported_seconds`."""
        began = perrun.wall()
        reports = self._protocol(interact=True, extra=False)
        self.reported_seconds = perrun.wall() - began
        self._standins = None           # the real ones stand now
        if self._examples is not None:
            self._examples.clear_cache()
        item = self.item
        self._sections = len(pytest_private.report_sections(item))
        self._properties = len(item.user_properties)
        if self._state is not None:
            self._state.refresh(item)
        # The instance of a method's class goes already, as after each run.
        attrs = item.__dict__
        for key in pytest_private.method_instance(item):
            attrs.pop(key, None)
        cpython.make_frames(self.run_again, self._put_back, self._tmp_path,
                            self._recycle, _ItemState.put_back,
                            _put_back_dict, _hold, _same,
                            pytest_private.unlogged.__wrapped__,
                            pytest_private.tmp_path_factory,
                            pytest_private.tmp_path_counters)
        self._drop_finished_finalizers()
        return reports

    def park_output(self, reports):
        """Takes what the reported run captured (its output, its logs) out
        of its reports and the item until restore_output(), so that the
        snapshot after the run does not read it as growth (parking.py)."""
        if self._spot is not None:
            self._spot.park(self.item, reports)

    def restore_output(self):
        if self._spot is not None:
            self._spot.restore()

    def ready_again(self):
        """Before an extra run: makes what each extra run is put back to the
        first time it is due.  True when it made it: the snapshot the run
        is measured from must then be read again (Series.rebase())."""
        if self._state is not None:
            return False
        self._state = _ItemState(self.item)
        return True

    def run_again(self):
        """One more run, not logged.  None when every phase passed, else
        the report of the first phase that did not."""
        if self._globs is not None:
            self.item.dtest.globs.clear()
            self.item.dtest.globs.update(self._globs)
        if self._examples is not None:
            self._examples.fix()
        # Made and gone within the run: no growth of it.
        harness = [(kept, len(kept)) for kept in self._harness]
        try:
            with warnings.catch_warnings(record=True), \
                    pytest_private.unlogged(self.item.config):
                reports = self._protocol(interact=False, extra=True)
        finally:
            if self._examples is not None:
                self._examples.restore()
            self._put_back(harness)
        for rep in reports:
            if not rep.passed:
                return rep
        return None

    def _put_back(self, harness):
        item = self.item
        del pytest_private.report_sections(item)[self._sections:]
        del item.user_properties[self._properties:]
        for kept, length in harness:
            del kept[length:]
        self._state.put_back(item)
        self._drop_finished_finalizers()

    def _drop_finished_finalizers(self):
        """Drops the finalizers function-scoped fixtures of this item left
        on the shared fixtures, once those are finished."""
        finished = pytest_private.finished_finalizer
        for fd in self._shared.values():
            fins = pytest_private.finalizers(fd)
            for i in range(len(fins) - 1, -1, -1):   # in place: no new list
                if finished(fins[i], self.item):
                    del fins[i]

    def tear_down_quietly(self):
        """Tears down for the next item without a run when that takes no
        run: every node it pops (the module, the class the item was the
        last of) holds nothing to finish but its own no-op teardown (no
        fixture of that scope, no xunit teardown), so no hook, fixture or
        output takes part.  True when done (or nothing was left to do)."""
        if self.torn_down:
            return True
        nextitem = self._next_for_teardown()
        stack = pytest_private.setup_stack(self.item.session)
        if nextitem is None or stack is None:
            return False
        for node in _popped(stack, nextitem):
            fins = pytest_private.stack_finalizers(stack, node)
            if fins is None or len(fins) > 1:
                return False
            if fins and not (getattr(fins[0], "__self__", None) is node and
                             getattr(fins[0], "__func__", None)
                             is _NODE_TEARDOWN):
                return False
        try:
            pytest_private.teardown_exact(self.item.session, nextitem)
        except Exception:       # pragma: no cover (a no-op raised)
            return False
        self.torn_down = True
        return True

    def tears_down_alone(self):
        """Whether finish() runs the teardown phase alone, rather than one
        more whole run: every implementation of pytest_runtest_teardown for
        the item is pytest's own or this plugin's, whose pairing with the
        setup before is known (pytest's log capture deletes what its setup
        added to the item's stash: made anew here), or a harmless one of
        another plugin (neighbours.HARMLESS_HOOKS).  The item itself was
        torn down by its last run; what is left on pytest's setup stack is
        the module's and wider nodes' finalizers, which need no run of the
        test.  A teardown hook of a conftest or another plugin may expect
        what its own setup hook made: then the whole run it expects."""
        return not self.torn_down and \
            _pytest_own(self.item.config,
                        self.item.ihook.pytest_runtest_teardown) and \
            pytest_private.logging_teardown_known(self.item.config)

    def _time_finalizers(self, nextitem):
        """The finalizers of the nodes that tearing down for `nextitem` pops
        off pytest's setup stack (the wider fixtures' teardown), each made
        to count its seconds in the _Spent returned."""
        spent = _Spent()
        stack = pytest_private.setup_stack(self.item.session)
        if stack is None:
            return spent
        for node in _popped(stack, nextitem):
            fins = pytest_private.stack_finalizers(stack, node)
            for i, fin in enumerate(fins or ()):
                fins[i] = _TimedFinalizer(fin, spent)
        return spent

    def _tear_down_alone(self, reports):
        item = self.item
        # What pytest's log capture made in the setup and deletes in the
        # teardown.
        pytest_private.expect_logging_teardown(item)
        # The item's funcargs are a dict in a run's teardown phase (hooks
        # read them: pytest-benchmark's makereport).
        none = getattr(item, "funcargs", {}) is None
        if none:
            item.funcargs = {}
        nextitem = self._next_for_teardown()
        spent = self._time_finalizers(nextitem)
        try:
            final = call_and_report(item, self.ihook, "teardown",
                                    interact=True, nextitem=nextitem)
        finally:
            if none:
                item.funcargs = None
            self.pytests_seconds += spent.seconds
        self.torn_down = True
        return _replace_teardown(reports, final), None

    def finish(self, reports, alone):
        """Tears down what the next item does not need (module or session
        fixtures at the end of their scope), when the reported run left it
        up, and returns (reports to log, the report of a phase of the final
        run that did not pass, or None).

        With `alone` (what tears_down_alone() said), that is the teardown
        phase alone, through the hook.  Else pytest's hooks and items may
        pair a teardown with the setup and call before it (the logging
        plugin keeps state from setup to teardown, a unittest item creates
        its TestCase in the call and drops it in the teardown), so this is
        one more whole run, unreported but for its teardown.  Either way,
        the new teardown report replaces the reported run's when that one
        passed."""
        if self.torn_down:
            return reports, None
        if alone:
            return self._tear_down_alone(reports)
        item = self.item
        if self._globs is not None:
            item.dtest.globs.clear()
            item.dtest.globs.update(self._globs)
        sections = len(pytest_private.report_sections(item))
        harness = [(kept, len(kept)) for kept in self._harness]
        hasrequest = pytest_private.has_request(item)
        if hasrequest:
            pytest_private.make_request(item)
        failure = None
        if self._examples is not None:
            self._examples.fix()
        try:
            try:
                with warnings.catch_warnings(record=True), \
                        pytest_private.unlogged(item.config):
                    first = [call_and_report(item, self.ihook, "setup")]
                    if first[0].passed:
                        first.append(call_and_report(item, self.ihook,
                                                     "call"))
            finally:
                # Before the teardown, once, whatever the phases raised.
                if self._examples is not None:
                    self._examples.restore()
            del pytest_private.report_sections(item)[sections:]
            for kept, length in harness:
                del kept[length:]
            failure = next((r for r in first if not r.passed), None)
            final = call_and_report(item, self.ihook, "teardown",
                                    interact=True,
                                    nextitem=self._next_for_teardown())
            self.torn_down = True
        finally:
            if hasrequest:
                pytest_private.drop_request(item)
        return _replace_teardown(reports, final), failure
