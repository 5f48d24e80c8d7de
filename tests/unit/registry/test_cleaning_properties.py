"""Cleaning as properties: every rule is idempotent, and lossless for what serde reads."""

import struct
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from registry.cleaning import (
    clean,
    validate_rules,
)
from registry.errors import InvalidSchema
from registry.serde import to_datum
from tests.unit.registry.cleaning_schemas import (
    STATUS,
    TS_MICROS,
    cleaned_x,
    one,
)

pytestmark = pytest.mark.unit


# --- idempotence and losslessness, as properties

STRING_RULES = ["trim", "collapse_whitespace", "lowercase", "uppercase", "utc_timestamp"]
texts = st.one_of(
    st.text(),
    st.text(alphabet=" \t\n\u00a0\u2003aAzZ\u00df\u0130\u01c5\u0149Tt:+-.,0123456789"),
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ).map(lambda d: d.isoformat(sep=" ").replace("+00:00", "+03:30")),
)


def _valid(schema: dict[str, Any]) -> bool:
    try:
        validate_rules(schema)
    except InvalidSchema:
        return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(rules=st.lists(st.sampled_from(STRING_RULES), unique=True), value=texts)
def test_string_rules_are_idempotent(rules: list[str], value: str) -> None:
    schema = one(["null", "string"], *rules)
    assume(_valid(schema))
    once = clean({"x": value}, schema)
    twice = clean(once.value, schema)
    assert twice.changes == ()
    assert twice.value == once.value


@settings(max_examples=200, deadline=None)
@given(
    rules=st.permutations(["trim", "enum_case_insensitive"]),
    value=st.sampled_from(["new", "PAID", "Paid", " pAiD\t", "other", ""]),
)
def test_enum_rules_are_idempotent(rules: list[str], value: str) -> None:
    schema = one(STATUS, *rules)
    assume(_valid(schema))
    once = clean({"x": value}, schema)
    assert clean(once.value, schema).changes == ()


@settings(max_examples=300, deadline=None)
@given(
    moment=st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31)),
    offset_minutes=st.integers(min_value=-(23 * 60 + 59), max_value=23 * 60 + 59),
    timespec=st.sampled_from(["minutes", "seconds", "milliseconds", "microseconds"]),
)
def test_utc_timestamp_keeps_the_instant_serde_reads(
    moment: datetime, offset_minutes: int, timespec: str
) -> None:
    text = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes))).isoformat(
        timespec=timespec
    )
    schema = one(TS_MICROS, "utc_timestamp")
    once = clean({"x": text}, schema)
    assert once.value["x"].endswith("Z")
    assert to_datum(once.value, schema) == to_datum({"x": text}, schema)
    assert clean(once.value, schema).changes == ()


@given(number=st.floats(allow_nan=False, allow_infinity=False))
def test_parse_number_reads_any_double_back_exactly(number: float) -> None:
    assert cleaned_x(repr(number), "double", "parse_number") == number


@given(number=st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_parse_number_reads_any_long_back_exactly(number: int) -> None:
    assert cleaned_x(str(number), "long", "parse_number") == number
    assert cleaned_x(f"{number}.000", "long", "parse_number") == number


@given(text=st.from_regex(r"\A[+-]?\d{1,25}(\.\d{0,25})?([eE][+-]?\d{1,3})?\Z"))
def test_parse_number_only_converts_text_the_stored_number_gives_back(text: str) -> None:
    written = Decimal(text)
    digits = len(written.normalize().as_tuple().digits)
    for type_ in ("int", "long", "float", "double"):
        out = cleaned_x(text, type_, "parse_number")
        if isinstance(out, str):
            continue
        stored = struct.unpack("<f", struct.pack("<f", out))[0] if type_ == "float" else out
        assert Decimal(f"{stored:.{digits}g}") == written
        assert cleaned_x(out, type_, "parse_number") == out
