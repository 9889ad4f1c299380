"""The plugin's settings: command-line options, ini keys and the noleak
marker, their help texts, their defaults, and the checks that reject a bad
value with a message naming where it came from.

Precedence, highest first: the marker's arguments, the command line, the
ini file, the defaults.  Expected messages are module constants so that the
tests format them instead of copying them.
"""

import dataclasses
import os
import typing

import pytest

import leakcheck
from leakcheck import MAX_RUNS, MAX_TOLERANCE  # the API's ranges

DEFAULT_WARMUP = 1
DEFAULT_REPEAT = 4

MARKER = "noleak"
MARKER_ARGS = ("repeat", "warmup", "probes", "tolerance")
MARKER_LINE = (
    f"{MARKER}(repeat={DEFAULT_REPEAT}, warmup={DEFAULT_WARMUP}, "
    "probes=None, tolerance=None): repeat the test and fail it when a probe "
    "keeps growing (a leak). repeat: runs a probe must grow in (a leak "
    "that skips runs takes more, growth that dies out runs on); "
    "warmup: unmeasured runs first, counting the reported run; probes: "
    "names (a list or a comma-separated string) instead of the default "
    "set; tolerance: growth per run that is not a leak, an int for every "
    "probe or a {probe: int} dict.")

OPT_OUT = "leaky"
OPT_OUT_LINE = (
    f"{OPT_OUT}(reason=None): the test leaks on purpose (it exercises a "
    "leak detector, fills a cache for good, ...): neither --leaks nor "
    "noleak hunts in it; the report lists it as skipped, with the reason.")


NOT_REPEATABLE = "not_repeatable"
NOT_REPEATABLE_LINE = (
    f"{NOT_REPEATABLE}(reason=None): the test cannot run twice in one "
    "process (it patches a module for good, consumes a one-time "
    "resource, ...): neither --leaks nor noleak repeats it; it runs once, "
    "and the report lists it as skipped (not judged), with the reason.")

# marker -> the words the report's reason starts with
OPT_OUTS = {OPT_OUT: "marked leaky", NOT_REPEATABLE: "marked not repeatable"}
_OWN_MARKERS = frozenset((MARKER, *OPT_OUTS))


def closest_markers(item):
    """{name: the closest marker of that name} of the plugin's own markers
    on `item` (noleak, leaky, not_repeatable), from one walk of its
    markers: get_closest_marker() walks them all for each name, and a test
    marked with none is the common case."""
    found = {}
    for marker in item.iter_markers():
        name = marker.name
        if name in _OWN_MARKERS and name not in found:
            found[name] = marker
    return found


def opt_out_reason(item, markers=None):
    """Why `item` is not to be hunted (its leaky or not_repeatable marker),
    or None; `markers`: closest_markers(item), when read already."""
    if markers is None:
        markers = closest_markers(item)
    for name, words in OPT_OUTS.items():
        marker = markers.get(name)
        if marker is not None:
            reason = marker.kwargs.get("reason", marker.args[0]
                                       if marker.args else None)
            return words + (f": {reason}" if reason else "")
    return None


HELP_LEAKS = ("hunt for leaks in every test: run each test again and fail it "
              "when a probe keeps growing from run to run")
HELP_NO_LEAKS = ("hunt in no test this run, not even in those marked noleak "
                 "(overrides --leaks and the ini option leaks)")
HELP_REPEAT = (f"runs a probe must grow in to leak (default "
               f"{DEFAULT_REPEAT}); a test that stops growing stops early")
HELP_WARMUP = ("unmeasured runs before measuring, counting the test's own "
               f"reported run (default {DEFAULT_WARMUP})")
HELP_THOROUGH = ("nightly hunts: measure a test that grew nothing in its "
                 "reported run too (two more runs per clean test), so that "
                 "a leak that skips that run is caught, catch leaks that "
                 "grow only every third run, and let every suspected leak "
                 "run on (up to 512 runs) until a cache that fills stops")
HELP_PROBES = ("comma-separated probes to judge, or 'all' (default: the "
               "package's default set; see leakcheck.probes())")
HELP_REPORT = ("write a JSON report (schema leakcheck-report/1) of every "
               "checked test to PATH; one merged file under pytest-xdist")
HELP_DUMP = ("write, for each leaking test, a file of the objects its runs "
             "left behind (type, size, safe repr, what holds them; schema "
             "leakcheck-dump/1) into DIR; 'python -m leakcheck show FILE' "
             "summarises one")
