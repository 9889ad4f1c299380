"""Every use the plugin makes of pytest's and pluggy's internals: private
attributes, internal modules and the shape of internal structures.  No
other module of the plugin touches one.  Each function says what it
reads or changes; those that look a structure up return None (or False)
when it is not of the shape known, so that the caller falls back to its
general path, and those that change one are called only where a look-up
found it.

Known shapes, as read in the sources of:

- pytest 8.4 (what `pip install pytest` gives on CPython 3.9: pytest 9.x
  requires Python >= 3.10) and pytest 9.0 to 9.2 (CPython 3.10 to 3.15;
  9.2.0 is the one these were checked against);
- pluggy 1.6 (on 3.9) and 1.7 (a hook caller keeps its implementations
  in one list, `_hookimpls`, since pluggy 1.1).

What each relies on:

- `Session._setupstate.stack`: {node: ([finalizers], exception or None)},
  pushed by SetupState.setup(), popped by teardown_exact() (pytest 7+).
- `Package.setup()`: imports the package's `__init__.py` and calls the
  xunit module functions it defines (set_up_inert_package).
- `Item._request` / `_initrequest()` / `_report_sections` /
  `_fixtureinfo.name2fixturedefs`: a Function's request, its output
  sections, its fixture closure.
- `FixtureDef._finalizers`: a list; the finalizer a function-scoped
  fixture leaves on a shared one is functools.partial(its finish,
  request=...).
- `Item.__dict__["_obj"]`, `["_instance"]`: the test function and the
  instance of its class; a unittest `TestCaseFunction` also sets
  `_explicit_tearDown` (and up to 3.10 `_cached_errors_and_skips`).
- `NodeKeywords._markers`, `Stash._storage`: dicts.
- `_pytest.logging`: the "logging-plugin" plugin, its `_runtest_for()`,
  its `caplog_handler`/`report_handler` (reset(), stream), the stash keys
  `caplog_records_key` and `caplog_handler_key`.
- `_pytest.junitxml.xml_key`: the LogXML whose `global_properties` list
  record_testsuite_property() appends to.
- `Config._tmp_path_factory` and its `_next_number` counters (pytest 9
  numbers tmp_path directories per name; before, from the disk), and the
  tmp_path fixture's name for a test (_pytest/tmpdir.py).
- `CallInfo(..., _ispytest=True)`: a call made without running one;
  `TestReport.from_item_and_call()` and `_pytest.tmpdir.tmppath_result_key`:
  what pytest's own pytest_runtest_makereport implementations make of it;
  pytest's tmp_path fixture (`_pytest.tmpdir.tmp_path`) deletes that
  stash entry in its teardown (pytest 7.3+).
- `_pytest.skipping.xfailed_key`: the stash entry in which every setup
  phase keeps the item's evaluated xfail marks, read with .get(key, None).
- `TerminalReporter._tw` and `TerminalWriter._file`.
- pluggy's `HookCaller._hookexec(name, impls, kwargs, firstresult)` and
  `HookImpl(plugin, plugin_name, function, opts)`: a hook called with a
  list of implementations of the caller's, one of them made here
  (wrap_standins).
- The node classes of `_pytest.nodes`, `_pytest.main` and `_pytest.python`
  (`Directory` and `Dir` from pytest 8.1), ABCs since pytest 8: what
  check_node_types() checks a new type of node against.
"""

import abc
import contextlib
import functools
import os
import re
import sys
import time

import _pytest
import pytest

# The folder of pytest's own modules, and the module-name prefix of its own
# plugins (as a hook implementation's plugin names it).
PYTEST_DIR = os.path.dirname(_pytest.__file__)
PYTEST_PACKAGE = "_pytest."
RUNNER_PLUGIN = "_pytest.runner"    # the plugin that sets fixtures up

LOGGING_PLUGIN = "logging-plugin"
CAPTURE_PLUGIN = "capturemanager"

