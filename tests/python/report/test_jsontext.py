"""The engine's JSON writer (_core.json_text, which the report's journal
encodes every record with) against json.dumps: the same text to the byte
for every value it takes, None for every value it leaves to json, and the
report layer's encoders the same text as json's whichever writes it."""

import collections
import enum
import json
import math
import os
import sys

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="needs hypothesis "
                                 "(scripts/setup installs it)")
from hypothesis import HealthCheck, given, settings, strategies as st

from leakcheck import _core
from leakcheck.report import files, journal

EXAMPLES = int(os.environ.get("LEAKCHECK_FUZZ_EXAMPLES", "300"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=list(HealthCheck))

SEPARATORS = [(", ", ": "), (",", ":"), ("", ""), (" ;\t", " = ")]

# Every code point, lone surrogates among them, and the ones json escapes
# by name.
_chars = (st.integers(min_value=0, max_value=sys.maxunicode).map(chr)
          | st.sampled_from('"\\\b\f\n\r\t\x7f\x1f ~\ud800\udfff'))
_texts = st.lists(_chars, max_size=12).map("".join)
_scalars = (st.none() | st.booleans()
            | st.integers(min_value=-2 ** 70, max_value=2 ** 70)
            | st.sampled_from([0, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 63,
                               -2 ** 63 - 1, 10 ** 400])
            | st.floats()                       # NaN and the infinities too
            | st.sampled_from([0.0, -0.0, 1e16, 1e-7, 5e-324, 1.5e308,
                               0.1 + 0.2, 123456789.0])
            | _texts)
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4)
    | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(_texts, inner, max_size=5), max_leaves=25)


def _dumps(value, items, keys):
    return json.dumps(value, separators=(items, keys))


@FUZZ
@given(value=_values, seps=st.sampled_from(SEPARATORS))
def test_the_same_text_as_json_dumps(value, seps):
    assert _core.json_text(value, *seps) == _dumps(value, *seps)


@pytest.mark.parametrize("value", [
    {}, [], (), "", {"": ""}, [[[]]], {"a": {"b": {"c": []}}},
    float("nan"), float("inf"), -float("inf"), -0.0, 1e22, 1e-5,
    True, False, None, 10 ** 4000, -(10 ** 4000),
    # longer than a block of escapes, and than the writer's first buffer
    "\U0001F600\n\"" * 5000, ["x" * 3000, {"k" * 3000: "\u00e9" * 3000}],
], ids=repr)
def test_edges_the_same_as_json(value):
    for seps in SEPARATORS:
        assert _core.json_text(value, *seps) == _dumps(value, *seps)


class _Str(str):
    pass


class _Int(enum.IntEnum):
    ONE = 1


class _Float(float):
    def __repr__(self):
        return "not json's"


class _Dict(dict):
    pass


def _nested(depth):
    value = []
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("value", [
    _Str("a"), [_Int.ONE], {"x": _Float(1.5)}, _Dict(a=1),
    collections.OrderedDict(a=1), {1: "int key"}, {None: 0}, {"a": object()},
    [b"bytes"], {"a": {1, 2}}, [1, [2, [3, _Str("deep")]]],
    _nested(files.MAX_DEPTH),
], ids=lambda v: type(v).__name__)
def test_what_it_does_not_take_is_left_to_json(value):
    assert _core.json_text(value, ", ", ": ") is None


def test_it_takes_what_nests_as_deep_as_a_report_may():
    # files.MAX_DEPTH levels of containers (the deepest a report's readers
    # take), the innermost empty.
    deepest = _nested(files.MAX_DEPTH - 1)
    assert _core.json_text(deepest, ",", ":") == _dumps(deepest, ",", ":")


def test_separators_not_ascii_are_left_to_json():
    assert _core.json_text([1, 2], "\u00a0", ":") is None
    assert _core.json_text({"a": 1}, ",", "\u2192") is None


def test_too_many_digits_fail_as_in_json():
    if not hasattr(sys, "set_int_max_str_digits"):
        pytest.skip("no limit on an int's digits before 3.11")
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(1000)
    try:
        with pytest.raises(ValueError) as ours:
            _core.json_text([10 ** 1500], ",", ":")
        with pytest.raises(ValueError) as theirs:
            json.dumps([10 ** 1500])
    finally:
        sys.set_int_max_str_digits(limit)
    assert str(ours.value) == str(theirs.value)


def test_bad_arguments():
    with pytest.raises(TypeError):
        _core.json_text([1])
    with pytest.raises(TypeError):
        _core.json_text([1], 1, ":")


@FUZZ
@given(value=_values | st.builds(lambda v: {"a": v, "b": object()}, _values)
       | st.builds(lambda v: [_Str("s"), v, {2: v}], _values))
def test_the_report_layers_encoders_write_jsons_text(value):
    """encode_entry (a report's entries, the journal's records) and the
    journal's compact lines: json's text, whichever writer wrote it
    (json's with default=str for what JSON has no type for)."""
    assert files.encode_entry(value) == json.dumps(
        value, check_circular=False, default=str)
    event = {"start": value}
    assert journal._line(event) == (json.dumps(
        event, check_circular=False, separators=(",", ":"),
        default=str) + "\n").encode("ascii")


def test_a_record_with_the_engines_writer_and_without(monkeypatch):
    record = {"id": "test_x.py::test_\u00e9[\U0001F600]", "verdict": "clean",
              "deltas": {"blocks": [0, 1, -2]}, "hunt_seconds": 0.008,
              "costs": {"snapshots": 0.024898, "nan": math.nan},
              "known": False, "reason": None, "runs": (1, 2)}
    fast = files.one_shot_encoder(default=str)(record)
    monkeypatch.setattr(files, "_json_text", None)
    assert files.one_shot_encoder(default=str)(record) == fast == \
        json.dumps(record, default=str)