HELP_BASELINE = ("known leaks (a file 'python -m leakcheck gate "
                 "--write-baseline' wrote): they are reported but do not "
                 "fail their tests")
DIAGNOSE_MODES = ("full", "cheap", "off")
DIAGNOSE_BUDGET = 10        # a diagnosis's time, in runs of the test
DIAGNOSE_FLOOR = 2.0        # seconds a diagnosis may always take
HELP_DIAGNOSE = ("how a leaking test is diagnosed: 'full' (default) re-runs "
                 "it under tracemalloc, within "
                 f"{DIAGNOSE_BUDGET} times its own run time (at least "
                 f"{DIAGNOSE_FLOOR:g} s); 'cheap' re-runs it once, one frame "
                 "deep (under memray only when the C heap alone grew), "
                 "within the same budget; 'off' does not re-run it")

# (option, ini key, help, metavar or None for a flag, the value's kind)
OPTIONS = (
    ("--leaks", "leaks", HELP_LEAKS, None, "bool"),
    ("--leaks-repeat", "leaks_repeat", HELP_REPEAT, "N", "int"),
    ("--leaks-warmup", "leaks_warmup", HELP_WARMUP, "N", "int"),
    ("--leaks-probes", "leaks_probes", HELP_PROBES, "NAMES", "names"),
    ("--leaks-thorough", "leaks_thorough", HELP_THOROUGH, None, "bool"),
    ("--leaks-report", "leaks_report", HELP_REPORT, "PATH", "string"),
    ("--leaks-baseline", "leaks_baseline", HELP_BASELINE, "PATH", "string"),
    ("--leaks-diagnose", "leaks_diagnose", HELP_DIAGNOSE, "MODE", "string"),
    ("--leaks-dump", "leaks_dump", HELP_DUMP, "DIR", "string"),
)
NO_LEAKS = "--no-leaks"


def installed_pytest():
    """(major, minor) of the pytest that runs."""
    version = getattr(pytest, "version_tuple", None)
    if version is None:
        version = tuple(int(p) for p in pytest.__version__.split(".")[:2]
                        if p.isdigit())
    return tuple(version[:2])


def ini_types(version=None):
    """{kind: the addini type} for this pytest.  Every kind must take the
    native values of pytest 9's [tool.pytest] table (true, 6, ["fds"]) as
    well as the strings of an ini file and of -o.  A value of the wrong
    type should still reach our checks, whose messages name where it came
    from: from pytest 9.2 a union with str lets it through; pytest 9.0 and
    9.1 have the int type but no unions (their own message, then, which
    from_config prefixes with where); before 9.0 there is no native TOML,
    every value is a string, and a string type keeps our messages (pytest
    8's bool type would refuse "maybe" with its own words)."""
    version = version or installed_pytest()
    names = "args"              # a list in TOML; shell-split in an ini file
    if version >= (9, 2):
        return {"bool": typing.Union[bool, str], "int": typing.Union[int, str],
                "names": names, "string": "string"}
    if version >= (9, 0):
        return {"bool": "bool", "int": "int", "names": names,
                "string": "string"}
    return {"bool": "string", "int": "string", "names": names,
            "string": "string"}


# Messages.  A bad value is "leakcheck: <where>: <problem>".
MSG_BAD_VALUE = "leakcheck: {where}: {problem}"
WHERE_CLI = "command line option {option}"
WHERE_INI = "ini option {key} in {inifile}"
WHERE_OVERRIDE = "command line option -o {key}"
WHERE_MARKER = "@pytest.mark.noleak on {nodeid}"
PROBLEM_INT = "{name} must be an integer >= {minimum}, not {value!r}"
PROBLEM_INT_MAX = "{name} must be an integer <= {maximum}, not {value!r}"
PROBLEM_BOOL = "must be true or false, not {value!r}"
PROBLEM_PROBE = "unknown probe {value!r}; valid probes: {valid}"
PROBLEM_PROBES_TYPE = ("probes must be probe names (a list or a "
                       "comma-separated string), not {value!r}")
PROBLEM_NO_PROBES = "probes must name at least one probe"
PROBLEM_UNAVAILABLE = ("probe {value!r} cannot be read here ({reason}); "
                       "leave it out, or use 'all' for every probe that can")
