"""How a new Avro schema changes a bronze table: pure logic, no Spark.

Avro schemas map to the Spark SQL types `from_avro` produces, and a table's current columns
come as Spark's schema JSON (`StructType.jsonValue()`), so the same `diff` serves the loader
(before each append) and `hub load plan` (before a schema is registered).

What Delta Lake 4.0 can do with a column whose type changes, given
`delta.enableTypeWidening` on the table:

- int -> long and float -> double are applied by the append itself (schema evolution);
- int -> double is allowed only as an explicit `ALTER TABLE ... ALTER COLUMN ... TYPE`, which
  the loader runs before the append;
- every other change (int -> float, long -> float, long -> double, string <-> bytes, a
  record becoming a string, ...) cannot be applied: such records go to quarantine.
"""

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Any

# Type trees: a primitive is Spark's simple name ("int", "bigint", "decimal(10,2)");
# composites are ("struct", ((name, type, nullable), ...)), ("array", item), ("map", value).
SqlType = Any

_PRIMITIVES = {
    "null": "void",
    "boolean": "boolean",
    "int": "int",
    "long": "bigint",
    "float": "float",
    "double": "double",
    "bytes": "binary",
    "string": "string",
    "enum": "string",
    "fixed": "binary",
}
_LOGICAL = {
    "date": "date",
    "timestamp-millis": "timestamp",
    "timestamp-micros": "timestamp",
    "local-timestamp-millis": "timestamp_ntz",
    "local-timestamp-micros": "timestamp_ntz",
}
# Widenings Delta 4.0 applies during an append with schema evolution.
_AUTOMATIC = {("int", "bigint"), ("float", "double")}
# Widenings Delta 4.0 supports only through ALTER TABLE ... ALTER COLUMN ... TYPE.
_BY_ALTER = {("int", "double")}


@unique
class ChangeKind(StrEnum):
    """What a schema change does to a column of the bronze table."""

    ADD_COLUMN = "ADD_COLUMN"  # new nullable column; older rows read null
    WIDEN_TYPE = "WIDEN_TYPE"  # applied by the append (Delta schema evolution)
    WIDEN_TYPE_BY_ALTER = "WIDEN_TYPE_BY_ALTER"  # applied by ALTER COLUMN before the append
    UNSUPPORTED_TYPE_CHANGE = "UNSUPPORTED_TYPE_CHANGE"  # records go to quarantine
    COLUMN_NOT_WRITTEN = "COLUMN_NOT_WRITTEN"  # kept in the table, null in new records


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """One change to one column (a dotted path for nested struct fields)."""

    kind: ChangeKind
    column: str
    old_type: str | None
    new_type: str | None

    @property
    def applicable(self) -> bool:
        """Whether the loader can apply it to the table (else records are quarantined)."""
        return self.kind is not ChangeKind.UNSUPPORTED_TYPE_CHANGE

    def describe(self) -> str:
        """One line for a person."""
        match self.kind:
            case ChangeKind.ADD_COLUMN:
                return f"add column {self.column} {self.new_type} (older rows read null)"
            case ChangeKind.WIDEN_TYPE:
                return f"widen {self.column} {self.old_type} -> {self.new_type} (on append)"
            case ChangeKind.WIDEN_TYPE_BY_ALTER:
                return (
                    f"widen {self.column} {self.old_type} -> {self.new_type} "
                    "(ALTER COLUMN before the append)"
                )
            case ChangeKind.UNSUPPORTED_TYPE_CHANGE:
                return (
                    f"cannot change {self.column} {self.old_type} -> {self.new_type} in Delta: "
                    "such records go to quarantine"
                )
            case ChangeKind.COLUMN_NOT_WRITTEN:
                return f"column {self.column} is no longer written: kept, null in new records"


def avro_to_sql(schema: Any) -> SqlType:
    """The Spark SQL type `from_avro` gives an Avro schema (a JSON value, references resolved)."""
    return _convert(schema, {})


def record_columns(schema: Any) -> Mapping[str, tuple[SqlType, bool]]:
    """{column: (type, nullable)} of an Avro record schema, in field order."""
    sql = avro_to_sql(schema)
    if not (isinstance(sql, tuple) and sql[0] == "struct"):
        raise ValueError("a bronze table needs an Avro record schema at the top level")
    return {name: (kind, nullable) for name, kind, nullable in sql[1]}


def spark_columns(struct_json: Mapping[str, Any]) -> Mapping[str, tuple[SqlType, bool]]:
    """{column: (type, nullable)} of a Spark schema in its JSON form (`StructType.jsonValue()`)."""
    converted = _from_spark(dict(struct_json))
    return {name: (kind, nullable) for name, kind, nullable in converted[1]}


def diff(
    table: Mapping[str, tuple[SqlType, bool]], incoming: Mapping[str, tuple[SqlType, bool]]
) -> list[ColumnChange]:
    """What appending rows of `incoming` columns does to a table with `table` columns."""
    return list(_diff(table, incoming, prefix=""))


