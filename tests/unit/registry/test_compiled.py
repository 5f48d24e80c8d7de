"""The compiled converter answers exactly as the generic path: `clean` then `to_datum`.

Any divergence (a datum, a change, an error code, message or path) fails here, on generated
schemas with cleaning rules and on values that fit them, nearly fit them, or do not at all.
"""

import base64
import io
import itertools
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hub_core.errors import HubError
from registry.avro import AvroSchema, parse
from registry.binary import direct_writer
from registry.cleaning import clean, compile_rules, has_rules
from registry.compiled import CompiledSchema, compiled
from registry.errors import InvalidRecord, InvalidSchema, NotDirect
from registry.serde import encode, to_datum
from registry.types import SchemaId

pytestmark = pytest.mark.unit

Outcome = tuple[Any, ...]


def generic(value: Any, schema: AvroSchema) -> Outcome:
    """The path the gateway took before: the cleaning pass, then the generic conversion."""
    try:
        changes: tuple[Any, ...] = ()
        if has_rules(schema.resolved):
            cleaned = clean(value, schema.resolved)
            value, changes = cleaned.value, cleaned.changes
        return ("ok", repr(to_datum(value, schema.resolved)), changes)
    except HubError as exc:
        return ("error", exc.code, exc.message, getattr(exc, "path", None))


def fused(value: Any, schema: AvroSchema) -> Outcome:
    try:
        datum, changes = CompiledSchema(schema).clean_to_datum(value)
        return ("ok", repr(datum), changes)
    except HubError as exc:
        return ("error", exc.code, exc.message, getattr(exc, "path", None))


def plain_matches(value: Any, schema: AvroSchema) -> None:
    """Without cleaning, `to_datum` of the compiled form is the generic `to_datum`."""
    try:
        expected: Outcome = ("ok", repr(to_datum(value, schema.resolved)))
    except HubError as exc:
        expected = ("error", exc.code, exc.message, getattr(exc, "path", None))
    try:
        actual: Outcome = ("ok", repr(CompiledSchema(schema).to_datum(value)))
    except HubError as exc:
        actual = ("error", exc.code, exc.message, getattr(exc, "path", None))
    assert actual == expected


def messages_match(value: Any, schema: AvroSchema) -> None:
    """The direct writer's messages are the general path's: conversion, then fastavro."""
    converter = CompiledSchema(schema)
    schema_id = SchemaId(7)

    def cleaned_generally() -> tuple[bytes, Any]:
        datum, changes = converter.clean_to_datum(value)
        return converter.encode(datum, schema_id), changes

    assert _answer(lambda: converter.clean_encode(value, schema_id)) == _answer(cleaned_generally)
    assert _answer(lambda: (converter.to_message(value, schema_id), ())) == _answer(
        lambda: (converter.encode(converter.to_datum(value), schema_id), ())
    )


def _answer(encode: Callable[[], tuple[bytes, Any]]) -> Outcome:
    try:
        return ("ok", *encode())
    except HubError as exc:
        return ("error", exc.code, exc.message, getattr(exc, "path", None))


# -- schemas ------------------------------------------------------------------------------------

RULE_LISTS = [
    ["trim"], ["trim", "lowercase"], ["collapse_whitespace", "uppercase"], ["lowercase"],
    ["trim", "parse_number"], ["parse_number"], ["trim", "enum_case_insensitive"],
    ["enum_case_insensitive"], ["utc_timestamp"], ["trim", "utc_timestamp"],
]  # fmt: skip
LEAVES: list[Any] = [
    "null", "boolean", "int", "long", "float", "double", "string", "bytes",
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "int", "logicalType": "date"},
    {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2},
    {"type": "string", "logicalType": "uuid"},
    {"type": "string"},
]  # fmt: skip
# Branches of one union must differ in type; these never clash with each other.
UNION_BRANCHES: list[Any] = ["boolean", "int", "double", "string", "bytes", "array", "map",
                             "record", "enum"]  # fmt: skip