PROBLEM_EMPTY_PATH = "an empty path (an unset variable?)"
PROBLEM_TOLERANCE = ("tolerance must be an integer >= 0 or a "
                     "{{probe: integer >= 0}} dict, not {value!r}")
PROBLEM_TOLERANCE_MAX = ("tolerance must be at most {maximum} per probe, "
                         "not {value!r}")
PROBLEM_POSITIONAL = ("takes keyword arguments only ({valid}), not "
                      "positional {value!r}")
PROBLEM_KEYWORD = "unknown argument {value!r}; valid arguments: {valid}"
PROBLEM_BASELINE = "cannot use baseline {value}: {reason}"
PROBLEM_REPORT = "cannot write report {value}: {reason}"
PROBLEM_REPORT_IN_USE = "report {value}: {reason}"
PROBLEM_DIAGNOSE = "diagnose must be one of {valid}, not {value!r}"
PROBLEM_DUMP = "cannot write dumps into {value}: {reason}"


class BadValue(ValueError):
    """A setting with a bad value; str() is the full one-line message."""

    def __init__(self, where, problem):
        super().__init__(MSG_BAD_VALUE.format(where=where, problem=problem))


@dataclasses.dataclass(frozen=True)
class Settings:
    """What one test's series uses."""
    warmup: int
    repeat: int
    probes: tuple            # probe names
    tolerance: object        # None, int, or {probe: int}
    thorough: bool = False   # --leaks-thorough (a session setting)

    def to_dict(self):
        tol = self.tolerance
        return {"warmup": self.warmup, "repeat": self.repeat,
                "probes": list(self.probes),
                "tolerance": dict(tol) if isinstance(tol, dict) else tol,
                "thorough": self.thorough}


def _valid_probes():
    return ", ".join(leakcheck.PROBE_NAMES)


def parse_int(value, name, minimum, where, text=True, maximum=MAX_RUNS):
    """`value` as an int from minimum to maximum; BadValue naming `where`
    otherwise.  Strings (from the command line or an ini file) are parsed
    when `text` is true; a marker's argument must be an int."""
    if isinstance(value, bool) or (isinstance(value, str) and not text):
        raise BadValue(where, PROBLEM_INT.format(name=name, minimum=minimum,
                                                 value=value))
    if isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    elif isinstance(value, int):
        number = value
    else:
        number = None
    if number is None or number < minimum:
        raise BadValue(where, PROBLEM_INT.format(name=name, minimum=minimum,
                                                 value=value))
    if number > maximum:
        raise BadValue(where, PROBLEM_INT_MAX.format(name=name,
                                                     maximum=maximum,
                                                     value=value))
    return number


def parse_probes(value, where):
    """A tuple of probe names from a comma-separated string, 'all', or an
    iterable of names; BadValue naming `where` otherwise."""
    if isinstance(value, (list, tuple, set, frozenset)) and all(
            isinstance(n, str) for n in value):
        # An ini file's "blocks, objects" arrives shell-split.
        value = ",".join(value)
    if isinstance(value, str):
        names = [n.strip() for n in value.replace(" ", ",").split(",")
                 if n.strip()]
    else:
        raise BadValue(where, PROBLEM_PROBES_TYPE.format(value=value))
    if names == ["all"]:
        return tuple(leakcheck.PROBE_NAMES)
    if not names:
        raise BadValue(where, PROBLEM_NO_PROBES)
    for n in names:
        if n not in leakcheck.PROBE_NAMES:
            raise BadValue(where, PROBLEM_PROBE.format(value=n,
                                                       valid=_valid_probes()))
    return tuple(dict.fromkeys(names))


def parse_tolerance(value, where):
    """None, an int >= 0, or {probe: int >= 0}; BadValue otherwise."""
    if value is None:
        return None
    bad = BadValue(where, PROBLEM_TOLERANCE.format(value=value))
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise bad
            if k not in leakcheck.PROBE_NAMES:
                raise BadValue(where, PROBLEM_PROBE.format(
                    value=k, valid=_valid_probes()))
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise bad
            out[k] = _tolerance_at_most(v, where)
        return out
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise bad
    return _tolerance_at_most(value, where)


def _tolerance_at_most(value, where):
    if value > MAX_TOLERANCE:
        raise BadValue(where, PROBLEM_TOLERANCE_MAX.format(
            maximum=MAX_TOLERANCE, value=value))
    return value


