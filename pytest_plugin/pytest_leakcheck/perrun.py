"""What each run of a hunted test gets and costs: the time limit set for
the test applies to every run on its own, and the runs and the time they
add are counted (for the verbose line, the summary and JUnit).

pytest-timeout arms one timer per test around its whole protocol
(pytest_runtest_protocol), and leakcheck runs the protocol again and again
inside it: the whole hunt would count against the test's budget.  Its
public hooks let another plugin cancel and re-arm that timer
(pytest_timeout_cancel_timer(item), pytest_timeout_set_timer(item,
settings)); the test's settings are those pytest-timeout armed it with
first, which plugin.py's own pytest_timeout_set_timer records.  So Runs
cancels the timer while leakcheck measures between runs and re-arms it,
with the test's own settings, for each run, from the run's setup to the
end of its teardown, and for what is not a run (the shared fixtures set
up before the reported run, a module torn down by its teardown phase
alone: Runs.unmeasured).  With timeout_func_only pytest-timeout arms it around
each call itself, which is per run already.  When the settings were not
seen (a plugin that overrides the timer answered first, a pytest-timeout
without these hooks), the limit covers the whole hunt, and hunt.py says
so instead of blaming the test.
"""

import contextlib
import os
import sys
import time

import pytest

import leakcheck

TIMEOUT_SETTINGS = pytest.StashKey[object]()   # on an item: pytest-timeout's
RUNS = pytest.StashKey[object]()       # on an item under a hunt: its Runs

# A diagnosis runs the test under tracemalloc, about 10 times slower in
# allocation-heavy code (DESIGN.md's measured facts): its runs get ten
# budgets each, so that a slow traced run is not taken for a hang.
TRACED_SLOWDOWN = 10


# How long refresh() waits for the timer's thread to leave the process,
# and await_watchdog() for the watchdog's thread to fall asleep (a bound:
# were the newest thread another, busy one, each test would wait it out).
THREAD_WAIT = 0.5
WATCHDOG_WAIT = 0.05


WATCHDOG = pytest.StashKey[object]()    # on the config: faulthandler_timeout


def faulthandler_timeout(config):
    """pytest's faulthandler_timeout in seconds, when set (else None): a
    watchdog armed once around a test's whole protocol, so around all the
    runs of a hunt."""
    timeout = config.stash.get(WATCHDOG, False)
    if timeout is False:
        try:
            timeout = float(config.getini("faulthandler_timeout") or 0) or None
        except (ValueError, TypeError):
            timeout = None
        config.stash[WATCHDOG] = timeout
    return timeout


def await_watchdog(config):
    """Before a hunt's first snapshot, under faulthandler_timeout: pytest
    has just started faulthandler's watchdog thread for the test
    (faulthandler.dump_traceback_later(), which starts one each time), and
    that thread, once it runs, frees the block its start was handed in
    (py_bytes, py_allocs) and gives itself glibc's per-thread cache
    (native_bytes) before it sleeps until the limit.  Done while the
    reported run ran, that read as its growth, and the test ran twice
    more.  So the newest thread is given a little time to fall asleep."""
    if faulthandler_timeout(config) is None:
        return
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return
    if len(tasks) < 2:
        return
    newest = max(tasks, key=int)
    path = f"/proc/self/task/{newest}/stat"
    deadline = time.monotonic() + WATCHDOG_WAIT
    while True:
        try:
            with open(path, "rb") as f:
                stat = f.read()
        except OSError:
            return                  # gone already
        # The state follows the command's closing parenthesis.
        if stat[stat.rfind(b")") + 2:][:1] != b"R" or \
                time.monotonic() > deadline:
            return
        time.sleep(0.0001)


def remember_timeout(item, settings):
    """Records the settings pytest-timeout arms the test's timer with (the
    first time: later calls are leakcheck's own re-arming)."""
    if TIMEOUT_SETTINGS not in item.stash:
        item.stash[TIMEOUT_SETTINGS] = settings


def is_timeout(text):
    """Whether a failure's text is pytest-timeout's timeout."""
    module = sys.modules.get("pytest_timeout")
    message = getattr(module, "PYTEST_FAILURE_MESSAGE", None)
    if not isinstance(message, str) or "%s" not in message:
        return False
    head, _, tail = message.partition("%s")
    return any(head in line and tail in line
               for line in str(text).splitlines())