@st.composite
def schemas(draw: st.DrawFn, names: Callable[[], str], depth: int = 0) -> Any:
    kinds = ["leaf", "enum", "fixed"] + (["record", "array", "map", "union"] if depth < 2 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        return draw(st.sampled_from(LEAVES))
    if kind == "enum":
        return {"type": "enum", "name": names(), "symbols": ["NEW", "Paid", "done"]}
    if kind == "fixed":
        return {"type": "fixed", "name": names(), "size": 2}
    if kind == "array":
        return {"type": "array", "items": draw(schemas(names, depth + 1))}
    if kind == "map":
        return {"type": "map", "values": draw(schemas(names, depth + 1))}
    if kind == "record":
        return draw(records(names, depth + 1))
    chosen = draw(st.lists(st.sampled_from(UNION_BRANCHES), min_size=1, max_size=3, unique=True))
    branches: list[Any] = ["null"] if draw(st.booleans()) else []
    for branch in chosen:
        if branch == "array":
            branches.append({"type": "array", "items": draw(st.sampled_from(LEAVES[1:]))})
        elif branch == "map":
            branches.append({"type": "map", "values": draw(st.sampled_from(LEAVES[1:]))})
        elif branch == "record":
            branches.append(draw(records(names, depth + 1)))
        elif branch == "enum":
            branches.append({"type": "enum", "name": names(), "symbols": ["A", "b"]})
        else:
            branches.append(branch)
    return branches


@st.composite
def records(draw: st.DrawFn, names: Callable[[], str], depth: int = 0) -> dict[str, Any]:
    fields = []
    for n in range(draw(st.integers(min_value=1, max_value=4))):
        field: dict[str, Any] = {"name": f"f{n}", "type": draw(schemas(names, depth))}
        if draw(st.integers(min_value=0, max_value=2)) == 0:
            field["hub.clean"] = draw(st.sampled_from(RULE_LISTS))
            try:  # keep only rules the field's type can use
                compile_rules({"type": "record", "name": "Check", "fields": [field]})
            except InvalidSchema:
                del field["hub.clean"]
        if field["type"] == "null" or (
            isinstance(field["type"], list) and field["type"][:1] == ["null"]
        ):
            if draw(st.booleans()):
                field["default"] = None
        elif field["type"] in ("int", "long", "string", "double") and draw(st.booleans()):
            field["default"] = {"string": "x"}.get(field["type"], 3)
        fields.append(field)
    return {"type": "record", "name": names(), "fields": fields}


DIRECT_LEAVES: list[Any] = [
    "null", "boolean", "int", "long", "double", "string", "bytes",
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "local-timestamp-micros"},
    {"type": "int", "logicalType": "date"},
    {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
    {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 9},
    {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 3},
    {"type": "bytes", "logicalType": "decimal", "precision": 5},
]  # fmt: skip


@st.composite
def direct_schemas(draw: st.DrawFn, names: Callable[[], str], depth: int = 0) -> Any:
    kinds = ["leaf", "leaf", "enum", "fixed", "nullable"]
    kinds += ["record", "array", "map"] if depth < 2 else []
    kind = draw(st.sampled_from(kinds))
    if kind == "leaf":
        return draw(st.sampled_from(DIRECT_LEAVES))
    if kind == "enum":
        return {"type": "enum", "name": names(), "symbols": ["NEW", "Paid", "done"]}
    if kind == "fixed":
        fixed = {"type": "fixed", "name": names(), "size": 2}
        if draw(st.booleans()):  # the general path reads it as the fixed's bytes all the same
            fixed |= {"logicalType": "decimal", "precision": 4, "scale": 1}
        return fixed
    if kind == "nullable":
        branch = draw(st.sampled_from(DIRECT_LEAVES[1:]))
        return ["null", branch] if draw(st.booleans()) else [branch, "null"]
    if kind == "array":
        return {"type": "array", "items": draw(direct_schemas(names, depth + 1))}
    if kind == "map":
        return {"type": "map", "values": draw(direct_schemas(names, depth + 1))}
    return draw(direct_records(names, depth + 1))


@st.composite
def direct_records(draw: st.DrawFn, names: Callable[[], str], depth: int = 0) -> dict[str, Any]:
    count = draw(st.integers(min_value=1, max_value=5))
    fields = [{"name": f"f{n}", "type": draw(direct_schemas(names, depth))} for n in range(count)]
    return {"type": "record", "name": names(), "fields": fields}


def in_shape(schema: Any) -> st.SearchStrategy[Any]:
    """Values of exactly their datum's Python types, edges of the ranges included."""
    if isinstance(schema, list):
        return st.one_of([in_shape(b) for b in schema])
    if isinstance(schema, str):
        schema = {"type": schema}
    kind = schema["type"]
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "int":
        return st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, -1, 63, -64, 64]))
    if kind == "long":
        return st.one_of(st.integers(-(2**63), 2**63 - 1), EDGES)
    if kind == "double":
        return st.floats(allow_nan=False)
    if kind == "bytes" and schema.get("logicalType") == "decimal":
        return decimal_texts(schema["precision"], schema.get("scale", 0))
    if kind == "string":
        return st.text(max_size=200)
    if kind == "bytes":
        return st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode())
    if kind == "fixed":
        return st.binary(min_size=schema["size"], max_size=schema["size"]).map(
            lambda b: base64.b64encode(b).decode()
        )
    if kind == "enum":
        return st.sampled_from(schema["symbols"])
    if kind == "array":
        return st.lists(in_shape(schema["items"]), max_size=70)
    if kind == "map":
        return st.dictionaries(st.text(max_size=3), in_shape(schema["values"]), max_size=4)
    return st.fixed_dictionaries({f["name"]: in_shape(f["type"]) for f in schema["fields"]})