@dataclasses.dataclass(frozen=True)
class SessionSettings:
    """The session-wide settings, from the command line and the ini file."""
    hunt_all: bool
    defaults: Settings
    report_path: object      # str or None
    baseline_path: object    # str or None
    dump_dir: object         # str or None
    sources: dict            # setting -> "command line" | "ini" | "default"
    wheres: dict             # setting -> where its value came from, for
                             # messages (only for those set)
    diagnose: str = "full"   # one of DIAGNOSE_MODES
    hunt_none: bool = False  # --no-leaks: not even marked tests


def ini_where(config, key):
    """Where an ini value came from: -o on the command line, or the file."""
    for item in config.getoption("override_ini", None) or ():
        if item.split("=", 1)[0].strip() == key:
            return WHERE_OVERRIDE.format(key=key)
    inifile = config.inipath if config.inipath else "the ini file"
    return WHERE_INI.format(key=key, inifile=inifile)


def _getini(config, key):
    """config.getini(key); BadValue naming where on a value pytest itself
    rejects (the wrong type in a TOML table)."""
    try:
        return config.getini(key)
    except (pytest.UsageError, ValueError, TypeError) as e:
        problem = str(e)
        prefix = f"{config.inipath}: "
        if config.inipath and problem.startswith(prefix):
            problem = problem[len(prefix):]
        raise BadValue(ini_where(config, key), problem) from None


def _raw(config, option, key, parse=None):
    """(value, where, source) of a setting: the command line wins over the
    ini file; (None, None, "default") when neither sets it.  With `parse`
    (value, where -> value), the value returned is parsed, and so is the
    ini file's value when the command line overrides it: a wrong value is
    refused wherever it is, not only where it wins."""
    dest = option.lstrip("-").replace("-", "_")
    value = config.getoption(dest, None)
    ini = _getini(config, key)
    found = []
    if value is not None:
        found.append((value, WHERE_CLI.format(option=option), "command line"))
    if ini not in (None, "", []):
        found.append((ini, ini_where(config, key), "ini"))
    if not found:
        return None, None, "default"
    if parse is not None:
        found = [(parse(v, w), w, s) for v, w, s in found]
    return found[0]


