"""What the registry refuses in a schema it accepts: names every stage can carry, unions the
specification allows, decimals as the specification defines them, no recursion and no decimal
wider than Spark's under a topic's subject, and bounded sizes (42201, with the path and the rule
in the message)."""

import json
from typing import Any

import pytest
from sqlalchemy import Engine

from hub_core.errors import ErrorCode
from registry.avro import parse
from registry.compatibility import check
from registry.errors import InvalidSchema
from registry.schema_rules import SchemaLimits, check_subject
from registry.service import RegistryService, _parsed_size
from registry.store import SchemaStore
from registry.types import CompatibilityMode, SchemaReference, Subject, Version

pytestmark = pytest.mark.unit

LIMITS = SchemaLimits()


def record(*fields: Any, name: str = "Order", **extra: Any) -> dict[str, Any]:
    """A record of `fields`: (name, type) pairs or whole field objects."""
    specs = [f if isinstance(f, dict) else {"name": f[0], "type": f[1]} for f in fields]
    return {"type": "record", "name": name, "fields": specs, **extra}


def refused(schema: Any, limits: SchemaLimits = LIMITS) -> str:
    """Parse `schema` as a schema offered to the registry; return the 42201 message."""
    text = schema if isinstance(schema, str) else json.dumps(schema)
    with pytest.raises(InvalidSchema) as caught:
        parse(text, limits=limits)
    assert caught.value.code is ErrorCode.INVALID_SCHEMA
    assert int(caught.value.code) == 42201
    return caught.value.message


# --- names ------------------------------------------------------------------------------------


def test_a_field_name_with_a_space_is_refused_at_its_path() -> None:
    message = refused(record(("id", "long"), ("note", "string"), ("a b", "string")))
    assert "$.fields[2].name" in message
    assert "'a b'" in message and "[A-Za-z_][A-Za-z0-9_]*" in message


@pytest.mark.parametrize("name", ["1st", "a-b", "é", "", "a.b"])
def test_field_names_outside_the_avro_name_rule_are_refused(name: str) -> None:
    message = refused(record(("id", "long"), (name, "string")))
    assert "$.fields[1].name" in message and "Avro naming rule" in message


def test_record_enum_and_fixed_names_and_namespaces_are_checked_segment_by_segment() -> None:
    assert "$.name" in refused(record(("id", "long"), name="my-order"))
    assert "$.name" in refused(record(("id", "long"), name="shop.1orders.Order"))
    assert "$.namespace" in refused(record(("id", "long"), namespace="shop..orders"))
    enum = {"type": "enum", "name": "Bad Status", "symbols": ["A"]}
    assert "$.fields[0].type.name" in refused(record(("status", enum)))
    fixed = {"type": "fixed", "name": "hash-256", "size": 32}
    assert "$.fields[0].type[1].name" in refused(record(("hash", ["null", fixed])))


@pytest.mark.parametrize("size", [2**62, 2**31, -1], ids=["2**62", "2**31", "negative"])
def test_a_fixed_whose_size_avro_java_cannot_read_as_an_int_is_refused_at_its_path(
    size: int,
) -> None:
    digest = {"type": "fixed", "name": "Digest", "size": size}
    message = refused(record(("id", "long"), ("digest", ["null", digest])))
    assert "$.fields[1].type[1].size" in message
    assert f"not {size:,}" in message and "2,147,483,647" in message


def test_a_fixed_of_the_largest_int_size_is_accepted() -> None:
    parse(json.dumps(record(("digest", {"type": "fixed", "name": "Big", "size": 2**31 - 1}))))


def test_enum_symbols_outside_the_avro_name_rule_are_refused() -> None:
    enum = {"type": "enum", "name": "Status", "symbols": ["OPEN", "IN PROGRESS"]}
    message = refused(record(("status", enum)))
    assert "$.fields[0].type.symbols[1]" in message and "enum symbol" in message


def test_names_over_255_characters_are_refused_and_255_are_accepted() -> None:
    long = "n" * 256
    assert "at most 255" in refused(record(("id", "long"), (long, "string")))
    assert "$.name" in refused(record(("id", "long"), name=f"shop.{long}"))
    enum = {"type": "enum", "name": "Status", "symbols": ["OPEN", long]}
    assert "$.fields[0].type.symbols[1]" in refused(record(("status", enum)))
    parse(json.dumps(record(("n" * 255, "string"))), limits=LIMITS)


