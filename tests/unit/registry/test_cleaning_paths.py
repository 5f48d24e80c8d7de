"""Where cleaning rules apply: nested records, arrays, maps, named and recursive types, unions."""

import copy
from typing import Any

import pytest

from registry.cleaning import (
    Change,
    Rule,
    clean,
)
from tests.unit.registry.cleaning_schemas import (
    ORDER,
    RAW,
    STATUS,
    TS_MILLIS,
    cleaned_x,
    field,
    one,
    record,
)

pytestmark = pytest.mark.unit


# --- where rules apply


def test_changes_name_nested_paths_in_serde_style() -> None:
    result = clean(RAW, ORDER)
    assert [(c.path, c.rule) for c in result.changes] == [
        ("$.id", "trim"),
        ("$.customer.email", "trim"),
        ("$.customer.email", "lowercase"),
        ("$.customer.country", "uppercase"),
        ("$.lines[0].sku", "uppercase"),
        ("$.lines[1].sku", "trim"),
        ("$.lines[1].sku", "uppercase"),
        ("$.lines[1].quantity", "parse_number"),
        ("$.tags[0]", "lowercase"),
        ("$.attributes.channel", "trim"),
        ("$.status", "trim"),
        ("$.status", "enum_case_insensitive"),
        ("$.placed_at", "utc_timestamp"),
        ("$.note", "collapse_whitespace"),
    ]
    assert result.value == {
        "id": "o-1",
        "customer": {"email": "ada@example.com", "country": "GB"},
        "lines": [{"sku": "A-1", "quantity": 1}, {"sku": "B-2", "quantity": 2}],
        "tags": ["gift", "fragile"],
        "attributes": {"channel": "web", "source": "app"},
        "status": "PAID",
        "placed_at": "2024-05-01T12:00:00Z",
        "note": "leave at door",
    }


def test_input_is_not_mutated_and_unchanged_parts_are_shared() -> None:
    raw = copy.deepcopy(RAW)
    result = clean(raw, ORDER)
    assert raw == RAW
    assert result.value is not raw
    assert result.value["lines"][0] is not raw["lines"][0]
    assert result.value["customer"] is not raw["customer"]
    unchanged = {**raw, "tags": ["gift"]}
    assert clean(unchanged, ORDER).value["tags"] is unchanged["tags"]


def test_cleaning_is_deterministic() -> None:
    assert clean(copy.deepcopy(RAW), ORDER) == clean(copy.deepcopy(RAW), ORDER)


def test_a_field_rules_do_not_reach_into_a_nested_record() -> None:
    inner = record(field("y", "string"), name="Inner")
    schema = record(field("x", ["null", "string", inner], "trim"))
    value = {"x": {"y": " kept "}}
    assert clean(value, schema).value is value
    assert clean({"x": " a "}, schema).value == {"x": "a"}


def test_values_of_a_kind_a_rule_does_not_serve_are_left_alone() -> None:
    schema = one(["null", "int", "string"], "lowercase")
    assert clean({"x": 42}, schema).changes == ()
    assert clean({"x": "ABC"}, schema).value == {"x": "abc"}


def test_maps_of_arrays_and_records_in_maps() -> None:
    schema = record(
        field("m", {"type": "map", "values": {"type": "array", "items": "string"}}, "trim"),
        field("r", {"type": "map", "values": record(field("s", "string", "uppercase"))}),
    )
    result = clean({"m": {"k": [" a", "b "]}, "r": {"one": {"s": "x"}}}, schema)
    assert [c.path for c in result.changes] == ["$.m.k[0]", "$.m.k[1]", "$.r.one.s"]


def test_records_referenced_by_name_and_recursive_records_are_cleaned() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "namespace": "t",
        "fields": [
            field("label", "string", "trim"),
            field("next", ["null", "Node"], default=None),
        ],
    }
    schema = record(field("head", node), field("other", "t.Node"), name="List")
    value = {
        "head": {"label": " a", "next": {"label": "b ", "next": None}},
        "other": {"label": " c ", "next": None},
    }
    result = clean(value, schema)
    assert [c.path for c in result.changes] == [
        "$.head.label",
        "$.head.next.label",
        "$.other.label",
    ]
    assert result.value["head"]["next"]["label"] == "b"


def test_a_named_enum_referenced_again_takes_the_rules_of_each_field() -> None:
    schema = record(
        field("a", STATUS, "enum_case_insensitive"),
        field("b", "Status"),
        field("c", ["null", "Status"], "trim"),
    )
    result = clean({"a": "new", "b": "new", "c": " NEW "}, schema)
    assert result.value == {"a": "NEW", "b": "new", "c": "NEW"}


# --- unions


@pytest.mark.parametrize(
    ("type_", "rules", "value", "expected"),
    [
        # serde reads "42" as the string branch: it stays a string
        (["null", "long", "string"], ("parse_number",), "42", "42"),
        (["null", "string", "long"], ("parse_number",), "42", "42"),
        # no branch takes it as given: the first that takes it cleaned wins
        (["null", "long", "double"], ("parse_number",), "42", 42),
        (["null", "long", "double"], ("parse_number",), "0.5", 0.5),
        (["null", "double", "long"], ("parse_number",), "42", 42.0),
        (["null", "long", "string"], ("trim", "parse_number"), " 42 ", "42"),
        # "paid" is a fine string; case-folding it would move it to the enum branch
        ([STATUS, "string"], ("enum_case_insensitive",), "paid", "paid"),
        (["string", STATUS], ("enum_case_insensitive",), "paid", "paid"),
        # trimming " PAID " would make serde read it as the enum: not applied
        ([STATUS, "string"], ("trim",), " PAID ", " PAID "),
        ([STATUS, "string"], ("trim",), " other ", "other"),
        (["null", STATUS], ("trim", "enum_case_insensitive"), " paid ", "PAID"),
        (
            [TS_MILLIS, "string"],
            ("utc_timestamp",),
            "2024-05-01T14:00:00+02:00",
            "2024-05-01T12:00:00Z",
        ),
        (["null", "long", "string"], ("parse_number",), None, None),
    ],
)
def test_a_union_value_is_cleaned_as_the_branch_serde_reads_it_as(
    type_: list[Any], rules: tuple[str, ...], value: Any, expected: Any
) -> None:
    out = cleaned_x(value, type_, *rules)
    assert out == expected
    assert type(out) is type(expected)


def test_records_in_a_union_are_told_apart_as_serde_does() -> None:
    a = record(field("a", "string", "uppercase"), name="A")
    b = record(field("b", "string", "lowercase"), name="B")
    schema = record(field("x", ["null", a, b]))
    assert clean({"x": {"a": "q"}}, schema).value == {"x": {"a": "Q"}}
    result = clean({"x": {"b": "Q"}}, schema)
    assert result.value == {"x": {"b": "q"}}
    assert result.changes == (Change("$.x.b", Rule.LOWERCASE, "Q", "q"),)