def parse_bool(value, where):
    """A bool from the ini file: a TOML bool, or pytest's words for one."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    if word in ("y", "yes", "t", "true", "on", "1"):
        return True
    if word in ("n", "no", "f", "false", "off", "0"):
        return False
    raise BadValue(where, PROBLEM_BOOL.format(value=value))


def parse_diagnose(value, where):
    """One of DIAGNOSE_MODES; BadValue naming `where` otherwise."""
    mode = str(value).strip()
    if mode not in DIAGNOSE_MODES:
        raise BadValue(where, PROBLEM_DIAGNOSE.format(
            valid=", ".join(DIAGNOSE_MODES), value=mode))
    return mode


def from_config(config):
    """SessionSettings of `config`; BadValue on a bad value."""
    sources = {}
    value, where, sources["leaks"] = _raw(config, "--leaks", "leaks",
                                          parse_bool)
    hunt = False if value is None else value
    hunt_none = sources["leaks"] == "command line" and not hunt

    wheres = {}
    value, where, sources["repeat"] = _raw(
        config, "--leaks-repeat", "leaks_repeat",
        lambda v, w: parse_int(v, "repeat", 1, w))
    repeat = DEFAULT_REPEAT if value is None else value
    value, where, sources["warmup"] = _raw(
        config, "--leaks-warmup", "leaks_warmup",
        lambda v, w: parse_int(v, "warmup", 0, w))
    warmup = DEFAULT_WARMUP if value is None else value
    value, where, sources["probes"] = _raw(config, "--leaks-probes",
                                           "leaks_probes", parse_probes)
    probes = tuple(leakcheck.DEFAULT_PROBES) if value is None else value
    if value is not None and probes != tuple(leakcheck.PROBE_NAMES):
        # Named here, not in a marker: a probe this process cannot read
        # would error every test.  (Only for the value in force: an ini
        # file shared by builds may name one that the command line
        # leaves out here.)
        for p in leakcheck.probes():
            if p.name in probes and not p.available:
                raise BadValue(where, PROBLEM_UNAVAILABLE.format(
                    value=p.name, reason=p.reason))
    value, where, sources["thorough"] = _raw(
        config, "--leaks-thorough", "leaks_thorough", parse_bool)
    thorough = False if value is None else value
    report, wheres["report"], sources["report"] = _raw(
        config, "--leaks-report", "leaks_report")
    baseline, wheres["baseline"], sources["baseline"] = _raw(
        config, "--leaks-baseline", "leaks_baseline")
    diagnose, where, sources["diagnose"] = _raw(
        config, "--leaks-diagnose", "leaks_diagnose", parse_diagnose)
    diagnose = "full" if diagnose is None else diagnose
    dump, wheres["dump"], sources["dump"] = _raw(
        config, "--leaks-dump", "leaks_dump")
    return SessionSettings(
        hunt_all=hunt,
        defaults=Settings(warmup=warmup, repeat=repeat, probes=probes,
                          tolerance=None, thorough=thorough),
        report_path=_path(config, report, sources["report"],
                          wheres["report"]),
        baseline_path=_path(config, baseline, sources["baseline"],
                            wheres["baseline"]),
        dump_dir=_path(config, dump, sources["dump"], wheres["dump"]),
        sources=sources, wheres=wheres, diagnose=diagnose,
        hunt_none=hunt_none)


def _path(config, value, source, where):
    """An absolute path: a command-line path is relative to the current
    directory, an ini path to the ini file's directory.  An empty path on
    the command line is a BadValue: a CI line with an unset variable must
    not silently write nothing."""
    if source == "command line" and not str(value).strip():
        raise BadValue(where, PROBLEM_EMPTY_PATH)
    if not value:
        return None
    value = os.path.expanduser(str(value))
    if source == "ini" and config.inipath and not os.path.isabs(value):
        value = os.path.join(os.path.dirname(str(config.inipath)), value)
    return os.path.abspath(value)


def check_dump_dir(path, where):
    """Makes the dump folder `path` if missing and checks that files can be
    made in it; BadValue naming `where` otherwise."""
    import tempfile
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".leakcheck-"):
            pass
    except OSError as e:
        raise BadValue(where, PROBLEM_DUMP.format(
            value=path, reason=e.strerror or e)) from None


def for_item(item, defaults, markers=None):
    """The Settings of one test: its closest noleak marker's arguments over
    `defaults`; BadValue naming the marker on a bad argument.  `markers`:
    closest_markers(item), when read already."""
    marker = (item.get_closest_marker(MARKER) if markers is None
              else markers.get(MARKER))
    if marker is None:
        return defaults
    where = WHERE_MARKER.format(nodeid=item.nodeid)
    valid = ", ".join(MARKER_ARGS)
    if marker.args:
        raise BadValue(where, PROBLEM_POSITIONAL.format(
            valid=valid, value=marker.args[0]))
    for k in marker.kwargs:
        if k not in MARKER_ARGS:
            raise BadValue(where, PROBLEM_KEYWORD.format(value=k,
                                                         valid=valid))
    kw = marker.kwargs
    return Settings(
        warmup=(defaults.warmup if kw.get("warmup") is None
                else parse_int(kw["warmup"], "warmup", 0, where, text=False)),
        repeat=(defaults.repeat if kw.get("repeat") is None
                else parse_int(kw["repeat"], "repeat", 1, where, text=False)),
        probes=(defaults.probes if kw.get("probes") is None
                else parse_probes(kw["probes"], where)),
        tolerance=parse_tolerance(kw.get("tolerance"), where),
        thorough=defaults.thorough)


def add_options(parser):
    """Registers the options and their ini equivalents, one help text
    each, every ini key with the type of its value (see ini_types)."""
    group = parser.getgroup("leakcheck", "leak hunting (leakcheck)")
    types = ini_types()
    for option, key, help_text, metavar, kind in OPTIONS:
        dest = option.lstrip("-").replace("-", "_")
        if metavar is None:
            # None unless given, so that the ini file decides then.
            group.addoption(option, action="store_true", dest=dest,
                            default=None, help=help_text)
        else:
            group.addoption(option, action="store", dest=dest, default=None,
                            metavar=metavar, help=help_text)
        # None: unset (a union type has no default of its own).
        parser.addini(key, help_text, type=types[kind], default=None)
    group.addoption(NO_LEAKS, action="store_false", dest="leaks",
                    default=None, help=HELP_NO_LEAKS)