# What pytest's log capture keeps in an item's stash from a phase's setup
# to its teardown (records by phase, the caplog handler), when known.
try:
    from _pytest.logging import caplog_handler_key, caplog_records_key
    CAPLOG_KEYS = (caplog_records_key, caplog_handler_key)
except ImportError:                     # pragma: no cover
    CAPLOG_KEYS = None


# ---- hooks -------------------------------------------------------------

@contextlib.contextmanager
def unlogged(config):
    """Drops the reports logged while the block runs: the implementations
    of pytest_runtest_logreport are set aside (pluggy keeps them in one
    list per hook, which the per-folder hook proxies of conftest files read
    too).  Nothing is dropped on a pluggy that keeps them otherwise."""
    caller = getattr(config.hook, "pytest_runtest_logreport", None)
    impls = getattr(caller, "_hookimpls", None)
    if not isinstance(impls, list):
        yield
        return
    caller._hookimpls = []
    try:
        yield
    finally:
        caller._hookimpls = impls


def passed_call(when):
    """The CallInfo of phase `when` of a run that passed, made without
    running anything."""
    return pytest.CallInfo(result=None, excinfo=None, start=time.time(),
                           stop=time.time(), duration=float(0), when=when,
                           _ispytest=True)


# pytest's plugins whose pytest_runtest_makereport a report of a passing
# run can be made without (standin_reports): the runner's makes it, the
# others change it only for a failure, a skip, an xfail or a unittest
# error, and tmpdir's keeps each phase's outcome in the item's stash
# (`tmppath_result_key`).
_REPORT_PLUGINS = frozenset({"_pytest.runner", "_pytest.unittest",
                             "_pytest.skipping", "_pytest.tmpdir"})
_PHASES = ("setup", "call", "teardown")


def standins_known(impls, own):
    """How standin_reports() makes the reports the
    pytest_runtest_makereport hook whose implementations are `impls`
    would: True when they are pytest's own of _REPORT_PLUGINS and the
    module `own`'s (the caller's, whose own does nothing with the report
    of a checked test); when the others are all wrappers (old style or
    new) of another plugin or conftest, what wrap_standins() calls them
    with: they wrap the reports standin_reports() made as they would wrap
    pytest's, and keep of them what they would (pytest-rerunfailures
    keeps each phase's outcome on the item, pytest-benchmark reads its
    fixture); else None: the hook is called."""
    others = [impl for impl in impls
              if getattr(impl.plugin, "__name__", None)
              not in _REPORT_PLUGINS
              and getattr(impl.plugin, "__name__", None) != own]
    if not others:
        return True
    runner = next((impl for impl in impls
                   if getattr(impl.plugin, "__name__", None)
                   == RUNNER_PLUGIN), None)
    if runner is None or getattr(runner, "wrapper", False) or \
            getattr(runner, "hookwrapper", False) or \
            not all(getattr(impl, "wrapper", False)
                    or getattr(impl, "hookwrapper", False)
                    for impl in others):
        return None
    made = []               # the report the stand-in implementation returns

    def standin(item, call):
        return made[0]
    try:
        # A pluggy HookImpl of no plugin, with the options of pytest's own.
        impl = type(runner)(None, "leakcheck-standin", standin,
                            dict(runner.opts))
    except Exception:
        return None
    return [impl, *others], made


def wrap_standins(hook, wrapping, item, reports):
    """The reports standin_reports() made, each passed through the wrappers
    of `wrapping` (what standins_known() returned: a list of hook
    implementations, the report's and the wrappers, and where the report
    goes) as the hook `hook` (an item's pytest_runtest_makereport) would
    pass pytest's: pluggy's call of a hook with a list of implementations
    of the caller's (pluggy 1.x: HookCaller._hookexec(name, impls,
    kwargs, firstresult)).  None when the caller has none."""
    execute = getattr(hook, "_hookexec", None)
    if not callable(execute):
        return None
    impls, made = wrapping
    wrapped = []
    try:
        for report in reports:
            made[:] = [report]
            wrapped.append(execute(hook.name, impls,
                                   {"item": item,
                                    "call": passed_call(report.when)},
                                   True))
    finally:
        made.clear()
    return wrapped