# Decimal text the general path reads but the direct writer leaves to it, or refuses.
ODD_DECIMALS = st.sampled_from([
    "1e2", "1E-2", "+1", " 1", "1 ", "1_0", "\u0661\u0662", ".5", "5.", "-.5", "NaN", "-NaN",
    "sNaN", "Infinity", "-Infinity", "inf", "", "-", "1.2.3", "0x10", "00000000000000000012.5",
    "1.50", "-0.000", "0.0000000000", "9" * 50, "-" + "9" * 39, "0." + "0" * 40,
])  # fmt: skip


def decimal_texts(precision: int, scale: int) -> st.SearchStrategy[Any]:
    """Plain decimal text around the schema's limits, ints, and spellings only Decimal takes."""
    whole = st.integers(-(10 ** (precision - scale + 1)), 10 ** (precision - scale + 1))
    fraction = st.text(alphabet="0123456789", min_size=1, max_size=scale + 1)
    plain = st.builds(lambda w, f: f"{w}.{f}", whole, fraction)
    negative_fraction = fraction.map(lambda f: f"-0.{f}")
    return st.one_of(
        plain, plain, negative_fraction, whole.map(str), whole, ODD_DECIMALS,
        st.decimals(allow_nan=True, places=scale), st.just(b"\x01"), st.booleans(),
    )  # fmt: skip


def fresh_names() -> Callable[[], str]:
    counter = itertools.count()
    return lambda: f"T{next(counter)}"


# -- values -------------------------------------------------------------------------------------

JUNK = st.sampled_from([None, True, 0, -1, 1.5, "", " x ", "12", [], {}, {"zz": 1}, [1, "a"]])
TEXT = st.one_of(
    st.text(max_size=8),
    st.text(alphabet=" \t\nAbz\u00df019.+-eE:TZ", max_size=12),
    st.sampled_from([" 42 ", "4.0", "1e3", " NEW", "paid", "DONE ", "2024-05-01T12:00:00+02:00",
                     "2024-05-01", "NaN", "12.345", "0.1", " a  B "]),
)  # fmt: skip
EDGES = st.sampled_from([2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1])
MOMENTS = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30))]),
)  # fmt: skip


def values(schema: Any) -> st.SearchStrategy[Any]:
    return st.one_of(JUNK, fitting(schema), fitting(schema), fitting(schema))