class Runs:
    """The runs of one hunted test, each inside `with runs.run():`.

    count: the runs made; first: the seconds of the first (the reported
    run), with those of the parts of pytest's protocol made outside it
    (unmeasured()).  The timer is armed when a run's setup begins and
    cancelled when its teardown ends (plugin.py's hooks call arm() and
    disarm()), inside the run: what the timer's owner keeps on the item is
    still there then, whereas after the run the item's state is put back
    as the reported run left it."""

    def __init__(self, item):
        self.item = item
        self.count = 0
        # A float of its own, replaced after the first run by another: the
        # constant 0.0 would stay, and the new one read as that run's growth.
        self.first = float(0)
        self._start = float(0)      # the run under way's start (run())
        self.started = time.perf_counter()
        self._settings = None       # the limit re-armed for each run
        self._running = None        # the settings of the run under way
        self._armed = False
        hook = item.config.hook
        self._set = getattr(hook, "pytest_timeout_set_timer", None)
        self._cancel = getattr(hook, "pytest_timeout_cancel_timer", None)
        settings = item.stash.get(TIMEOUT_SETTINGS, None)
        timeout = getattr(settings, "timeout", None)
        if self._set is None or self._cancel is None or not timeout or \
                timeout <= 0:
            return
        if getattr(settings, "func_only", False):
            return                  # armed around each call by pytest-timeout
        self._settings = settings
        self._cancel(item=item)     # measuring is not the test's time
        item.stash[RUNS] = self

    @property
    def per_run(self):
        """Whether pytest-timeout's limit applies to each run on its own:
        re-armed here, or armed around each call by pytest-timeout."""
        settings = self.item.stash.get(TIMEOUT_SETTINGS, None)
        return (self._settings is not None
                or bool(getattr(settings, "func_only", False)))

    @property
    def limit(self):
        """The per-run limit in seconds, or None."""
        settings = self.item.stash.get(TIMEOUT_SETTINGS, None)
        return getattr(settings, "timeout", None)

    def run(self, traced=False):
        """The context of one run: `with runs.run():`.  The Runs itself,
        not a generator's context manager: made before the snapshot that
        precedes the reported run, nothing of it is made in a run, and a
        test's few runs skip a generator's making, starting and
        stopping."""
        settings = self._settings
        if settings is not None and traced and hasattr(settings, "_replace"):
            settings = settings._replace(
                timeout=settings.timeout * TRACED_SLOWDOWN)
        self._running = settings
        self._start = time.perf_counter()
        return self

    def __enter__(self):
        return None

    def __exit__(self, *exc_info):
        self._running = None
        self.disarm()               # a run whose teardown did not run
        if self.count == 0:
            self.first += time.perf_counter() - self._start
        self.count += 1
        return False

    @contextlib.contextmanager
    def unmeasured(self):
        """A part of the test's protocol that is not a run (its shared
        fixtures set up before the reported run, a module's teardown
        alone): the limit applies to it as to a run, armed here since no
        setup hook arms it, and its time is the reported run's (first)."""
        self._running = self._settings
        self.arm()
        start = time.perf_counter()
        try:
            yield
        finally:
            self._running = None
            self.disarm()
            self.first += time.perf_counter() - start

    def arm(self):
        if self._running is not None and not self._armed:
            self._set(item=self.item, settings=self._running)
            self._armed = True

    def disarm(self):
        if self._armed:
            self._armed = False
            self._cancel(item=self.item)

    def refresh(self):
        """After the GC freezer froze, before the snapshot that precedes
        the reported run: arms the timer and cancels it, so that what its
        owner keeps on the item (pytest-timeout: item.cancel_timeout, a
        function made at each arming) is made anew, unfrozen.  The frozen
        one would die uncounted when the reported run arms the timer, and
        its successor read as one object more in that run (one clean test
        in each freeze's wake ran twice more).  With the thread method the
        timer's thread is joined by the cancel, and gone from the process
        (what the threads probe counts) a moment later: waited for, a
        little."""
        if self._settings is None or self._armed:
            return
        threads = leakcheck.thread_count()
        self._set(item=self.item, settings=self._settings)
        self._cancel(item=self.item)
        leakcheck.await_threads(threads, THREAD_WAIT)

    def close(self):
        """The hunt is over: the item lets go of this."""
        if RUNS in self.item.stash:
            del self.item.stash[RUNS]

    def added_seconds(self):
        """What leakcheck added to the test's reported run so far: the
        other runs, the snapshots between them, the diagnosis."""
        return max(0.0, time.perf_counter() - self.started - self.first)


# The clocks of the cost accounting.  The CPU clock (time.process_time,
# CLOCK_PROCESS_CPUTIME_ID) is a system call, about 0.6 us alone, and the
# code after one runs on colder caches: read at every part of a hunt, 13
# times a clean test (bench/bench_clock.py counts the reads), it cost a
# clean test 20 to 40 us (bench_overhead.py --against, paired and between
# the first and the last test).  So every part of a hunt, and the plugin's
# work outside the hunts, is timed on the monotonic clock, which is read in
# user space (`wall`), and turned into CPU seconds by the share of the CPU
# the process had per second of it (SHARE), which reads the CPU clock once
# in SHARE_WINDOW seconds at most.
wall = time.perf_counter
SHARE_WINDOW = 0.05