def type_name(kind: SqlType) -> str:
    """Spark's simple string of a type tree, e.g. `struct<a:int,b:array<string>>`."""
    if isinstance(kind, str):
        return kind
    tag, inner = kind
    if tag == "struct":
        return "struct<" + ",".join(f"{n}:{type_name(t)}" for n, t, _ in inner) + ">"
    if tag == "array":
        return f"array<{type_name(inner)}>"
    return f"map<string,{type_name(inner)}>"


def _diff(
    table: Mapping[str, tuple[SqlType, bool]],
    incoming: Mapping[str, tuple[SqlType, bool]],
    *,
    prefix: str,
) -> Iterator[ColumnChange]:
    existing = {name.lower(): name for name in table}
    for name, (new, _) in incoming.items():
        column = prefix + name
        if name.lower() not in existing:
            yield ColumnChange(ChangeKind.ADD_COLUMN, column, None, type_name(new))
            continue
        old = table[existing[name.lower()]][0]
        yield from _compare(column, old, new)
    incoming_names = {name.lower() for name in incoming}
    for name, (old, _) in table.items():
        if name.lower() not in incoming_names and not name.startswith("_hub_"):
            yield ColumnChange(ChangeKind.COLUMN_NOT_WRITTEN, prefix + name, type_name(old), None)


def _compare(column: str, old: SqlType, new: SqlType) -> Iterator[ColumnChange]:
    if old == new:
        return
    if isinstance(old, tuple) and isinstance(new, tuple) and old[0] == new[0]:
        tag = old[0]
        if tag == "struct":
            yield from _diff(
                {n: (t, nl) for n, t, nl in old[1]},
                {n: (t, nl) for n, t, nl in new[1]},
                prefix=f"{column}.",
            )
        else:
            suffix = "[]" if tag == "array" else "{}"
            yield from _compare(column + suffix, old[1], new[1])
        return
    pair = (old, new) if isinstance(old, str) and isinstance(new, str) else None
    if pair in _AUTOMATIC:
        kind = ChangeKind.WIDEN_TYPE
    elif pair in _BY_ALTER:
        kind = ChangeKind.WIDEN_TYPE_BY_ALTER
    elif old == "void":
        kind = ChangeKind.WIDEN_TYPE
    else:
        kind = ChangeKind.UNSUPPORTED_TYPE_CHANGE
    yield ColumnChange(kind, column, type_name(old), type_name(new))


def _convert(schema: Any, named: dict[str, SqlType]) -> SqlType:
    if isinstance(schema, list):
        return _union(schema, named)
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in named:
            return named[schema]
        short = schema.rsplit(".", 1)[-1]
        for full, kind in named.items():
            if full.rsplit(".", 1)[-1] == short:
                return kind
        raise ValueError(f"unknown named type {schema!r}")
    if not isinstance(schema, dict):
        raise ValueError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return f"decimal({schema['precision']},{schema.get('scale', 0)})"
    if logical in _LOGICAL and kind in ("int", "long"):
        return _LOGICAL[logical]
    if kind == "record" or kind == "error":
        fields: list[tuple[str, SqlType, bool]] = []
        name = _full_name(schema)
        placeholder: SqlType = ("struct", ())
        named[name] = placeholder
        for field in schema.get("fields", []):
            field_type = _convert(field["type"], named)
            fields.append((field["name"], field_type, _nullable(field["type"])))
        result: SqlType = ("struct", tuple(fields))
        named[name] = result
        return result
    if kind in ("enum", "fixed"):
        named[_full_name(schema)] = _PRIMITIVES[kind]
        return _PRIMITIVES[kind]
    if kind == "array":
        return ("array", _convert(schema["items"], named))
    if kind == "map":
        return ("map", _convert(schema["values"], named))
    return _convert(kind, named)


def _union(branches: list[Any], named: dict[str, SqlType]) -> SqlType:
    others = [b for b in branches if b != "null" and b != {"type": "null"}]
    if len(others) == 1:
        return _convert(others[0], named)
    kinds = [_convert(b, named) for b in others]
    if set(kinds) <= {"int", "bigint"} and len(kinds) == 2:
        return "bigint"
    if set(kinds) <= {"float", "double"} and len(kinds) == 2:
        return "double"
    # Spark turns other unions into a struct with one nullable member per branch.
    return ("struct", tuple((f"member{i}", k, True) for i, k in enumerate(kinds)))


def _nullable(schema: Any) -> bool:
    return (isinstance(schema, list) and "null" in schema) or schema == "null"


def _full_name(schema: Mapping[str, Any]) -> str:
    name = str(schema["name"])
    namespace = schema.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name


_SPARK_SIMPLE = {
    "integer": "int",
    "long": "bigint",
    "short": "smallint",
    "byte": "tinyint",
}


def _from_spark(kind: Any) -> SqlType:
    if isinstance(kind, str):
        return _SPARK_SIMPLE.get(kind, kind)
    tag = kind["type"]
    if tag == "struct":
        return (
            "struct",
            tuple((f["name"], _from_spark(f["type"]), bool(f["nullable"])) for f in kind["fields"]),
        )
    if tag == "array":
        return ("array", _from_spark(kind["elementType"]))
    if tag == "map":
        return ("map", _from_spark(kind["valueType"]))
    raise ValueError(f"unknown Spark type {kind!r}")
