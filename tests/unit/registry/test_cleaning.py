import copy
import io
import json
import struct
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hub_core.errors import ErrorCode
from registry.avro import parse
from registry.cleaning import (
    Change,
    Cleaned,
    Rule,
    clean,
    compile_rules,
    has_rules,
    validate_rules,
)
from registry.errors import InvalidRecord, InvalidSchema
from registry.serde import encode, to_datum
from registry.types import SchemaId

pytestmark = pytest.mark.unit

STATUS = {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}
TS_MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
TS_MICROS = {"type": "long", "logicalType": "timestamp-micros"}


def field(name: str, type_: Any, *rules: str, **extra: Any) -> dict[str, Any]:
    declared = {"hub.clean": list(rules)} if rules else {}
    return {"name": name, "type": type_, **declared, **extra}


def record(*fields: dict[str, Any], name: str = "R") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def one(type_: Any, *rules: str) -> dict[str, Any]:
    """A record with one field `x` of `type_` declaring `rules`."""
    return record(field("x", type_, *rules))


def cleaned_x(value: Any, type_: Any, *rules: str) -> Any:
    return clean({"x": value}, one(type_, *rules)).value["x"]


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


# --- where rules apply

ORDER = record(
    field("id", "string", "trim"),
    field(
        "customer",
        record(
            field("email", "string", "trim", "lowercase"),
            field("country", "string", "uppercase"),
            name="Customer",
        ),
    ),
    field(
        "lines",
        {
            "type": "array",
            "items": record(
                field("sku", "string", "trim", "uppercase"),
                field("quantity", "int", "parse_number"),
                name="Line",
            ),
        },
    ),
    field("tags", {"type": "array", "items": "string"}, "lowercase"),
    field("attributes", {"type": "map", "values": "string"}, "trim"),
    field("status", STATUS, "trim", "enum_case_insensitive"),
    field("placed_at", TS_MILLIS, "utc_timestamp"),
    field("note", ["null", "string"], "collapse_whitespace", default=None),
    name="Order",
)
RAW = {
    "id": " o-1 ",
    "customer": {"email": " Ada@Example.com", "country": "gb"},
    "lines": [{"sku": "a-1", "quantity": 1}, {"sku": " b-2", "quantity": "2"}],
    "tags": ["Gift", "fragile"],
    "attributes": {"channel": "web ", "source": "app"},
    "status": "paid ",
    "placed_at": "2024-05-01T14:00:00+02:00",
    "note": "leave  at\tdoor",
}


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