def fitting(schema: Any) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of([values(b) for b in schema])
    if isinstance(schema, str):
        schema = {"type": schema}
    kind, logical = schema["type"], schema.get("logicalType")
    if logical in ("timestamp-millis", "timestamp-micros"):
        return st.one_of(st.integers(-(2**64), 2**64), EDGES, MOMENTS.map(lambda m: m.isoformat()),
                         MOMENTS.map(lambda m: f" {m.isoformat()}"))  # fmt: skip
    if logical == "date":
        return st.one_of(st.integers(-(2**32), 2**32), EDGES, st.dates().map(str))
    if logical == "decimal":
        return st.one_of(st.decimals(allow_nan=False, places=3).map(str), st.integers(), TEXT)
    if logical == "uuid":
        return st.one_of(st.uuids().map(str), st.uuids().map(lambda u: f" {str(u).upper()}"))
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind in ("int", "long"):
        return st.one_of(st.integers(-(2**64), 2**64), EDGES, st.integers(-5, 5).map(float), TEXT)
    if kind in ("float", "double"):
        return st.one_of(st.floats(allow_nan=False), st.integers(), TEXT)
    if kind == "string":
        return TEXT
    if kind in ("bytes", "fixed"):
        return st.one_of(st.binary(max_size=3).map(lambda b: base64.b64encode(b).decode()), TEXT)
    if kind == "enum":
        return st.one_of(st.sampled_from(schema["symbols"]), TEXT)
    if kind == "array":
        return st.lists(values(schema["items"]), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=3), values(schema["values"]), max_size=3)
    fields = schema["fields"]
    return st.fixed_dictionaries(
        {},
        optional={f["name"]: values(f["type"]) for f in fields} | {"extra": JUNK},
    ).map(lambda d: d if "extra" not in d or len(d) % 3 else {k: v for k, v in d.items()
                                                                if k != "extra"})  # fmt: skip


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_compiled_converter_answers_as_the_generic_path(data: st.DataObject) -> None:
    document = data.draw(records(fresh_names()))
    schema = parse(json.dumps(document))
    for _ in range(4):
        value = data.draw(values(document))
        assert fused(value, schema) == generic(value, schema)
        plain_matches(value, schema)
        messages_match(value, schema)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_top_level_type_converts_as_the_generic_path(data: st.DataObject) -> None:
    document = data.draw(schemas(fresh_names()))
    schema = parse(json.dumps(document))
    for _ in range(4):
        value = data.draw(values(document))
        assert fused(value, schema) == generic(value, schema)
        messages_match(value, schema)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_values_in_shape_are_written_directly_with_fastavros_bytes(data: st.DataObject) -> None:
    """Schemas of the types the direct writer handles, and values mostly in their datum's
    shape, so that most records take the direct path rather than the general one."""
    document = data.draw(direct_records(fresh_names()))
    schema = parse(json.dumps(document))
    for _ in range(4):
        value = data.draw(st.one_of(in_shape(document), values(document)))
        messages_match(value, schema)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_writer_given_many_values_writes_each_as_fastavro_writes_it(
    data: st.DataObject,
) -> None:
    """A record's writer remembers the bytes of each field's last value: one converter gets a
    run of values, each drawn anew or repeated with a field changed, and answers each alone."""
    document = data.draw(direct_records(fresh_names()))
    schema = parse(json.dumps(document))
    converter = CompiledSchema(schema)
    schema_id = SchemaId(7)
    previous: list[Any] = []
    for _ in range(12):
        value = data.draw(st.one_of(in_shape(document), values(document)))
        last = previous[-1] if previous else None
        if isinstance(last, dict) and isinstance(value, dict) and data.draw(st.booleans()):
            value = {**last, **{k: v for k, v in value.items() if data.draw(st.booleans())}}
        previous.append(value)

        def general(value: Any = value) -> tuple[bytes, Any]:
            return converter.encode(converter.to_datum(value), schema_id), ()

        assert _answer(lambda value=value: (converter.to_message(value, schema_id), ())) == (
            _answer(general)
        )


def test_remembered_field_values_never_stand_for_values_of_another_type() -> None:
    schema = parse(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "n", "type": ["null", "long"]}, {"name": "s", "type": "string"},
    ]}))  # fmt: skip
    converter = compiled(schema)
    for value in ({"n": 300, "s": "a"}, {"n": 300.0, "s": "a"}, {"n": 1, "s": "a"},
                  {"n": True, "s": "a"}, {"n": 300, "s": "b"}, {"n": 300, "s": "a"}):  # fmt: skip
        assert _answer(lambda value=value: converter.to_message(value, SchemaId(1))) == _answer(
            lambda value=value: converter.encode(converter.to_datum(value), SchemaId(1))
        )


# -- examples the generator does not reach ------------------------------------------------------

RECURSIVE = {
    "type": "record", "name": "Node", "namespace": "tree",
    "fields": [
        {"name": "label", "type": "string", "hub.clean": ["trim"]},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["LEAF", "INNER"]},
         "hub.clean": ["enum_case_insensitive"]},
        {"name": "other", "type": ["null", "Kind"], "default": None,
         "hub.clean": ["trim", "enum_case_insensitive"]},
        {"name": "children", "type": {"type": "array", "items": "tree.Node"}, "default": []},
    ],
}  # fmt: skip