def test_valid_names_and_namespaces_are_accepted() -> None:
    enum = {"type": "enum", "name": "Status", "symbols": ["OPEN", "_closed2"]}
    schema = record(("_id", "long"), ("status", enum), name="shop.orders.Order_v2")
    assert parse(json.dumps(schema), limits=LIMITS).json["name"] == "shop.orders.Order_v2"


def test_field_names_equal_ignoring_case_are_refused() -> None:
    message = refused(record(("id", "long"), ("name", "string"), ("ID", "string")))
    assert "$.fields[2].name" in message and "$.fields[0]" in message
    assert "ignoring case" in message


def test_the_same_name_in_different_records_is_accepted() -> None:
    inner = record(("id", "long"), name="Line")
    parse(json.dumps(record(("id", "long"), ("line", inner))), limits=LIMITS)


@pytest.mark.parametrize("name", ["_hub_offset", "_HUB_partition", "_Hub_x"])
def test_field_names_starting_with_the_hub_prefix_are_refused(name: str) -> None:
    message = refused(record(("id", "long"), (name, "long")))
    assert "$.fields[1].name" in message and "reserved" in message and "_hub_" in message


# --- unions -----------------------------------------------------------------------------------


def test_a_union_directly_inside_a_union_is_refused() -> None:
    message = refused(record(("amount", ["null", ["int", "long"]])))
    assert "$.fields[0].type[1]" in message and "union directly inside a union" in message


def test_two_union_branches_of_the_same_type_are_refused() -> None:
    message = refused(record(("amount", ["null", "long", {"type": "long"}])))
    assert "$.fields[0].type[2]" in message and "'long'" in message


def test_two_union_branches_with_the_same_full_name_are_refused() -> None:
    first = record(("id", "long"), name="Line", namespace="shop")
    message = refused(record(("line", ["null", first, "shop.Line"])))
    assert "$.fields[0].type[2]" in message and "'shop.Line'" in message


def test_union_branches_of_different_named_types_are_accepted() -> None:
    a = record(("id", "long"), name="A")
    b = record(("id", "long"), name="B")
    parse(json.dumps(record(("x", ["null", a, b, "string"]))), limits=LIMITS)


# --- recursion --------------------------------------------------------------------------------

NODE = record(("value", "long"), ("next", ["null", "Node"]), name="Node")
INDIRECT = record(
    ("id", "long"),
    ("children", {"type": "array", "items": record(("parent", ["null", "Tree"]), name="Leaf")}),
    name="Tree",
    namespace="shop",
)


@pytest.mark.parametrize(
    ("schema", "path"),
    [(NODE, "$.fields[1].type[1]"), (INDIRECT, "$.fields[1].type.items.fields[0].type[1]")],
    ids=["direct", "indirect"],
)
@pytest.mark.parametrize("subject", ["shop.tree-value", "shop.tree-key"])
def test_recursive_types_are_refused_under_a_topics_subjects(
    schema: Any, path: str, subject: str
) -> None:
    parsed = parse(json.dumps(schema), limits=LIMITS)
    with pytest.raises(InvalidSchema) as caught:
        check_subject(parsed.resolved, subject)
    assert int(caught.value.code) == 42201
    assert f"Invalid schema at {path}:" in caught.value.message
    assert "recursive" in caught.value.message and "cannot flatten" in caught.value.message


def test_recursive_types_are_accepted_under_other_subjects() -> None:
    check_subject(parse(json.dumps(NODE), limits=LIMITS).resolved, "shop.types.Node")


def test_a_named_type_used_twice_is_not_recursion() -> None:
    line = record(("id", "long"), name="Line")
    schema = record(
        ("first", line), ("second", "Line"), ("more", {"type": "array", "items": "Line"})
    )
    check_subject(parse(json.dumps(schema), limits=LIMITS).resolved, "shop.orders-value")


# --- limits -----------------------------------------------------------------------------------


def test_a_schema_over_the_size_limit_is_refused_before_it_is_parsed() -> None:
    text = json.dumps(record(("id", "long"), doc="x" * 5_000))
    message = refused(text + " " * 10, SchemaLimits(max_bytes=4_096))
    assert "size" in message and "4,096 bytes" in message
    assert "HUB_REGISTRY_MAX_SCHEMA_BYTES" in message
    # Not JSON at all, yet refused for its size: the size comes first.
    assert "HUB_REGISTRY_MAX_SCHEMA_BYTES" in refused("{" * 5_000, SchemaLimits(max_bytes=4_096))


