"""Cleaning rules one by one: what each rewrites, what it leaves alone, the changes it reports."""

from typing import Any

import pytest

from registry.cleaning import (
    Change,
    Cleaned,
    Rule,
    clean,
)
from tests.unit.registry.cleaning_schemas import (
    STATUS,
    TS_MICROS,
    TS_MILLIS,
    cleaned_x,
    one,
)

pytestmark = pytest.mark.unit


# --- the rules, one by one


@pytest.mark.parametrize(
    ("rules", "value", "expected"),
    [
        (("trim",), "  a  b \t", "a  b"),
        (("trim",), "a", "a"),
        (("collapse_whitespace",), " a \t\n b  ", " a b "),
        (("collapse_whitespace",), "a\u00a0\u2003b", "a b"),
        (("collapse_whitespace",), "a b", "a b"),
        (("lowercase",), "Ada@Example.COM", "ada@example.com"),
        (("uppercase",), "gb-eng", "GB-ENG"),
        (("uppercase",), "GB", "GB"),
        (("trim", "collapse_whitespace", "lowercase"), "  Ada   LOVELACE ", "ada lovelace"),
    ],
)
def test_text_rules_rewrite_strings(rules: tuple[str, ...], value: str, expected: str) -> None:
    assert cleaned_x(value, "string", *rules) == expected


def test_a_rule_reports_each_change_with_its_rule_and_values() -> None:
    result = clean({"x": "  Ada "}, one("string", "trim", "uppercase"))
    assert result == Cleaned(
        {"x": "ADA"},
        (Change("$.x", Rule.TRIM, "  Ada ", "Ada"), Change("$.x", Rule.UPPERCASE, "Ada", "ADA")),
    )
    assert result.changes[0].rule == "trim"


def test_a_rule_that_changes_nothing_reports_nothing() -> None:
    value = {"x": "ada"}
    result = clean(value, one("string", "trim", "lowercase"))
    assert result.changes == ()
    assert result.value is value


@pytest.mark.parametrize(
    ("rules", "value", "expected"),
    [
        (("enum_case_insensitive",), "paid", "PAID"),
        (("enum_case_insensitive",), "Paid", "PAID"),
        (("enum_case_insensitive",), "PAID", "PAID"),
        (("enum_case_insensitive",), "shipped", "shipped"),  # no symbol: left for validation
        (("enum_case_insensitive",), " paid ", " paid "),  # whitespace is not case
        (("trim", "enum_case_insensitive"), " paid ", "PAID"),
        (("trim",), " NEW\n", "NEW"),
    ],
)
def test_enum_rules(rules: tuple[str, ...], value: str, expected: str) -> None:
    assert cleaned_x(value, STATUS, *rules) == expected


def test_enum_case_insensitive_folds_ascii_case_only() -> None:
    answer = {"type": "enum", "name": "Answer", "symbols": ["OK", "KO"]}
    assert cleaned_x("ok", answer, "enum_case_insensitive") == "OK"
    # KELVIN SIGN lowercases to "k", but is not a case of "K"
    assert cleaned_x("o\u212a", answer, "enum_case_insensitive") == "o\u212a"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2024-05-01T14:00:00+02:00", "2024-05-01T12:00:00Z"),
        ("2024-05-01T14:00:00.120+02:00", "2024-05-01T12:00:00.120Z"),
        ("2024-05-01T14:00:00.1234567-01:30", "2024-05-01T15:30:00.1234567Z"),
        ("2024-01-01T01:00:00+0200", "2023-12-31T23:00:00Z"),
        ("2024-05-01 14:00+02", "2024-05-01T12:00:00Z"),
        ("2024-05-01T12:00:00,5+00:00", "2024-05-01T12:00:00.5Z"),
        ("2024-05-01T12:00:00Z", "2024-05-01T12:00:00Z"),
        ("2024-05-01T12:00:00", "2024-05-01T12:00:00"),  # no offset: meaning unknown
        ("2024-02-30T12:00:00+02:00", "2024-02-30T12:00:00+02:00"),  # no such day
        ("0001-01-01T00:30:00+01:00", "0001-01-01T00:30:00+01:00"),  # before year 1 in UTC
        ("yesterday", "yesterday"),
        (1714564800000, 1714564800000),
    ],
)
def test_utc_timestamp_rewrites_offset_text_as_the_same_instant_in_utc(
    value: Any, expected: Any
) -> None:
    assert cleaned_x(value, TS_MILLIS, "utc_timestamp") == expected


@pytest.mark.parametrize(
    "type_",
    [
        "string",
        TS_MICROS,
        {"type": "long", "logicalType": "local-timestamp-millis"},
        ["null", TS_MILLIS],
    ],
)
def test_utc_timestamp_serves_timestamp_and_plain_string_fields(type_: Any) -> None:
    assert cleaned_x("2024-05-01T14:00:00+02:00", type_, "utc_timestamp") == "2024-05-01T12:00:00Z"


@pytest.mark.parametrize(
    ("type_", "value", "expected"),
    [
        ("int", "42", 42),
        ("int", "-7", -7),
        ("int", "42.0", 42),
        ("int", "1e3", 1000),
        ("int", "4.2e1", 42),
        ("int", "1.5", "1.5"),
        ("int", "2147483648", "2147483648"),  # out of range for int: left for validation
        ("long", "2147483648", 2147483648),
        ("long", "1e999999999", "1e999999999"),
        ("int", " 42", " 42"),  # surrounding text is trim's business
        ("int", "1_000", "1_000"),
        ("int", "\u0664\u0662", "\u0664\u0662"),  # Arabic-Indic digits are not numeric text
        ("int", "0x2a", "0x2a"),
        ("int", "forty-two", "forty-two"),
        ("int", 42, 42),
        ("double", "0.1", 0.1),
        ("double", "42", 42.0),
        ("double", "-2.5e-3", -0.0025),
        ("double", "0.10000000000000001", "0.10000000000000001"),  # digits past a double
        ("double", "12345678901234567890", "12345678901234567890"),
        ("double", "1e400", "1e400"),
        ("double", "1e-400", "1e-400"),
        ("double", "NaN", "NaN"),  # serde reads it; not numeric text
        ("float", "0.1", 0.1),
        ("float", "16777216", 16777216.0),
        ("float", "16777217", "16777217"),  # needs 25 bits of mantissa
        ("float", "0.123456789", "0.123456789"),
        ("float", "3.4028235e38", 3.4028235e38),
        ("float", "1e39", "1e39"),
    ],
)
def test_parse_number_turns_numeric_text_into_numbers_only_when_lossless(
    type_: str, value: Any, expected: Any
) -> None:
    out = cleaned_x(value, type_, "parse_number")
    assert out == expected
    assert type(out) is type(expected)


def test_parse_number_leaves_decimal_text_for_serde() -> None:
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}
    assert cleaned_x("12.50", decimal, "parse_number") == "12.50"
    assert cleaned_x(" 12.50 ", decimal, "trim", "parse_number") == "12.50"


def test_trim_prepares_numbers_for_parse_number() -> None:
    assert clean({"x": " 42\n"}, one("int", "trim", "parse_number")).changes == (
        Change("$.x", Rule.TRIM, " 42\n", "42"),
        Change("$.x", Rule.PARSE_NUMBER, "42", 42),
    )


def test_null_values_are_left_alone() -> None:
    value = {"x": None}
    assert clean(value, one(["null", "string"], "trim", "lowercase")).value is value
