from typing import Any

import pytest

from registry.compatibility import (
    CompatibilityReport,
    Direction,
    Incompatibility,
    IncompatibilityKind,
    check,
    reader_can_read,
)
from registry.errors import InvalidSchema
from registry.types import CompatibilityMode

pytestmark = pytest.mark.unit

K = IncompatibilityKind
M = CompatibilityMode


def field(name: str, type_: Any, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **extra}


def record(name: str, *fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def enum(name: str, *symbols: str, **extra: Any) -> dict[str, Any]:
    return {"type": "enum", "name": name, "symbols": list(symbols), **extra}


def fixed(name: str, size: int, **extra: Any) -> dict[str, Any]:
    return {"type": "fixed", "name": name, "size": size, **extra}


def array(items: Any) -> dict[str, Any]:
    return {"type": "array", "items": items}


def map_of(values: Any) -> dict[str, Any]:
    return {"type": "map", "values": values}


def kinds(reader: Any, writer: Any) -> list[IncompatibilityKind]:
    return [incompatibility.kind for incompatibility in reader_can_read(reader, writer)]


PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
PROMOTIONS = {
    ("long", "int"),
    ("float", "int"),
    ("float", "long"),
    ("double", "int"),
    ("double", "long"),
    ("double", "float"),
    ("bytes", "string"),
    ("string", "bytes"),
}


@pytest.mark.parametrize("reader", PRIMITIVES)
@pytest.mark.parametrize("writer", PRIMITIVES)
def test_primitives_read_their_own_type_and_the_promotions_only(reader: str, writer: str) -> None:
    readable = reader == writer or (reader, writer) in PROMOTIONS
    assert kinds(reader, writer) == ([] if readable else [K.TYPE_MISMATCH])


CASES: list[tuple[str, Any, Any, list[IncompatibilityKind]]] = [
    # Logical types are annotations: only the underlying types are compared.
    ("logical type on the reader", {"type": "long", "logicalType": "timestamp-millis"}, "long", []),
    (
        "logical types differ",
        {"type": "long", "logicalType": "timestamp-micros"},
        {"type": "int", "logicalType": "date"},
        [],
    ),
    (
        "logical type over a narrower type",
        {"type": "int", "logicalType": "date"},
        "long",
        [K.TYPE_MISMATCH],
    ),
    (
        "decimal bytes reads string",
        {"type": "bytes", "logicalType": "decimal", "precision": 4},
        "string",
        [],
    ),
    # Unions
    ("reader union has the writer type", ["null", "string"], "string", []),
    ("reader union lacks the writer type", ["null", "string"], "int", [K.MISSING_UNION_BRANCH]),
    ("reader union branch promotes", ["null", "long"], "int", []),
    ("first readable branch of several", ["long", "string"], "int", []),
    ("every writer branch is readable", ["null", "string", "int"], ["int", "null"], []),
    ("writer branches promote", ["null", "double"], ["null", "int", "float"], []),
    (
        "one writer branch is not",
        ["null", "string"],
        ["null", "string", "int"],
        [K.MISSING_UNION_BRANCH],
    ),
    (
        "two writer branches are not",
        ["null"],
        ["null", "string", "int"],
        [K.MISSING_UNION_BRANCH, K.MISSING_UNION_BRANCH],
    ),
    ("non-union reader of a writer union", "long", ["int", "long"], []),
    ("non-union reader misses a branch", "string", ["null", "string"], [K.TYPE_MISMATCH]),
    ("single-branch unions", ["string"], ["string"], []),
    # Enums
    ("same symbols", enum("E", "A", "B"), enum("E", "A", "B"), []),
    ("reader adds a symbol", enum("E", "A", "B", "C"), enum("E", "A", "B"), []),
    ("symbol order is irrelevant", enum("E", "B", "A"), enum("E", "A", "B"), []),
    ("reader lacks a symbol", enum("E", "A"), enum("E", "A", "B"), [K.MISSING_ENUM_SYMBOLS]),
    (
        "reader lacks a symbol but has a default",
        enum("E", "A", "U", default="U"),
        enum("E", "A", "B"),
        [],
    ),
    ("enum renamed", enum("F", "A"), enum("E", "A"), [K.NAME_MISMATCH]),
    ("enum renamed with an alias", enum("F", "A", aliases=["E"]), enum("E", "A"), []),
    (
        "enum renamed and lacking",
        enum("F", "A"),
        enum("E", "A", "B"),
        [K.NAME_MISMATCH, K.MISSING_ENUM_SYMBOLS],
    ),
    ("enum read as string", "string", enum("E", "A"), [K.TYPE_MISMATCH]),
    # Fixed
    ("same fixed", fixed("F", 16), fixed("F", 16), []),
    ("fixed size changed", fixed("F", 16), fixed("F", 8), [K.FIXED_SIZE_MISMATCH]),
    ("fixed renamed", fixed("G", 16), fixed("F", 16), [K.NAME_MISMATCH]),
    ("fixed renamed with an alias", fixed("G", 16, aliases=["F"]), fixed("F", 16), []),
    ("fixed read as bytes", "bytes", fixed("F", 4), [K.TYPE_MISMATCH]),
    (
        "decimal fixed is still fixed",
        {**fixed("D", 8), "logicalType": "decimal", "precision": 10},
        fixed("D", 8),
        [],
    ),
    # Records
    ("same record", record("R", field("a", "int")), record("R", field("a", "int")), []),
    (
        "reader adds a field with a default",
        record("R", field("a", "int"), field("b", "string", default="x")),
        record("R", field("a", "int")),
        [],
    ),
    (
        "a null default is a default",
        record("R", field("a", "int"), field("b", ["null", "string"], default=None)),
        record("R", field("a", "int")),
        [],
    ),
    (
        "reader adds a field without a default",
        record("R", field("a", "int"), field("b", "string")),
        record("R", field("a", "int")),
        [K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    (
        "reader drops a field",
        record("R", field("a", "int")),
        record("R", field("a", "int"), field("b", "string")),
        [],
    ),
    ("field promoted", record("R", field("a", "long")), record("R", field("a", "int")), []),
    (
        "field narrowed",
        record("R", field("a", "int")),
        record("R", field("a", "long")),
        [K.TYPE_MISMATCH],
    ),
    (
        "field renamed with an alias",
        record("R", field("b", "int", aliases=["a"])),
        record("R", field("a", "int")),
        [],
    ),
    (
        "field renamed with an alias and retyped",
        record("R", field("b", "string", aliases=["a"])),
        record("R", field("a", "int")),
        [K.TYPE_MISMATCH],
    ),
    (
        "field renamed without an alias",
        record("R", field("b", "int")),
        record("R", field("a", "int")),
        [K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    (
        "writer's aliases do not count",
        record("R", field("b", "int")),
        record("R", field("a", "int", aliases=["b"])),
        [K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    ("record renamed", record("S"), record("R"), [K.NAME_MISMATCH]),
    ("record renamed with an alias", record("S", aliases=["R"]), record("R"), []),
    (
        "namespace moved: unqualified names match",
        record("R", namespace="new.ns"),
        record("R", namespace="old.ns"),
        [],
    ),
    (
        "alias names the writer's full name",
        record("S", namespace="n", aliases=["old.R"]),
        record("R", namespace="old"),
        [],
    ),
    (
        "a relative alias takes the reader's namespace",
        record("S", namespace="n", aliases=["R"]),
        record("R", namespace="n"),
        [],
    ),
    (
        "a relative alias does not match another namespace",
        record("S", namespace="n", aliases=["R"]),
        record("R", namespace="m"),
        [K.NAME_MISMATCH],
    ),
    (
        "enum default does not excuse a missing field",
        record("R", field("e", enum("E", "A", default="A"))),
        record("R"),
        [K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    (
        "every problem is reported",
        record("S", field("a", "string"), field("b", "int"), field("c", "boolean")),
        record("R", field("a", "int"), field("b", "long")),
        [K.NAME_MISMATCH, K.TYPE_MISMATCH, K.TYPE_MISMATCH, K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    # Nesting, arrays and maps
    (
        "nested record field added without default",
        record("R", field("inner", record("I", field("a", "int"), field("b", "int")))),
        record("R", field("inner", record("I", field("a", "int")))),
        [K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    ("array items promote", array("long"), array("int"), []),
    ("array items narrow", array("int"), array("long"), [K.TYPE_MISMATCH]),
    ("map values promote", map_of("double"), map_of("float"), []),
    ("map values narrow", map_of("float"), map_of("double"), [K.TYPE_MISMATCH]),
    ("array is not a map", array("int"), map_of("int"), [K.TYPE_MISMATCH]),
    (
        "array of records",
        array(record("I", field("a", "int"), field("b", "int"))),
        array(record("I", field("a", "int"))),
        [K.READER_FIELD_MISSING_DEFAULT_VALUE],
    ),
    (
        "map of unions",
        map_of(["null", "string"]),
        map_of(["null", "string", "int"]),
        [K.MISSING_UNION_BRANCH],
    ),
]


@pytest.mark.parametrize(
    ("reader", "writer", "expected"),
    [pytest.param(reader, writer, expected, id=name) for name, reader, writer, expected in CASES],
)
def test_resolution_rules(reader: Any, writer: Any, expected: list[IncompatibilityKind]) -> None:
    assert kinds(reader, writer) == expected


ADDRESS = record("Address", field("zip", "string"), namespace="com.acme")


@pytest.mark.parametrize(
    "reference",
    ["Address", "com.acme.Address", {"type": "Address"}, ["null", "Address"]],
    ids=["short name", "full name", "type object", "in a union"],
)
def test_named_types_are_found_by_reference(reference: Any) -> None:
    def schema(zip_type: str) -> dict[str, Any]:
        address = record("Address", field("zip", zip_type))
        fields = [field("home", address), field("work", reference)]
        return record("Person", *fields, namespace="com.acme")

    assert reader_can_read(schema("string"), schema("string")) == []
    problems = reader_can_read(schema("string"), schema("int"))
    assert [p.location for p in problems] == [
        "/fields/0/type/fields/0/type",
        "/fields/1/type/fields/0/type" if isinstance(reference, str | dict) else "/fields/1/type",
        *([] if isinstance(reference, str | dict) else ["/fields/1/type/1/fields/0/type"]),
    ]


def test_a_short_reference_falls_back_to_the_null_namespace() -> None:
    schema = {
        "type": "record",
        "name": "Outer",
        "fields": [
            field("plain", record("Plain", field("a", "int"))),
            field("inner", record("Inner", field("p", "Plain"), namespace="ns")),
        ],
    }
    assert reader_can_read(schema, schema) == []


def test_an_unknown_reference_is_an_invalid_schema() -> None:
    with pytest.raises(InvalidSchema, match="unknown type 'Nope'") as caught:
        reader_can_read(record("R", field("a", "Nope")), record("R"))
    assert "/fields/0/type" in caught.value.message


LINKED = record("Node", field("value", "int"), field("next", ["null", "Node"], default=None))


def test_recursive_records_terminate() -> None:
    widened = record("Node", field("value", "long"), field("next", ["null", "Node"]))
    assert reader_can_read(LINKED, LINKED) == []
    assert reader_can_read(widened, LINKED) == []
    assert [(p.kind, p.location) for p in reader_can_read(LINKED, widened)] == [
        (K.TYPE_MISMATCH, "/fields/0/type")
    ]


def test_mutually_recursive_records() -> None:
    def tree(leaf: str) -> dict[str, Any]:
        branch = record("Branch", field("children", array("Tree")))
        return record("Tree", field("leaf", leaf), field("branch", ["null", branch]))

    assert reader_can_read(tree("double"), tree("int")) == []
    problems = reader_can_read(tree("int"), tree("double"))
    assert [p.location for p in problems] == ["/fields/0/type"]


def test_a_recursive_pair_disproved_later_is_not_reused_as_compatible() -> None:
    # The writer's Q.bad is an int the reader's Q reads as a string. Checking field f1, the
    # pair P is first met inside Q while Q is still assumed compatible; Q then fails, and f1 is
    # saved by the union's other branch. Avro Java and the Python reference go on to reuse "P
    # is compatible" for f2 and accept this; data in f2.q cannot be read, so it is refused.
    def side(bad: str, *, fallback: bool) -> dict[str, Any]:
        p = record("P", field("q", ["null", "Q"]))
        q = record("Q", field("p", p), field("bad", bad))
        q2 = record("Q2", field("bad", "long"), aliases=["Q"])
        return record("T", field("f1", [q, q2] if fallback else q), field("f2", "P"))

    problems = reader_can_read(side("string", fallback=True), side("int", fallback=False))
    assert [(p.kind, p.location) for p in problems] == [
        (K.MISSING_UNION_BRANCH, "/fields/1/type/fields/0/type"),
        (K.TYPE_MISMATCH, "/fields/1/type/fields/0/type/1/fields/1/type"),
    ]


# Reasons and locations


def test_a_type_change_names_the_field_and_both_types_in_either_direction() -> None:
    old = record("Item", field("id", "long"), field("price", "int"))
    new = record("Item", field("id", "long"), field("price", "string"))

    [backward] = check([old], new, M.BACKWARD).incompatibilities
    assert backward == Incompatibility(
        K.TYPE_MISMATCH,
        "/fields/1/type",
        "field 'price' is 'string' in the new schema but 'int' in version 1; "
        "a reader expecting 'string' cannot read 'int'",
        version=1,
        direction=Direction.BACKWARD,
    )
    [forward] = check([old], new, M.FORWARD).incompatibilities
    assert forward.location == "/fields/1/type"  # in version 1, the reader here
    assert forward.reason == (
        "field 'price' is 'int' in version 1 but 'string' in the new schema; "
        "a reader expecting 'int' cannot read 'string'"
    )
    assert forward.direction is Direction.FORWARD


def test_a_missing_default_names_the_field_at_its_position() -> None:
    [problem] = reader_can_read(
        record("User", field("id", "long"), field("email", "string")),
        record("User", field("id", "long")),
    )
    assert problem.kind is K.READER_FIELD_MISSING_DEFAULT_VALUE
    assert problem.location == "/fields/1"
    assert "field 'email'" in problem.reason
    assert "no default" in problem.reason


def test_nested_locations_and_field_paths() -> None:
    def order(price: str) -> dict[str, Any]:
        line = record("Line", field("sku", "string"), field("price", price))
        return record("Order", field("lines", array(line)), field("tags", map_of(price)))

    problems = reader_can_read(order("int"), order("long"))
    assert [(p.location, p.reason.split(" is ")[0]) for p in problems] == [
        ("/fields/0/type/items/fields/1/type", "field 'lines[].price'"),
        ("/fields/1/type/values", "field 'tags{}'"),
    ]


def test_missing_symbols_are_listed() -> None:
    [problem] = reader_can_read(
        record("R", field("color", enum("Color", "RED"))),
        record("R", field("color", enum("Color", "RED", "GREEN", "BLUE"))),
    )
    assert problem.location == "/fields/0/type/symbols"
    assert "'GREEN', 'BLUE'" in problem.reason
    assert "no default symbol" in problem.reason


def test_a_union_problem_shows_the_cause_in_the_matching_branch() -> None:
    def schema(zip_type: str) -> dict[str, Any]:
        return record("P", field("home", ["null", record("Address", field("zip", zip_type))]))

    problems = reader_can_read(schema("int"), schema("string"))
    assert [(p.kind, p.location) for p in problems] == [
        (K.MISSING_UNION_BRANCH, "/fields/0/type"),
        (K.TYPE_MISMATCH, "/fields/0/type/1/fields/0/type"),
    ]
    assert "no branch that can read record 'Address'" in problems[0].reason
    assert "field 'home.zip' is 'int'" in problems[1].reason


def test_a_root_problem_is_described_as_the_root_type() -> None:
    [problem] = reader_can_read("int", ["int", "null"])
    assert problem.location == "/"
    assert problem.reason.startswith(
        "the root type is 'int' in the reader schema but can be 'null'"
    )


def test_name_and_size_problems_point_at_the_attribute() -> None:
    problems = reader_can_read(fixed("Hash", 16), fixed("Digest", 8))
    assert [(p.kind, p.location) for p in problems] == [
        (K.NAME_MISMATCH, "/name"),
        (K.FIXED_SIZE_MISMATCH, "/size"),
    ]
    assert "'Digest'" in problems[0].reason and "aliases" in problems[0].reason
    assert "16 bytes" in problems[1].reason and "8 bytes" in problems[1].reason


# Modes

V1 = record("User", field("id", "long"))
V2 = record("User", field("id", "long"), field("email", "string", default=""))
V3 = record("User", field("id", "long"), field("email", "string"))


@pytest.mark.parametrize(
    ("existing", "candidate", "mode", "compatible"),
    [
        pytest.param([V1], V3, M.NONE, True, id="NONE accepts anything"),
        pytest.param([], V3, M.FULL_TRANSITIVE, True, id="a first version is always accepted"),
        pytest.param([V1], V2, M.BACKWARD, True, id="backward: new field with a default"),
        pytest.param([V1], V3, M.BACKWARD, False, id="backward: new field without a default"),
        pytest.param([V3], V1, M.BACKWARD, True, id="backward: field removed"),
        pytest.param([V3], V1, M.FORWARD, False, id="forward: removed field the old one needs"),
        pytest.param([V2], V1, M.FORWARD, True, id="forward: removed field with a default"),
        pytest.param([V1], V3, M.FORWARD, True, id="forward: new field the old one skips"),
        pytest.param([V1], V2, M.FULL, True, id="full: new field with a default"),
        pytest.param([V1], V3, M.FULL, False, id="full: new field without a default"),
        pytest.param([V3], V1, M.FULL, False, id="full: field removed"),
        pytest.param([V1, V2], V3, M.BACKWARD, True, id="backward: only the latest"),
        pytest.param([V1, V2], V3, M.BACKWARD_TRANSITIVE, False, id="backward transitive"),
        pytest.param([V3, V2], V1, M.FORWARD, True, id="forward: only the latest"),
        pytest.param([V3, V2], V1, M.FORWARD_TRANSITIVE, False, id="forward transitive"),
        pytest.param([V1, V2], V3, M.FULL, True, id="full: only the latest"),
        pytest.param([V1, V2], V3, M.FULL_TRANSITIVE, False, id="full transitive"),
        pytest.param([V1, V2], V2, M.FULL_TRANSITIVE, True, id="full transitive, compatible"),
    ],
)
def test_modes(
    existing: list[Any], candidate: Any, mode: CompatibilityMode, compatible: bool
) -> None:
    assert check(existing, candidate, mode).compatible is compatible


def test_transitive_checks_name_the_version_that_fails() -> None:
    # v1 -> v2 and v2 -> v3 are each backward compatible; v1 -> v3 is not.
    report = check([V1, V2], V3, M.BACKWARD_TRANSITIVE, versions=[4, 7])
    [problem] = report.incompatibilities
    assert (problem.version, problem.direction) == (4, Direction.BACKWARD)
    assert "in the new schema but not in version 4" in problem.reason
    assert report.messages() == [
        "READER_FIELD_MISSING_DEFAULT_VALUE at '/fields/1': field 'email' is in the new "
        "schema but not in version 4, and has no default value to read in its place"
    ]


def test_full_transitive_reports_each_version_and_direction() -> None:
    old = record("R", field("a", "int"))
    middle = record("R", field("a", "long"))
    new = record("R", field("a", "string"))
    report = check([old, middle], new, M.FULL_TRANSITIVE)
    assert [(p.version, p.direction) for p in report.incompatibilities] == [
        (1, Direction.BACKWARD),
        (1, Direction.FORWARD),
        (2, Direction.BACKWARD),
        (2, Direction.FORWARD),
    ]


def test_version_numbers_must_match_the_schemas() -> None:
    with pytest.raises(ValueError, match="2 version numbers for 1 schemas"):
        check([V1], V2, M.BACKWARD, versions=[1, 2])


def test_an_invalid_candidate_is_reported_as_an_invalid_schema() -> None:
    with pytest.raises(InvalidSchema):
        check([V1], {"type": "record", "name": "User"}, M.BACKWARD)


def test_an_empty_report_is_compatible() -> None:
    assert CompatibilityReport().compatible
    assert CompatibilityReport().messages() == []


def test_compatibility_modes_are_confluents_names() -> None:
    assert [mode.value for mode in CompatibilityMode] == [mode.name for mode in CompatibilityMode]
    assert len(CompatibilityMode) == 7