def test_a_schema_nested_deeper_than_the_limit_is_refused_at_the_deepest_path() -> None:
    schema: Any = "long"
    for level in range(5):
        schema = record(("inner", schema), name=f"Level{level}")
    message = refused(schema, SchemaLimits(max_depth=4))
    assert "nesting depth" in message and "is 5" in message and "limit of 4" in message
    assert "$.fields[0].type.fields[0].type.fields[0].type.fields[0].type" in message
    assert "HUB_REGISTRY_MAX_SCHEMA_DEPTH" in message
    parse(json.dumps(schema), limits=SchemaLimits(max_depth=5))


@pytest.mark.parametrize(
    "text",
    ['{"type": "array", "items": ' * 10_000 + '"long"' + "}" * 10_000, "[" * 10_000 + "]" * 10_000],
    ids=["arrays", "json"],
)
def test_an_adversarially_deep_schema_is_refused_without_recursing(text: str) -> None:
    message = refused(text, SchemaLimits(max_bytes=1_000_000))
    assert "HUB_REGISTRY_MAX_SCHEMA_DEPTH" in message


def test_a_schema_with_more_fields_than_the_limit_is_refused() -> None:
    line = record(*[(f"l{i}", "long") for i in range(6)], name="Line")
    schema = record(*[(f"f{i}", "long") for i in range(5)], ("line", line))
    message = refused(schema, SchemaLimits(max_fields=10))
    assert "number of fields" in message and "is 12" in message and "limit of 10" in message
    assert "HUB_REGISTRY_MAX_SCHEMA_FIELDS" in message


def test_an_enum_with_more_symbols_than_the_limit_is_refused() -> None:
    enum = {"type": "enum", "name": "Code", "symbols": [f"C{i}" for i in range(11)]}
    message = refused(record(("code", enum)), SchemaLimits(max_enum_symbols=10))
    assert "$.fields[0].type.symbols" in message and "is 11" in message
    assert "HUB_REGISTRY_MAX_ENUM_SYMBOLS" in message


def test_a_schema_with_more_references_than_the_limit_is_refused() -> None:
    from registry.schema_rules import check_text

    with pytest.raises(InvalidSchema) as caught:
        check_text('"long"', SchemaLimits(max_references=2), references=3)
    assert int(caught.value.code) == 42201
    assert "number of references" in caught.value.message and "is 3" in caught.value.message
    assert "HUB_REGISTRY_MAX_SCHEMA_REFERENCES" in caught.value.message


def test_stored_schemas_are_parsed_without_the_rules() -> None:
    # A schema registered before a rule existed keeps resolving by its id.
    parse(json.dumps(record(("a b", "long"), ("_hub_x", "long"))))


# --- compatibility of large schemas, in time close to linear ------------------------------------


def test_compatibility_of_thousand_symbol_enums_that_differ_completes() -> None:
    old = {"type": "enum", "name": "Code", "symbols": [f"A{i}" for i in range(1_000)]}
    new = {"type": "enum", "name": "Code", "symbols": [f"B{i}" for i in range(1_000)]}
    report = check([old], new, CompatibilityMode.FULL_TRANSITIVE)
    assert not report.compatible
    assert "'A999'" in report.messages()[0]


def test_compatibility_of_two_thousand_field_records_completes() -> None:
    old = record(*[(f"f{i}", "int") for i in range(2_000)])
    new = record(*[(f"f{i}", "long") for i in reversed(range(2_000))])
    assert check([old], new, CompatibilityMode.BACKWARD).compatible
    report = check([old], new, CompatibilityMode.FORWARD)
    assert len(report.incompatibilities) == 2_000


# --- the parse cache is bounded by bytes ---------------------------------------------------------


