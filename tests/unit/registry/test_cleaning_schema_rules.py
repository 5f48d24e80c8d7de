"""The rules a schema declares: validated with the choices named, planned once, encodable."""

import io
import json
from datetime import UTC, datetime
from typing import Any

import fastavro
import pytest

from hub_core.errors import ErrorCode
from registry.avro import parse
from registry.cleaning import (
    Cleaned,
    clean,
    compile_rules,
    has_rules,
    validate_rules,
)
from registry.errors import InvalidRecord, InvalidSchema
from registry.serde import encode, to_datum
from registry.types import SchemaId
from tests.unit.registry.cleaning_schemas import (
    ORDER,
    RAW,
    STATUS,
    TS_MILLIS,
    field,
    one,
    record,
)

pytestmark = pytest.mark.unit


# --- validate_rules


@pytest.mark.parametrize(
    ("schema", "fragments"),
    [
        (
            record(field("customer", record(field("email", "string", "lowercas"), name="C"))),
            ["$.customer.email", "'lowercas'", "Valid rules: trim, collapse_whitespace"],
        ),
        (
            record({"name": "email", "type": "string", "hub.clean": "trim"}),
            ["$.email", "must be a list", "Valid rules: trim"],
        ),
        (record({"name": "e", "type": "string", "hub.clean": [1]}), ["$.e", "list of rule"]),
        (
            one("int", "lowercase"),
            ["$.x", "'lowercase'", "(int)", "Rules for this field: trim, parse_number"],
        ),
        (one(["null", "int"], "lowercase"), ["$.x", "(int, null)"]),
        (one("string", "enum_case_insensitive"), ["$.x", "'enum_case_insensitive'", "enum"]),
        (one(STATUS, "lowercase"), ["$.x", "'lowercase'", "trim, enum_case_insensitive"]),
        (one("string", "parse_number"), ["$.x", "'parse_number'"]),
        (one(TS_MILLIS, "parse_number"), ["$.x", "'parse_number'", "(timestamp)"]),
        (one("boolean", "trim"), ["$.x", "'trim'", "Rules for this field: none"]),
        (one(record(field("y", "string"), name="Y"), "trim"), ["$.x", "(record)"]),
        (
            one({"type": "array", "items": "long"}, "uppercase"),
            ["$.x", "'uppercase'", "(long)"],
        ),
        (
            one(
                {"type": "enum", "name": "E", "symbols": ["Paid", "PAID"]}, "enum_case_insensitive"
            ),
            ["$.x", "'Paid' and 'PAID'", "differ only by case"],
        ),
        (one("string", "trim", "trim"), ["$.x", "'trim' is listed twice"]),
        (one("string", "lowercase", "uppercase"), ["$.x", "'lowercase' and 'uppercase'"]),
        (one("string", "lowercase", "utc_timestamp"), ["$.x", "'utc_timestamp'", "'T' and 'Z'"]),
        (one("int", "parse_number", "trim"), ["$.x", "list 'trim' before 'parse_number'"]),
        (
            one(STATUS, "enum_case_insensitive", "trim"),
            ["$.x", "list 'trim' before 'enum_case_insensitive'"],
        ),
        (
            one({"type": "string", "hub.clean": ["trim"]}),
            ['"hub.clean" at $.x sits on a type', "declare it on the record field"],
        ),
        (
            record(field("lines", {"type": "array", "items": record(field("n", "int", "upper"))})),
            ["$.lines[].n", "'upper'"],
        ),
    ],
)
def test_validate_rules_names_the_field_the_rule_and_the_choices(
    schema: dict[str, Any], fragments: list[str]
) -> None:
    with pytest.raises(InvalidSchema) as caught:
        validate_rules(schema)
    assert caught.value.code is ErrorCode.INVALID_SCHEMA
    for fragment in fragments:
        assert fragment in caught.value.message


def test_clean_refuses_a_schema_with_invalid_rules() -> None:
    with pytest.raises(InvalidSchema):
        clean({"x": 1}, one("int", "lowercase"))


@pytest.mark.parametrize(
    "schema",
    [
        ORDER,
        one(["null", "int", "string"], "lowercase", "parse_number"),
        one(STATUS, "trim", "enum_case_insensitive"),
        one("string", "uppercase", "utc_timestamp"),
        one("string"),
        "string",
    ],
)
def test_validate_rules_accepts_rules_that_fit(schema: Any) -> None:
    validate_rules(schema)


# --- has_rules and plans


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (ORDER, True),
        (one("string", "trim"), True),
        (record(field("lines", {"type": "array", "items": one("string", "trim")})), True),
        (one(["null", one("string", "trim")]), True),
        (one("string"), False),
        (record({"name": "x", "type": "string", "hub.clean": []}), False),
        (record(field("x", "string", default={"hub.clean": ["trim"]})), False),
        ("string", False),
    ],
)
def test_has_rules(schema: Any, expected: bool) -> None:
    assert has_rules(schema) is expected


def test_a_plan_is_compiled_once_and_reused() -> None:
    plan = compile_rules(ORDER)
    assert plan.active
    assert plan.clean(RAW) == clean(RAW, ORDER)
    assert not compile_rules(one("string")).active


def test_a_plan_without_effective_rules_returns_the_value_untouched() -> None:
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}
    plan = compile_rules(one(decimal, "parse_number"))
    value = {"x": "1.50"}
    assert not plan.active
    assert plan.clean(value) == Cleaned(value, ())
    assert plan.clean(value).value is value


# --- end to end: the registry parses it, serde encodes what cleaning produced


def test_a_schema_with_rules_parses_and_its_cleaned_values_encode() -> None:
    parsed = parse(json.dumps(ORDER))
    assert json.loads(parsed.canonical)["fields"][0]["hub.clean"] == ["trim"]
    assert has_rules(parsed.resolved)
    with pytest.raises(InvalidRecord):
        to_datum(RAW, parsed.resolved)
    cleaned = clean(RAW, parsed.resolved)
    message = encode(cleaned.value, schema=parsed, schema_id=SchemaId(1))
    record_ = fastavro.schemaless_reader(io.BytesIO(message[5:]), parsed.parsed, None)
    assert record_["status"] == "PAID"
    assert record_["lines"][1] == {"sku": "B-2", "quantity": 2}
    assert record_["placed_at"] == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert record_["customer"]["email"] == "ada@example.com"