@pytest.mark.parametrize(
    "value",
    [
        {"label": " a ", "kind": "leaf"},
        {"label": "a", "kind": "INNER", "other": " leaf ",
         "children": [{"label": " b", "kind": "Leaf", "children": [{"label": 1, "kind": "LEAF"}]}]},
        {"label": "a", "kind": "INNER", "children": [{"label": " b", "kind": "tree"}]},
        {"label": "a", "kind": "LEAF", "other": "nope"},
        {"label": "a"},
        {"label": "a", "kind": "LEAF", "unknown": 1, "also": 2},
        "not a record",
    ],
)  # fmt: skip
def test_recursive_records_and_named_references(value: Any) -> None:
    schema = parse(json.dumps(RECURSIVE))
    assert fused(value, schema) == generic(value, schema)
    plain_matches(value, schema)


def test_changes_are_reported_with_serde_paths() -> None:
    schema = parse(json.dumps(RECURSIVE))
    _datum, changes = compiled(schema).clean_to_datum(
        {"label": " a ", "kind": "inner", "children": [{"label": "b ", "kind": "LEAF"}]}
    )
    assert [(c.path, str(c.rule), c.before, c.after) for c in changes] == [
        ("$.label", "trim", " a ", "a"),
        ("$.kind", "enum_case_insensitive", "inner", "INNER"),
        ("$.children[0].label", "trim", "b ", "b"),
    ]


def test_encoding_writes_the_bytes_serde_writes() -> None:
    schema = parse(json.dumps(RECURSIVE))
    value = {"label": "a", "kind": "INNER", "children": [{"label": "b", "kind": "LEAF"}]}
    converter = compiled(schema)
    assert converter.encode(converter.to_datum(value), SchemaId(7)) == encode(
        value, schema=schema, schema_id=SchemaId(7)
    )


def test_a_schema_with_invalid_rules_fails_each_record_as_clean_does() -> None:
    schema = parse(json.dumps({"type": "record", "name": "R", "fields": [
        {"name": "n", "type": "boolean", "hub.clean": ["trim"]}]}))  # fmt: skip
    assert fused({"n": True}, schema) == generic({"n": True}, schema)
    assert fused({"n": True}, schema)[1] == InvalidSchema.code


def test_the_compiled_form_is_built_once_per_schema_object() -> None:
    schema = parse(json.dumps(RECURSIVE))
    assert compiled(schema) is compiled(schema)


def test_long_arrays_maps_and_strings_are_written_as_fastavro_writes_them() -> None:
    schema = parse(json.dumps({"type": "record", "name": "Big", "fields": [
        {"name": "items", "type": {"type": "array", "items": "long"}},
        {"name": "tags", "type": {"type": "map", "values": ["null", "string"]}},
        {"name": "text", "type": "string"},
    ]}))  # fmt: skip
    value = {
        "items": list(range(-150, 150)),
        "tags": {f"k{n}": None if n % 3 else "v" * n for n in range(100)},
        "text": "\u00e9" * 5000,
    }
    converter = compiled(schema)
    direct = converter.to_message(value, SchemaId(7))
    assert direct == converter.encode(converter.to_datum(value), SchemaId(7))
    assert direct == encode(value, schema=schema, schema_id=SchemaId(7))


DECIMAL_RECORD = {"type": "record", "name": "Order", "fields": [
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12,
                                "scale": 2}},
    {"name": "wide", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                       "precision": 38, "scale": 10}], "default": None},
]}  # fmt: skip


@pytest.mark.parametrize(
    ("amount", "wide"),
    [
        ("0.00", None), ("-0.00", "0"), ("0", "-0.0000000000"), ("1.28", "1"),
        ("-1.28", "-128"), ("-1.27", "-0.0000000001"), ("-327.68", "32767"),
        ("9999999999.99", "9" * 28 + "." + "9" * 10),
        ("-9999999999.99", "-" + "9" * 28 + "." + "9" * 10),
        ("12.3", "0.5"), ("007.50", "-00.25"), (12, -(10**27)),
    ],
)  # fmt: skip
def test_decimal_text_is_written_directly_as_fastavro_writes_its_decimal(
    amount: Any, wide: Any
) -> None:
    schema = parse(json.dumps(DECIMAL_RECORD))
    converter = compiled(schema)
    value = {"amount": amount, "wide": wide}
    write = direct_writer(schema.resolved)
    assert write is not None
    direct = bytearray()
    write(direct, value)  # no NotDirect: the value is in shape
    assert bytes(direct) == converter.encode(converter.to_datum(value), SchemaId(7))[5:]
    decoded: Any = fastavro.schemaless_reader(io.BytesIO(direct), schema.parsed, None)
    assert decoded["amount"] == Decimal(amount)
    assert decoded["wide"] == (None if wide is None else Decimal(wide))