def standin_reports(item):
    """The reports of a passing run (setup, call, teardown) made as the
    pytest_runtest_makereport hook would make them, without calling it (a
    fifth of the cost), when standins_known() says so of its
    implementations (then wrap_standins() passes them through the
    wrappers of other plugins); None when pytest's tmp_path plugin is not
    of the shape known."""
    key = getattr(sys.modules.get("_pytest.tmpdir"), "tmppath_result_key",
                  None)
    if key is None:
        return None
    first = pytest.TestReport.from_item_and_call(item, passed_call("setup"))
    reports = [first]
    if report_sections(item):
        reports += [pytest.TestReport.from_item_and_call(item,
                                                         passed_call(when))
                    for when in _PHASES[1:]]
    else:
        # The other two as from_item_and_call() makes them, without walking
        # the item's keywords (its whole chain of nodes) twice more: each
        # gets a dict of them built by insertion, as pytest builds its own
        # (one from a dict would be sized otherwise), and floats and lists
        # of its own.  The node id is the item's own object, as there:
        # pytest 9 keeps it structured (`_id`), and would parse its text.
        names = list(first.keywords)
        nodeid = getattr(first, "_id", None) or first.nodeid
        for when in _PHASES[1:]:
            start = time.time()
            reports.append(pytest.TestReport(
                nodeid, first.location, dict.fromkeys(names, 1),
                "passed", None, when, [], float(0), start, time.time(),
                user_properties=item.user_properties))
    for report in reports:
        item.stash.setdefault(key, {})[report.when] = report.passed
    return reports


def preset_tmp_path_result(item):
    """Makes the item's stash entry in which pytest's tmp_path plugin keeps
    each phase's outcome (`tmppath_result_key`, filled by the stand-in
    reports with all three) hold what a passing run leaves in it, when the
    item uses pytest's own tmp_path fixture: its teardown deletes the
    entry, and the teardown phase's report then makes it anew, with that
    phase's outcome alone.  Left with three, the entry would hold two keys
    and two values (four references) more before the run than after:
    less, hiding as much growth.  Nothing changes when the item does not
    use that fixture (one of the same name that does not request it)."""
    key = getattr(sys.modules.get("_pytest.tmpdir"), "tmppath_result_key",
                  None)
    storage = stash_storage(item)
    if key is None or storage is None or \
            not _uses_pytests_tmp_path(fixture_defs(item)):
        return
    results = storage.get(key)
    if type(results) is not dict or "teardown" not in results:
        return
    for when in [when for when in results if when != "teardown"]:
        del results[when]


def _uses_pytests_tmp_path(defs):
    """Whether the item's tmp_path (`defs`: fixture_defs()) is pytest's
    own, or one of the same name that requests it (a fixture overriding
    another sees the one it overrides under its own name)."""
    for fixturedef in reversed(defs.get("tmp_path") or ()):
        func = getattr(fixturedef, "func", None)
        func = getattr(func, "__wrapped__", func)
        if getattr(func, "__module__", None) == "_pytest.tmpdir" and \
                getattr(func, "__name__", None) == "tmp_path":
            return True
        if "tmp_path" not in getattr(fixturedef, "argnames", ()):
            return False
    return False


# ---- the item ----------------------------------------------------------

def report_sections(item):
    """The item's list of captured output sections (phase, key, text)."""
    return item._report_sections


REPORT_SECTIONS = "_report_sections"    # its attribute


def has_request(item):
    """Whether the item is of a kind that has a fixture request."""
    return hasattr(item, "_request")


def make_request(item):
    """Gives the item a fresh fixture request, unless it has one."""
    if not item._request:
        new_request(item)


def new_request(item):
    """Gives the item a fresh fixture request."""
    item._initrequest()


def drop_request(item):
    """Leaves the item without its request and fixture values, as pytest's
    runner leaves it after a run."""
    item._request = False
    item.funcargs = None


