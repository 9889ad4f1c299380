"""The one reader of reports: the shape of what it accepts."""

import pytest

import leakcheck
import leakcheck.report as lcreport

from report_helpers import leak


@pytest.mark.parametrize("field, value, problem", [
    ("diagnosis", "a string", 'has a "diagnosis" that is not an object'),
    ("diagnosis", [1], 'has a "diagnosis" that is not an object'),
    ("deltas", [1], 'has "deltas" that are not lists of integers by probe'),
    ("deltas", {"blocks": 5}, 'has "deltas" that are not lists of integers '
                              'by probe'),
    ("deltas", {"blocks": [[1]]}, 'has "deltas" that are not lists of '
                                  'integers by probe'),
    ("deltas", {"blocks": [10 ** 400]}, 'has "deltas" that are not lists of '
                                        'integers by probe'),
    ("thresholds", {"blocks": "1"}, 'has "thresholds" that are not integers '
                                    'by probe'),
    ("runs", 10 ** 400, 'has a "runs" that is not an integer'),
    ("line", True, 'has a "line" that is not an integer'),
    ("file", 3, 'has a "file" that is not a string'),
])
def test_a_test_entry_of_the_wrong_shape_is_unusable(tmp_path, field, value,
                                                     problem):
    path = tmp_path / "r.json"
    leakcheck.write_report(str(path), {
        "schema": lcreport.REPORT_SCHEMA, "tests": [dict(leak(),
                                                         **{field: value})]})
    with pytest.raises(lcreport.UnusableInput) as e:
        lcreport.load_report(str(path))
    assert str(e.value) == \
        f"report {path}: tests[0] ('t.py::test_a') {problem}"


@pytest.mark.parametrize("key", ["environment", "settings", "probes",
                                 "summary"])
def test_a_report_part_that_is_not_an_object_is_unusable(tmp_path, key):
    path = tmp_path / "r.json"
    leakcheck.write_report(str(path), {"schema": lcreport.REPORT_SCHEMA,
                                       "tests": [leak()], key: "text"})
    with pytest.raises(lcreport.UnusableInput) as e:
        lcreport.load_report(str(path))
    assert str(e.value) == f'report {path}: "{key}" is not an object'