@pytest.mark.parametrize(
    "amount",
    ["1.234", "1.230", "0.001", "10000000000.00", "-10000000000", "NaN", "Infinity", "1e-3",
     Decimal("1.23"), 1.5, True],
)  # fmt: skip
def test_a_decimal_the_general_path_refuses_is_refused_never_rounded(amount: Any) -> None:
    schema = parse(json.dumps(DECIMAL_RECORD))
    value = {"amount": amount, "wide": None}
    write = direct_writer(schema.resolved)
    assert write is not None
    with pytest.raises(NotDirect):
        write(bytearray(), value)
    with pytest.raises(InvalidRecord) as raised:
        compiled(schema).to_message(value, SchemaId(7))
    assert raised.value.path == "$.amount"


@pytest.mark.parametrize(
    "amount",
    ["-.50", ".50", "1_0.00", "+1.00", " 1.00", "1.00 ", "--1.00", "1-0.00", "1.5.50", "\u0661.00",
     "1.\u0660\u0660", "12.", "-", "-0.00", "00.00"],
)  # fmt: skip
def test_text_with_as_many_fraction_digits_as_the_scale_is_written_only_when_plain(
    amount: str,
) -> None:
    """PostgreSQL's numeric text has exactly `scale` digits after the point, and the direct
    writer reads such text without its pattern: any other spelling with as many digits still
    goes to the general path, which converts it or says what is wrong, as it would anyway."""
    schema = parse(json.dumps(DECIMAL_RECORD))
    converter = compiled(schema)
    value = {"amount": amount, "wide": None}
    write = direct_writer(schema.resolved)
    assert write is not None
    plain = re.fullmatch(r"-?[0-9]+\.[0-9]{2}", amount) is not None
    direct = bytearray()
    try:
        write(direct, value)
    except NotDirect:
        assert not plain
    else:
        assert plain
        assert bytes(direct) == converter.encode(converter.to_datum(value), SchemaId(7))[5:]
    assert _answer(lambda: (converter.to_message(value, SchemaId(7)), ())) == _answer(
        lambda: (converter.encode(converter.to_datum(value), SchemaId(7)), ())
    )


def test_bytes_and_fixed_from_base64_are_written_as_fastavro_writes_them() -> None:
    schema = parse(json.dumps({"type": "record", "name": "Blob", "fields": [
        {"name": "data", "type": "bytes"},
        {"name": "pair", "type": {"type": "fixed", "name": "Pair", "size": 2,
                                  "logicalType": "decimal", "precision": 4, "scale": 1}},
        {"name": "other", "type": ["null", "Pair"]},
    ]}))  # fmt: skip
    converter = compiled(schema)
    value = {"data": base64.b64encode(bytes(range(256))).decode(), "pair": "//8=", "other": "AAE="}
    write = direct_writer(schema.resolved)
    assert write is not None
    direct = bytearray()
    write(direct, value)
    assert bytes(direct) == encode(value, schema=schema, schema_id=SchemaId(7))[5:]
    for bad in ({**value, "data": b"\x00"}, {**value, "pair": "AAEC"}, {**value, "data": "!"}):
        with pytest.raises(InvalidRecord):
            converter.to_message(bad, SchemaId(7))


def test_wide_decimals_are_written_as_the_general_path_writes_them() -> None:
    """Past 63 bytes the length takes two; past 308 digits there is no direct writer, since the
    general path refuses values beyond a double's range."""
    for precision in (400, 300):
        document = {"type": "record", "name": "Wide", "fields": [
            {"name": "n", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": precision, "scale": 3}},
        ]}  # fmt: skip
        schema = parse(json.dumps(document))
        assert (direct_writer(schema.resolved) is None) == (precision > 308)
        for text in ("9" * (precision - 3) + ".999", "-" + "9" * 150 + ".5", "1" + "0" * 152):
            messages_match({"n": text}, schema)
    written = compiled(schema).to_message({"n": "9" * 297}, SchemaId(7))  # precision 300
    assert len(written) > 5 + 2 + 64
