"""What the terminal shows of the hunt: a leak's failure text (its report,
and one line for the short test summary), the status word of a hunted
test, and the summary lines at the session's end."""

import leakcheck
import leakcheck.report as lcreport

from . import report as reportmod
from . import settings as settingsmod

# A leak in one line (the short test summary's): the most telling probe
# and its growth per measured run, then the other probes that grew.
MSG_LEAK = "{probe} {growth} per run{also}"
MSG_LEAK_ALSO = "; also {probes}"
MSG_VERBOSE_RUNS = "{word} ({runs} runs)"
MSG_VERBOSE_RUNS_TIME = "{word} ({runs} runs, +{seconds:.2f}s)"
MSG_VERBOSE_GROWTH = ("{word} ({runs} runs, +{seconds:.2f}s; the warm-up "
                      "run grew {growth})")
MSG_HUNT_TIME = ("leakcheck: hunting added {seconds:.2f}s over {tests} "
                 "test{s} ({runs} runs beyond the reported ones); slowest:")
MSG_HUNT_LINE = "{seconds:.2f}s {runs:>3} runs  {id}"
MSG_HUNT_GROWTH = " (the warm-up run grew {growth})"
MSG_COSTS = ("leakcheck: added {total:.2f}s of CPU time over {tests} "
             "test{s} ({per_test:.2f} ms a test): snapshots and settling "
             "{snapshots:.2f}s, extra runs {extra_runs:.2f}s, confirmation "
             "{confirmation:.2f}s, diagnosis {diagnosis:.2f}s, its own "
             "bookkeeping {bookkeeping:.2f}s, the report {report:.2f}s, "
             "around the tests {session:.2f}s; costliest:")
MSG_COST_LINE = "{seconds:.3f}s  {id}"
SLOWEST_HUNTS = 3       # lines of the summary's slowest hunts (--durations
                        # sets another count)
MSG_SUMMARY = ("leakcheck: {tests} test{s} checked: {leak} leak, {clean} "
               "clean, {error} error, {skipped} skipped{known}")
MSG_REPORT_WRITTEN = "leakcheck: report written to {path}{partial}"
MSG_GC_FROZEN = ("leakcheck: code in this session froze objects (gc.freeze), "
                 "so leakcheck did not freeze the heap: every snapshot "
                 "collected all of it (slower, same verdicts)")
MSG_NOT_COMPARED = "leakcheck: {id}: {probe} not compared: {why}"

# The probes a person reads first: a descriptor, a thread, an
# uncollectable cycle or a counted object names what to look for; then
# memory, its size before its count of blocks.
TELLING = ("fds", "threads", "garbage", "valgrind", "objects",
           "native_bytes", "py_bytes", "py_allocs", "blocks", "refs")

STATUS_LEAKED = ("failed", "L", ("LEAKED", {"red": True, "bold": True}))


class LeakRepr:
    """The longrepr of a leaking test: the series report and diagnosis,
    with a one-line crash message for pytest's short summary."""

    def __init__(self, text, message, location):
        self.text = text
        path, lineno, _ = location
        self.reprcrash = _Crash(path, (lineno or 0) + 1, message)

    def toterminal(self, tw):
        for line in self.text.rstrip("\n").splitlines():
            tw.line(line)

    def __str__(self):
        return self.text


class _Crash:
    def __init__(self, path, lineno, message):
        self.path, self.lineno, self.message = path, lineno, message

    def __str__(self):
        return f"{self.path}:{self.lineno}: {self.message}"


_UNITS = {}


def leak_line(leaking, deltas):
    """MSG_LEAK of a leak: `leaking` the probes that leaked, `deltas`
    {probe: [growth per measured run]}."""
    if not _UNITS:
        _UNITS.update((p.name, p.unit) for p in leakcheck.probes())
    rank = {name: i for i, name in enumerate(TELLING)}
    order = sorted(leaking, key=lambda p: rank.get(p, len(TELLING)))
    if not order:
        return ""
    lead = order[0]
    grew = list(deltas.get(lead) or ()) or [0]
    low, high = min(grew), max(grew)
    growth = f"{low:+d}" if low == high else f"{low:+d} to {high:+d}"
    unit = _UNITS.get(lead)
    if unit and unit != lead:
        growth += f" {unit}"
    also = (MSG_LEAK_ALSO.format(probes=", ".join(order[1:]))
            if len(order) > 1 else "")
    return MSG_LEAK.format(probe=lead, growth=growth, also=also)


def leak_failure(text, leaking, deltas, location):
    """The longrepr of a leaking test at `location` (item.location): the
    series report `text`, with leak_line() as its crash message."""
    return LeakRepr(text, leak_line(leaking, deltas), location)


def teststatus(report, config):
    """LEAKED for a leak; at -v the verbose word says how many runs a
    hunted test took, at -vv also the time they added."""
    rec = getattr(report, "leakcheck", None)
    if not isinstance(rec, dict) or report.when != "call":
        return None
    leaked = report.failed and rec.get("verdict") == "leak"
    runs = rec.get("test_runs") or 0
    verbosity = config.getoption("verbose", 0) or 0
    if leaked:
        category, letter, (word, markup) = STATUS_LEAKED
    elif verbosity < 1 or runs < 2:
        return None
    elif report.passed:
        category, letter, word, markup = "passed", ".", "PASSED", {
            "green": True}
    elif report.failed:
        category, letter, word, markup = "failed", "F", "FAILED", {
            "red": True}
    else:
        return None
    growth = rec.get("warmup_growth")
    if verbosity >= 2 and runs > 1 and isinstance(growth, dict) and growth:
        word = MSG_VERBOSE_GROWTH.format(
            word=word, runs=runs, seconds=rec.get("hunt_seconds") or 0,
            growth=lcreport.growth_text(growth))
    elif verbosity >= 2 and runs > 1:
        word = MSG_VERBOSE_RUNS_TIME.format(
            word=word, runs=runs, seconds=rec.get("hunt_seconds") or 0)
    elif verbosity >= 1 and runs > 1:
        word = MSG_VERBOSE_RUNS.format(word=word, runs=runs)
    if _PLAIN_WORDS:
        return category, letter, word
    return category, letter, (word, markup)