def holds_request(item):
    """Whether the item holds a request now (pytest makes one when it
    collects the item)."""
    return bool(getattr(item, "_request", None))


def can_make_request(item):
    return hasattr(item, "_initrequest")


def getfixturevalue(item, name):
    """The value of fixture `name` through the item's request."""
    return item._request.getfixturevalue(name)


def fixture_defs(item):
    """{fixture name: [FixtureDef, ...]} of the item's closure, or {}."""
    return getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs",
                   None) or {}


def test_function(item):
    """What the item holds as its test's function, or None."""
    return item.__dict__.get("_obj")


def method_instance(item):
    """The attributes through which a test method's item holds an instance
    of its class (each run gets a fresh one), or () for other items."""
    if type(item) is pytest.Function and isinstance(item.parent, pytest.Class):
        return ("_instance", "_obj")
    return ()


def drop_instance(item):
    """Leaves `item` without the instance of its class it holds, as its
    runs leave it: a unittest item with `_obj` None (its teardown's
    doing), a method of a test class with neither `_obj` nor `_instance`
    (the runner's item state's)."""
    unittest = sys.modules.get("_pytest.unittest")
    case_function = getattr(unittest, "TestCaseFunction", None)
    attrs = item.__dict__
    if case_function is not None and isinstance(item, case_function):
        if attrs.get("_obj") is not None:
            item._obj = None
        attrs.pop("_instance", None)
        # What its setup() sets on every run, there from the first.
        attrs.setdefault("_explicit_tearDown", None)
        if sys.version_info < (3, 11):
            attrs.setdefault("_cached_errors_and_skips", None)
    else:
        for key in method_instance(item):
            attrs.pop(key, None)


_CHECKED_NODE_TYPES = pytest.StashKey[set]()


def _node_classes(chain):
    """pytest's node classes, and those of `chain`'s nodes (a plugin's):
    what pytest asks isinstance() of a node against."""
    from _pytest import main, nodes, python
    classes = {nodes.Node, nodes.Collector, nodes.Item, nodes.FSCollector,
               nodes.File, getattr(nodes, "Directory", nodes.Node),
               main.Session, getattr(main, "Dir", main.Session),
               python.Package, python.Module, python.Class, python.Function}
    for node in chain:
        classes.update(cls for cls in type(node).__mro__
                       if isinstance(cls, abc.ABCMeta))
    return classes


def check_node_types(item, chain):
    """pytest's node classes are ABCs (pytest 8 on): the first isinstance()
    of a node of a new type against one of them (a test class's node
    against Session, as getparent() asks) stores the type in that class's
    cache.  A series leaves the ABC caches as they are at its snapshots,
    so that first check is made here, before the snapshot that precedes
    the reported run, for every node of the item's chain against every
    node class, once per node type of the session.  `chain`:
    item.listchain()."""
    seen = item.session.stash.setdefault(_CHECKED_NODE_TYPES, set())
    if all(type(node) in seen for node in chain):
        return
    classes = _node_classes(chain)
    for node in chain:
        for cls in classes:
            isinstance(node, cls)
        seen.add(type(node))


def keyword_markers(item):
    """The dict behind the item's own keywords, or None."""
    markers = getattr(getattr(item, "keywords", None), "_markers", None)
    return markers if isinstance(markers, dict) else None


def stash_storage(item):
    """The dict behind the item's stash, or None."""
    storage = getattr(getattr(item, "stash", None), "_storage", None)
    return storage if isinstance(storage, dict) else None


def preset_xfail_marks(item):
    """Adds the item's stash entry in which pytest's skipping plugin keeps
    its evaluation of the xfail marks (`xfailed_key`), when the plugin is
    on and the entry is missing, with None: the value its readers take for
    a missing entry (each reads it with .get(key, None), and evaluates the
    marks when it finds None).  Every setup phase sets it; the first would
    add it to the stash (and so to the runner's copy of the stash).
    Nothing is evaluated here: the setup phase replaces the value."""
    skipping = sys.modules.get("_pytest.skipping")
    key = getattr(skipping, "xfailed_key", None)
    storage = stash_storage(item)
    # Registered under its short name, as pytest registers its own
    # plugins (is_registered() looks at every plugin).
    if key is None or storage is None or key in storage or \
            item.config.pluginmanager.get_plugin("skipping") is not skipping:
        return
    storage[key] = None