def test_the_parse_cache_keeps_at_most_its_bytes_evicting_the_least_recently_used(
    hub_engine: Engine,
) -> None:
    texts = {name: json.dumps(record(("id", "long"), name=name)) for name in "ABC"}
    one = _parsed_size(parse(texts["A"]))  # each of the three counts for as much
    registry = RegistryService(SchemaStore(hub_engine), parse_cache_bytes=one * 5 // 2)
    first = {name: registry.parse(text) for name, text in texts.items()}

    # Two fit: "A", the least recently used, made room for "C".
    assert registry.parse(texts["B"]) is first["B"]
    assert registry.parse(texts["C"]) is first["C"]
    assert registry.parse(texts["A"]) is not first["A"]

    huge = json.dumps(record(*[(f"f{i}", "long") for i in range(100)], name="Huge"))
    assert registry.parse(huge) is not registry.parse(huge)  # larger than the budget: not kept
    assert registry.parse(texts["C"]) is first["C"]  # and nothing was dropped for it


# --- decimals -----------------------------------------------------------------------------------


def decimal(precision: Any = 10, scale: Any = 2, **extra: Any) -> dict[str, Any]:
    """A `bytes` decimal, or with `type`/`name`/`size` in `extra` a `fixed` one."""
    schema = {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    schema.update(extra)
    return {k: v for k, v in schema.items() if v is not None}


@pytest.mark.parametrize("kind", ["bytes", "fixed"])
@pytest.mark.parametrize("subject", ["shop.orders-value", "shop.orders-key"])
def test_a_decimal_wider_than_sparks_38_digits_is_refused_under_a_topics_subjects(
    kind: str, subject: str
) -> None:
    wide = decimal(
        40, 18, **({"type": "fixed", "name": "Wide", "size": 17} if kind == "fixed" else {})
    )
    parsed = parse(json.dumps(record(("id", "long"), ("amount", ["null", wide]))), limits=LIMITS)
    with pytest.raises(InvalidSchema) as caught:
        check_subject(parsed.resolved, subject)
    assert int(caught.value.code) == 42201
    message = caught.value.message
    assert message.startswith("Invalid schema at $.fields[1].type[1]:")
    assert "precision 40" in message and "38" in message and "Spark" in message


def test_a_decimal_of_38_digits_is_accepted_under_a_topics_subject() -> None:
    widest = record(("amount", decimal(38, 18)), ("rate", decimal(38, 0)))
    check_subject(parse(json.dumps(widest), limits=LIMITS).resolved, "shop.orders-value")


def test_a_wide_decimal_is_accepted_under_other_subjects_but_not_where_a_topic_uses_it() -> None:
    money = {**decimal(40, 2), "type": "fixed", "name": "Money", "namespace": "shop", "size": 17}
    shared = parse(json.dumps(money), limits=LIMITS)
    check_subject(shared.resolved, "shop.types.Money")
    # A topic's schema gets the type inlined from its reference, and so is checked with it.
    order = parse(
        json.dumps(record(("total", "shop.Money"))),
        references=[
            (SchemaReference("shop.Money", Subject("shop.types.Money"), Version(1)), shared)
        ],
        limits=LIMITS,
    )
    with pytest.raises(InvalidSchema, match="precision 40"):
        check_subject(order.resolved, "shop.orders-value")


@pytest.mark.parametrize(
    ("schema", "path", "words"),
    [
        (decimal(0, 0), "$.fields[0].type.precision", "at least 1"),
        (decimal(None, None), "$.fields[0].type.precision", "has none"),
        (decimal("10"), "$.fields[0].type.precision", "'10'"),
        (decimal(True, 0), "$.fields[0].type.precision", "True"),
        (decimal(4, 6), "$.fields[0].type.scale", "from 0 to its precision (4)"),
        (decimal(4, -1), "$.fields[0].type.scale", "not -1"),
        (
            decimal(10, 2, type="fixed", name="Small", size=4),
            "$.fields[0].type",
            "fixed of 4 bytes holds a decimal of at most 9 digits",
        ),
    ],
    ids=["zero", "missing", "text", "bool", "scale-over", "negative-scale", "fixed-small"],
)
def test_decimals_outside_the_avro_specification_are_refused_under_every_subject(
    schema: dict[str, Any], path: str, words: str
) -> None:
    message = refused(record(("amount", schema)))
    assert message.startswith(f"Invalid schema at {path}:")
    assert words in message and "Avro specification" in message


def test_a_fixed_decimal_refusal_names_the_size_that_holds_the_precision() -> None:
    message = refused(record(("amount", decimal(10, 2, type="fixed", name="Small", size=4))))
    assert "Make it 5 bytes" in message
    parse(
        json.dumps(record(("amount", decimal(10, 2, type="fixed", name="Small", size=5)))),
        limits=LIMITS,
    )


@pytest.mark.parametrize(
    ("schema", "path"),
    [
        (decimal(10**400), "$.fields[0].type.precision"),
        (decimal(10, 2, type="fixed", name="Huge", size=10**400), "$.fields[0].type.size"),
    ],
    ids=["precision", "size"],
)
def test_decimal_numbers_beyond_avro_javas_ints_are_refused_not_failed_on(
    schema: dict[str, Any], path: str
) -> None:
    assert refused(record(("amount", schema))).startswith(f"Invalid schema at {path}:")
