"""The series verdict on the cases of tests/series_verdicts.txt, judged
through leakcheck._core's binding of the engine's lc_series_feed(): for
each case its verdict, its leaking probes, the measured runs it took and
the confirming runs' verdict in its report.  tests/c/test_series_verdicts.c
judges the same table in C, so both sides assert one rule."""

import pathlib

import pytest

from leakcheck import _core
from leakcheck._probes import PROBE_NAMES, index_of

TABLE = pathlib.Path(__file__).parents[2] / "series_verdicts.txt"
CONFIRMED = "  confirmed over 8 more runs\n"
NOT_CONFIRMED = ("  not confirmed over 8 more runs (growth in each half of "
                 "them needed): clean\n")


def _values(tokens):
    """Deltas from "D" and "D*K" tokens."""
    values = []
    for token in tokens:
        value, _, times = token.partition("*")
        values += [int(value)] * int(times or 1)
    return values


def _read_table():
    cases = []
    for number, line in enumerate(TABLE.read_text().splitlines(), 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        kind, args = words[0], words[1:]
        if kind == "case":
            name, _, warmup, _, repeat, *flags = args
            cases.append({"name": name, "line": number,
                          "warmup": int(warmup), "repeat": int(repeat),
                          "thorough": "thorough" in flags,
                          "confirm": "noconfirm" not in flags,
                          "settings": [], "warm": {}, "deltas": {}})
        elif kind in ("tolerance", "threshold"):
            cases[-1]["settings"].append((kind, args[0], int(args[1])))
        elif kind == "deltas":
            probe, values = args[0], args[1:]
            if cases[-1]["warmup"] > 0:
                assert values[1] == "|", f"{TABLE}:{number}: no |"
                cases[-1]["warm"][probe] = int(values[0])
                values = values[2:]
            cases[-1]["deltas"][probe] = _values(values)
        elif kind == "expect":
            verdict, *leaking, _, runs = args
            cases[-1].update(leaked=verdict == "leak", leaking=leaking,
                             runs=int(runs))
        else:
            raise AssertionError(f"{TABLE}:{number}: unknown line {line!r}")
    return cases


CASES = _read_table()


def _row(deltas):
    """(mask, one delta per probe) of {probe name: delta}."""
    mask = sum(1 << index_of(name) for name in deltas)
    return mask, [deltas.get(name, 0) for name in PROBE_NAMES]


def test_the_table_holds_cases():
    assert len(CASES) >= 20
    assert all("runs" in case for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_judged_as_the_table_says(case):
    series = _core.Series(case["name"], case["warmup"], case["repeat"])
    series.set_thorough(case["thorough"])
    series.set_confirm(case["confirm"])
    for kind, probe, value in case["settings"]:
        if kind == "tolerance":
            series.set_tolerance(index_of(probe), value)
        else:
            series.set_threshold(index_of(probe), value)
    more = (series.feed(*_row(case["warm"])) if case["warmup"] > 0
            else True)
    run = 0
    while more:
        deltas = {probe: values[run] for probe, values in
                  case["deltas"].items() if run < len(values)}
        assert deltas, (f"{case['name']} (line {case['line']}): the table "
                        f"gives {run} runs; the series wants more")
        more = series.feed(*_row(deltas))
        run += 1
    report = series.report()
    leaking = [name for name in PROBE_NAMES
               if series.leaking() >> index_of(name) & 1]
    assert (series.leaked(), leaking, series.runs()) == \
        (case["leaked"], case["leaking"], case["runs"]), report
    if series.confirm_runs():
        assert (CONFIRMED in report) is case["leaked"], report
        assert (NOT_CONFIRMED in report) is not case["leaked"], report
    else:
        assert "confirmed over" not in report, report


def test_feed_refuses_what_is_no_run():
    series = _core.Series("s", 0, 2)
    with pytest.raises(ValueError, match="one per probe"):
        series.feed(1, [0])
    with pytest.raises(ValueError, match="invalid argument"):
        series.feed(1, None)    # only the warm-up run may go unread
    with pytest.raises(ValueError, match="invalid argument"):
        series.feed(1, [1 << 41] + [0] * (_core.PROBE_COUNT - 1))
    assert series.feed(1, [1 << 40] + [0] * (_core.PROBE_COUNT - 1))