def suite_properties(config):
    """junitxml's list of record_testsuite_property() calls, which a test
    adds to on every run (None without --junitxml)."""
    try:
        from _pytest.junitxml import xml_key
    except ImportError:         # pragma: no cover
        return None
    props = getattr(config.stash.get(xml_key, None), "global_properties",
                    None)
    return props if isinstance(props, list) else None


# ---- fixtures' finalizers --------------------------------------------------

def finalizers(fixturedef):
    """The list of finalizers of a fixture definition, or None."""
    fins = getattr(fixturedef, "_finalizers", None)
    return fins if isinstance(fins, list) else None


def finished_finalizer(fin, item):
    """Whether `fin` is the finalizer a function-scoped fixture of `item`
    left on a shared fixture, and that fixture is finished."""
    if not isinstance(fin, functools.partial):
        return False
    owner = getattr(fin.func, "__self__", None)
    request = fin.keywords.get("request") if fin.keywords else None
    return (getattr(fin.func, "__name__", None) == "finish"
            and owner is not None
            and getattr(owner, "cached_result", True) is None
            and getattr(request, "node", None) is item)


# ---- the setup stack -------------------------------------------------------

def setup_stack(session):
    """pytest's setup stack, {node: ([finalizers], exception or None)}, or
    None when it is not of that shape."""
    stack = getattr(getattr(session, "_setupstate", None), "stack", None)
    return stack if isinstance(stack, dict) else None


def stack_settled(stack):
    """Whether every node on the stack was set up without an exception."""
    return not any(not isinstance(entry, tuple) or len(entry) != 2
                   or entry[1] for entry in stack.values())


def push(stack, node, fins):
    """Puts `node` on the stack with finalizers `fins`, as
    SetupState.setup() does once the node's setup ran."""
    stack[node] = (fins, None)


# pytest's Package.setup(): imports the package's __init__.py (through
# importtestmodule(), which finds it in sys.modules once imported) and
# calls the module functions below that it defines, the teardown ones as
# a finalizer.
_PACKAGE_SETUP = getattr(getattr(pytest, "Package", None), "setup", None)
_PACKAGE_XUNIT = ("setUpModule", "setup_module", "tearDownModule",
                  "teardown_module")


def set_up_inert_package(node):
    """Runs the setup of `node` when it is a package whose setup only
    finds its __init__ module, imported already (importing a test module
    of the package imported it), and calls nothing: the module defines
    none of the xunit module functions.  Whether it ran, without error."""
    if _PACKAGE_SETUP is None or \
            getattr(type(node), "setup", None) is not _PACKAGE_SETUP:
        return False
    try:
        init = os.path.join(os.fspath(node.path), "__init__.py")
    except (AttributeError, TypeError):
        return False
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)
        if isinstance(names, dict) and names.get("__file__") == init:
            break
    else:
        return False
    if any(name in names for name in _PACKAGE_XUNIT):
        return False
    try:
        node.setup()
    except (Exception, pytest.skip.Exception, pytest.fail.Exception):
        return False        # pytest's own setup raises it again
    return True


def stack_finalizers(stack, node):
    """The list of finalizers of `node` on the stack, or None."""
    entry = stack[node]
    fins = entry[0] if isinstance(entry, tuple) and entry else None
    return fins if isinstance(fins, list) else None


def teardown_exact(session, nextitem):
    """Pops what `nextitem` does not need off the setup stack, running its
    finalizers."""
    session._setupstate.teardown_exact(nextitem)


# ---- the output and log capture ---------------------------------------------