class CpuShare:
    """The CPU seconds the process had per second of `wall` over the last
    SHARE_WINDOW seconds or more (recent()).  Above one while other
    threads of the process run too."""

    __slots__ = ("cpu", "wall", "ratio")

    def __init__(self):
        self.cpu = time.process_time()
        self.wall = wall()
        self.ratio = 1.0

    def recent(self, now=None):
        """The share; `now`: a reading of `wall` just taken, if any."""
        if now is None:
            now = wall()
        if now - self.wall >= SHARE_WINDOW:
            cpu = time.process_time()
            self.ratio = (cpu - self.cpu) / (now - self.wall)
            self.cpu, self.wall = cpu, now
        return self.ratio


SHARE = CpuShare()


class Outside:
    """The CPU seconds of the plugin's work that no test's hunt_costs
    count: its import and set-up, its hooks around each test (its records,
    the freezer let go before a test it does not hunt) and in each
    reported run (that run is pytest's, what the plugin's hooks do in it
    is not), the session's end.  `paused` while a hunt counts its own.
    The report's journal is a category of its own (the report's cpu).

    Timed on `wall`, each stretch turned into CPU seconds when it ends, at
    the process's recent share of the CPU (SHARE): `seconds` only grows,
    so two readings of it at different moments never disagree backwards
    (converting the sum at each reading, at that moment's share, did)."""

    __slots__ = ("seconds", "paused")

    def __init__(self):
        self.seconds = float(0)
        self.paused = False

    def begin(self):
        return None if self.paused else wall()

    def end(self, began):
        """Counts the time since `began` (begin()); the reading of the
        clock, or None when there was none."""
        if began is None:
            return None
        now = wall()
        self.seconds += (now - began) * SHARE.recent(now)
        return now

    def cpu(self, since=0.0):
        """The CPU seconds counted since `seconds` was `since`."""
        return self.seconds - since


OUTSIDE = Outside()


class Costs:
    """The CPU seconds leakcheck adds to one test, by leakcheck.report's
    COST_CATEGORIES, and those of its reported run: timed on `wall`
    (lap()), and as_dict() turns them into CPU seconds (SHARE).  Every
    field is a float of its own from the start, and each reading replaces
    one float by another: read between two snapshots, they grow
    nothing."""

    __slots__ = ("began", "mark", "journal", "journal_began", "reported",
                 "snapshots", "extra_runs", "confirmation", "diagnosis")

    def __init__(self, journal=None, now=None):
        # The session's report (None without one), whose journaling is a
        # category of the session's: what it took during the hunt is not
        # the hunt's bookkeeping.  `now`: a reading of `wall` just taken,
        # if any.
        self.journal = journal
        self.journal_began = self.journaled()
        self.began = self.mark = wall() if now is None else now
        self.reported = float(0)
        self.snapshots = float(0)
        self.extra_runs = float(0)
        self.confirmation = float(0)
        self.diagnosis = float(0)

    def journaled(self):
        """The report's journal's seconds so far."""
        return self.journal.cpu if self.journal is not None else 0.0

    def lap(self):
        """The seconds since the last lap (or since the hunt began), on
        `wall`."""
        now = wall()
        spent = now - self.mark
        self.mark = now
        return spent

    def pytests_own(self, journaled):
        """Counts the lap as what pytest's own protocol does too, done by
        the hunt instead (the reported run's, for the accounting), less
        the journal's share since `journaled` (journaled())."""
        self.reported += self.lap() - (self.journaled() - journaled)

    def as_dict(self):
        """The record's hunt_costs, in CPU seconds: what the other
        categories leave of the time since the hunt began is leakcheck's
        own bookkeeping (making the run ready, each run's limits, what the
        runner notes after the reported run's phases, the record, its
        hooks), less what the report's journal took meanwhile."""
        ratio = SHARE.recent()
        spent = wall() - self.began - self.reported
        spent -= self.journaled() - self.journal_began
        measured = (self.snapshots + self.extra_runs + self.confirmation +
                    self.diagnosis)
        # A clean test has no extra run, confirmation or diagnosis: their
        # zeros are not rounded (round() is a decimal conversion).
        return {"snapshots": round(self.snapshots * ratio, 6),
                "extra_runs": self.extra_runs and
                round(self.extra_runs * ratio, 6),
                "confirmation": self.confirmation and
                round(self.confirmation * ratio, 6),
                "diagnosis": self.diagnosis and
                round(self.diagnosis * ratio, 6),
                "bookkeeping": round(max(0.0, spent - measured) * ratio, 6)}


def arm(item):
    """A run of `item` begins its setup: its time limit starts."""
    runs = item.stash.get(RUNS, None)
    if runs is not None:
        runs.arm()


def disarm(item):
    """A run of `item` ended its teardown: its time limit stops."""
    runs = item.stash.get(RUNS, None)
    if runs is not None:
        runs.disarm()