# pytest before 8 prints a (word, markup) pair as it is in the short test
# summary: the word goes alone there (and uncoloured on the verbose line).
_PLAIN_WORDS = settingsmod.installed_pytest() < (8, 0)


def summary(tr, config, state):
    """The session's closing lines: what leaked or could not be judged,
    the counts, what was not compared, what hunting cost, the report."""
    if state is None or not state.tests:
        return
    problems = [state.problems[k] for k in sorted(state.problems)]
    leaks = [r for r in problems if r["verdict"] == "leak"]
    _problems(tr, problems, leaks)
    counts = {v: 0 for v in reportmod.VERDICTS}
    for verdict, _, _, _ in state.tests.values():
        counts[verdict] += 1
    known = sum(1 for r in leaks if r["known"])
    tests = len(state.tests)
    tr.write_line(MSG_SUMMARY.format(
        tests=tests, s="s" if tests != 1 else "",
        known=f" ({known} known from the baseline)" if known else "",
        **counts))
    for test_id in sorted(state.unread):
        for probe, why in state.unread[test_id].items():
            tr.write_line(MSG_NOT_COMPARED.format(id=test_id, probe=probe,
                                                  why=why))
    _costs(tr, config, state, tests)
    _hunt_times(tr, config, state.tests, state.growth)
    if state.freezer.refused:
        tr.write_line(MSG_GC_FROZEN)
    _report_line(tr, state.report)


def _problems(tr, recs, leaks):
    """A line per leak, and per test leakcheck itself could not judge (a
    crash, an error of its own), under a red separator."""
    ours = [r for r in recs if not lcreport.judged(r)]
    if not (leaks or ours):
        return
    tr.write_sep("=", "leakcheck", red=True, bold=True)
    for r in leaks:
        word = "KNOWN LEAK" if r["known"] else "LEAKED"
        tr.write_line(f"{word} {r['id']} - "
                      f"{leak_line(r['leaking'], r['deltas'])}")
    for r in ours:
        word = "CRASHED" if r["verdict"] == "crashed" else "ERROR"
        tr.write_line(f"{word} {r['id']} - {r['reason']}")


def _report_line(tr, report):
    """Where the report was written (and why it is partial), or why it
    could not be."""
    if report is not None and report.written:
        partial = report.partial_reasons
        tr.write_line(MSG_REPORT_WRITTEN.format(
            path=report.path,
            partial=f" (partial: {'; '.join(partial)})" if partial else ""))
    elif report is not None and report.write_error:
        tr.write_line(f"leakcheck: cannot write the report "
                      f"{report.path}: {report.write_error}", red=True)


def _listed(config):
    """How many of the slowest or costliest tests the summary lists:
    SLOWEST_HUNTS, or the count --durations gives (0: all it has)."""
    count = config.getoption("durations", None)
    return SLOWEST_HUNTS if count is None else count


def _costs(tr, config, state, tests):
    """The CPU time leakcheck added to the session, by category (the
    report's own too), and the tests that cost most."""
    if not state.costliest:
        return
    report = state.report.cpu if state.report is not None else 0.0
    session = state.outside_cpu()
    costs = state.summary.costs
    total = sum(costs.values()) + report + session
    tr.write_line(MSG_COSTS.format(
        total=total, tests=tests, s="s" if tests != 1 else "",
        per_test=total / tests * 1000, report=report, session=session,
        **costs))
    count = _listed(config)
    costliest = sorted(state.costliest, reverse=True)
    for seconds, test_id in costliest[:count] if count > 0 else costliest:
        tr.write_line("  " + MSG_COST_LINE.format(seconds=seconds,
                                                  id=test_id))


def _hunt_times(tr, config, tests, growth):
    """What hunting added to the session's time, and the slowest hunts, as
    --durations lists the slowest phases (its count, when given), from
    `tests` {test id: (verdict, known, test_runs, hunt_seconds)}; each with
    what its warm-up run grew, from `growth` {test id: warmup_growth}."""
    hunted = [(test_id, runs, seconds) for test_id, (_, _, runs, seconds)
              in sorted(tests.items()) if runs > 1]
    if not hunted:
        return
    count = _listed(config)
    hunted.sort(key=lambda h: h[2], reverse=True)
    tr.write_line(MSG_HUNT_TIME.format(
        seconds=sum(seconds for _, _, seconds in hunted),
        tests=len(hunted), s="s" if len(hunted) != 1 else "",
        runs=sum(runs - 1 for _, runs, _ in hunted)))
    for test_id, runs, seconds in hunted[:count] if count > 0 else hunted:
        grew = lcreport.growth_text(growth.get(test_id) or {})
        tr.write_line("  " + MSG_HUNT_LINE.format(
            seconds=seconds, runs=runs, id=test_id)
            + (MSG_HUNT_GROWTH.format(growth=grew) if grew else ""))