def log_capture(config):
    """pytest's logging plugin, when it is registered and of the shape
    known (else None, also when it is not registered)."""
    logs = config.pluginmanager.get_plugin(LOGGING_PLUGIN)
    if logs is None or CAPLOG_KEYS is None or \
            not callable(getattr(logs, "_runtest_for", None)):
        return None
    return logs


def log_capture_unknown(config):
    """Whether pytest's logging plugin is registered but not of the shape
    known."""
    return config.pluginmanager.get_plugin(LOGGING_PLUGIN) is not None and \
        log_capture(config) is None


def logging_phase(logs, item, when):
    """The context of phase `when` of the logging plugin (log_capture())
    for `item`, with the records of the phase in the item's stash."""
    item.stash[CAPLOG_KEYS[0]] = {}
    return logs._runtest_for(item, when)


def drop_logging_phase(item):
    """Deletes what logging_phase() left in the item's stash."""
    for key in CAPLOG_KEYS:
        if key in item.stash:
            del item.stash[key]


def logging_teardown_known(config):
    """Whether what pytest's log capture pairs between a setup and a
    teardown phase is known (or it is not registered)."""
    return CAPLOG_KEYS is not None or \
        config.pluginmanager.get_plugin(LOGGING_PLUGIN) is None


def expect_logging_teardown(item):
    """Puts in the item's stash what pytest's log capture made in the
    setup phase and deletes in the teardown phase."""
    if CAPLOG_KEYS is not None:
        item.stash.setdefault(CAPLOG_KEYS[0], {})


def output_capture(config):
    """pytest's capture manager, or None (also when it is not of the shape
    known: output_capture_unknown())."""
    capture = config.pluginmanager.get_plugin(CAPTURE_PLUGIN)
    if capture is None or not callable(getattr(capture, "item_capture",
                                               None)):
        return None
    return capture


def output_capture_unknown(config):
    capture = config.pluginmanager.get_plugin(CAPTURE_PLUGIN)
    return capture is not None and output_capture(config) is None


def capture_phase(capture, item, when):
    """The capture manager's context for phase `when` of `item`."""
    return capture.item_capture(when, item)


def fresh_log_buffers(config):
    """pytest's log capture (pytest 9: two handlers for the session)
    gives its handlers a new buffer and record list in every phase of every
    run, and reads the report handler's buffer at the end of each.  Those
    the GC freezer just froze would die uncounted in the next run while
    their replacements count, as growth; those a phase before the reported
    run filled (the shared fixtures' setup) would die in it, as less: given
    fresh ones, in the state a phase leaves them."""
    plugin = (config.pluginmanager.get_plugin(LOGGING_PLUGIN)
              if config is not None else None)
    for name in ("caplog_handler", "report_handler"):
        handler = getattr(plugin, name, None)
        reset = getattr(handler, "reset", None)
        if callable(reset):
            try:
                reset()
                if name == "report_handler":
                    handler.stream.getvalue()
            except Exception:
                pass


# ---- tmp_path --------------------------------------------------------------

def tmp_path_factory(config):
    """The session's TempPathFactory, or None."""
    return getattr(config, "_tmp_path_factory", None)


def tmp_path_counters(config):
    """pytest 9's counters of tmp_path directories, {name prefix: next
    number}, or None (before 9: numbered from the directories on disk)."""
    counters = getattr(tmp_path_factory(config), "_next_number", None)
    return counters if isinstance(counters, dict) else None


def tmp_path_name(item):
    """The name prefix pytest's tmp_path fixture gives the item's
    directories (_pytest/tmpdir.py), as its counter keys it."""
    return re.sub(r"[\W]", "_", item.name)[:30].lower()


# ---- the terminal ----------------------------------------------------------

def terminal_file(reporter):
    """(TerminalWriter of the terminal reporter, the file it writes to), or
    (None, None)."""
    writer = getattr(reporter, "_tw", None)
    if writer is None or not hasattr(writer, "_file"):
        return None, None
    return writer, writer._file
