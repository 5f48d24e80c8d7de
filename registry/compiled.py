"""Schema-compiled conversion: natural JSON to the Avro datum, with cleaning in the same walk.

`serde.to_datum` reads the schema anew for every value, and `cleaning.clean` walks the value once
more before it. On the publish path that generic walk cost more than everything else a record
needs, so `compile_schema` turns a schema, once, into a tree of closures that converts a value and
applies its `"hub.clean"` rules in one pass. The closures keep the generic path's semantics
exactly, by construction rather than by imitation:

- a leaf takes a value of the exact Python type the generic converter returns unchanged (a `str`
  for a string, an `int` in range for a long, a `float` for a double) as it is, and hands every
  other value to the generic converter of its type, which converts it or raises the same error;
- a field's rules run through the cleaning plan's own nodes (`cleaning.plan_for`), in the same
  order as the separate pass would, and a union with rules below it is cleaned by its plan node,
  which chooses the branch as the separate pass does, before its value is converted;
- records, arrays, maps and unions raise the generic path's messages at the same paths.

`tests/unit/registry/test_compiled.py` compares the two paths on generated schemas and values.
"""

import io
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

import fastavro

from hub_core.errors import HubError
from registry.avro import AvroSchema, find_named, remember_named
from registry.binary import Write, direct_writer
from registry.cleaning import (
    ArrayNode,
    Change,
    IdentityKey,
    LeafNode,
    MapNode,
    PlanNode,
    RecordNode,
    UnionNode,
    has_rules,
    plan_for,
)
from registry.errors import InvalidRecord, NotDirect
from registry.serde import (
    LOGICAL_CONVERTERS,
    PRIMITIVE_CONVERTERS,
    convert_bytes,
    convert_enum,
    type_error,
    type_name,
)
from registry.types import SchemaId
from registry.wire import frame

# (value, the value's full path, the list cleaning appends its changes to) -> the Avro datum
Step = Callable[[Any, str, list[Change]], Any]

_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)
_NO_DEFAULT = object()


class _Never:
    """A type no value has: the fast-path type of leaves that always take the full step."""


# Primitive -> (the Python type the generic converter returns unchanged, its bounds if any);
# bytes, read from base64 text, has none.
_FAST: dict[str, tuple[type, tuple[int, int] | None]] = {
    "null": (type(None), None),
    "boolean": (bool, None),
    "int": (int, _INT),
    "long": (int, _LONG),
    "float": (float, None),
    "double": (float, None),
    "string": (str, None),
}
# Logical types read from epoch numbers in their underlying type's range.
_FAST_LOGICAL: dict[str, tuple[type, tuple[int, int] | None]] = {
    "timestamp-millis": (int, _LONG),
    "timestamp-micros": (int, _LONG),
    "local-timestamp-millis": (int, _LONG),
    "local-timestamp-micros": (int, _LONG),
    "date": (int, _INT),
}


class CompiledSchema:
    """A schema's compiled converters and encoder; cheap to call and safe to share by threads."""

    __slots__ = ("_cleaning", "_direct", "_direct_cleaned", "_parsed", "_plain")

    def __init__(self, schema: AvroSchema) -> None:
        self._parsed = schema.parsed
        self._plain = _Compiler().step(schema.resolved, None, None)
        self._cleaning = self._plain
        # Values already in their datum's shape are written directly (`registry/binary.py`);
        # cleaning may change even those, so a schema with rules is cleaned first.
        self._direct = direct_writer(schema.resolved)
        self._direct_cleaned = self._direct
        if has_rules(schema.resolved):
            self._cleaning = _cleaning_step(schema.resolved)
            self._direct_cleaned = None

    def to_datum(self, value: Any) -> Any:
        """As `serde.to_datum(value, schema)`: the datum, or `InvalidRecord` at the field."""
        return self._plain(value, "$", [])

    def clean_to_datum(self, value: Any) -> tuple[Any, tuple[Change, ...]]:
        """As `cleaning.clean` then `serde.to_datum`: the datum and the changes cleaning made."""
        changes: list[Change] = []
        datum = self._cleaning(value, "$", changes)
        return datum, tuple(changes)

    def encode(self, datum: Any, schema_id: SchemaId) -> bytes:
        """The datum as a Confluent-framed Avro message (as `serde.encode` writes it)."""
        buffer = io.BytesIO()
        buffer.write(_header(schema_id))  # the frame first: no copy of the payload to prefix it
        fastavro.schemaless_writer(buffer, self._parsed, datum)
        return buffer.getvalue()

    def clean_encode(self, value: Any, schema_id: SchemaId) -> tuple[bytes, tuple[Change, ...]]:
        """As `clean_to_datum` then `encode`: the framed message and the changes cleaning made."""
        message = _written_directly(self._direct_cleaned, value, schema_id)
        if message is not None:
            return message, ()
        datum, changes = self.clean_to_datum(value)
        return self.encode(datum, schema_id), changes

    def to_message(self, value: Any, schema_id: SchemaId) -> bytes:
        """As `to_datum` then `encode`, without cleaning: the framed message."""
        message = _written_directly(self._direct, value, schema_id)
        if message is not None:
            return message
        return self.encode(self.to_datum(value), schema_id)


def _written_directly(write: Write | None, value: Any, schema_id: SchemaId) -> bytes | None:
    """The framed message by the direct writer, or None: no writer, or `value` not in shape."""
    if write is None:
        return None
    out = bytearray(_header(schema_id))
    try:
        write(out, value)
    except NotDirect:
        return None
    return bytes(out)


def compiled(schema: AvroSchema) -> CompiledSchema:
    """The compiled form of `schema`, built once per schema object and then shared."""
    return _compiled_cached(IdentityKey(schema))


@lru_cache(maxsize=1024)
def _header(schema_id: SchemaId) -> bytes:
    return frame(schema_id, b"")


@lru_cache(maxsize=256)
def _compiled_cached(key: IdentityKey) -> CompiledSchema:
    return CompiledSchema(key.obj)


def _cleaning_step(schema: Any) -> Step:
    """The fused step; a schema whose rules do not compile fails each record, as `clean` does."""
    try:
        root = plan_for(schema).root
    except HubError as exc:
        error = exc

        def refuse(_value: Any, _path: str, _changes: list[Change]) -> Any:
            raise error

        return refuse
    return _Compiler().step(schema, None, root)


class _Compiler:
    """Walks a schema as `serde.Converter` does, beside the cleaning plan's matching node."""

    def __init__(self) -> None:
        self._named: dict[str, Any] = {}
        self._records: dict[tuple[int, str | None, int], Step] = {}

    def step(self, schema: Any, ns: str | None, node: PlanNode | None) -> Step:
        if isinstance(schema, list):
            union = self._union(schema, ns)
            if isinstance(node, UnionNode) and node.active:
                return _cleaned_union(node, union)
            return union
        if isinstance(schema, str):
            if schema in PRIMITIVE_CONVERTERS:
                fast_type, bounds = _FAST.get(schema, (_Never, None))
                return _leaf(fast_type, bounds, PRIMITIVE_CONVERTERS[schema], node)
            named = find_named(self._named, schema, ns)
            if named is None:
                return _unknown_type(schema)
            return self.step(named, ns, node)
        kind = schema["type"]
        if not isinstance(kind, str):
            return self.step(kind, ns, node)
        logical = schema.get("logicalType")
        if logical in LOGICAL_CONVERTERS and kind in LOGICAL_CONVERTERS[logical][0]:
            fast_type, bounds = _FAST_LOGICAL.get(logical, (_Never, None))
            return _leaf(fast_type, bounds, _with_schema(LOGICAL_CONVERTERS[logical][1], schema),
                         node)  # fmt: skip
        if kind in PRIMITIVE_CONVERTERS:
            fast_type, bounds = _FAST.get(kind, (_Never, None))
            return _leaf(fast_type, bounds, PRIMITIVE_CONVERTERS[kind], node)
        if kind in ("record", "error", "enum", "fixed"):
            ns = self._remember(schema, ns)
        if kind in ("record", "error"):
            return self._record(schema, ns, node)
        if kind == "enum":
            return _leaf(_Never, None, _enum(schema), node)
        if kind == "fixed":
            return _leaf(_Never, None, _fixed(schema), node)
        if kind == "array":
            items = node.items if isinstance(node, ArrayNode) and node.active else None
            return _array(self.step(schema["items"], ns, items))
        if kind == "map":
            values = node.values if isinstance(node, MapNode) and node.active else None
            return _map(self.step(schema["values"], ns, values))
        return self.step(kind, ns, node)

    def _remember(self, schema: Mapping[str, Any], ns: str | None) -> str | None:
        return remember_named(self._named, schema, ns)

    def _record(self, schema: Mapping[str, Any], ns: str | None, node: PlanNode | None) -> Step:
        key = (id(schema), ns, id(node))
        if key in self._records:  # a recursive reference: the record's own step
            return self._records[key]
        cleaned = dict(node.fields) if isinstance(node, RecordNode) and node.active else {}
        fields: list[tuple[str, str, Any, tuple[int, int] | None, Step, Any, Step | None]] = []
        step = _record(schema, fields)
        self._records[key] = step
        for field in schema["fields"]:
            name = field["name"]
            field_node = cleaned.get(name)
            fast_type, bounds = self._fast(field["type"], ns)
            if field_node is not None:
                fast_type, bounds = _Never, None  # cleaning may change even a well-typed value
            default = field.get("default", _NO_DEFAULT)
            default_step = None
            if default is not _NO_DEFAULT:
                # An Avro default for a union is given for its first branch.
                branch = field["type"][0] if isinstance(field["type"], list) else field["type"]
                default_step = self.step(branch, ns, None)
            fields.append(
                (name, f".{name}", fast_type, bounds, self.step(field["type"], ns, field_node),
                 default, default_step)
            )  # fmt: skip
        return step

    def _fast(self, schema: Any, ns: str | None) -> tuple[type, tuple[int, int] | None]:
        """The type a field's value may have to be taken as is, inline in its record."""
        if isinstance(schema, str) and schema in _FAST:
            return _FAST[schema]
        if isinstance(schema, Mapping) and isinstance(schema.get("type"), str):
            kind, logical = schema["type"], schema.get("logicalType")
            if logical in LOGICAL_CONVERTERS and kind in LOGICAL_CONVERTERS[logical][0]:
                return _FAST_LOGICAL.get(logical, (_Never, None))
            if kind in _FAST:
                return _FAST[kind]
        return _Never, None

    def _union(self, branches: list[Any], ns: str | None) -> Step:
        # Branches never clean: a union with rules below it is cleaned by its plan node first.
        steps = [self.step(branch, ns, None) for branch in branches if branch != "null"]
        takes_null = "null" in branches
        names = ", ".join(type_name(b) for b in branches)

        def union(value: Any, path: str, changes: list[Change]) -> Any:
            if value is None and takes_null:
                return None
            errors: list[str] = []
            for step in steps:
                try:
                    return step(value, path, changes)
                except InvalidRecord as exc:
                    errors.append(exc.message)
            raise InvalidRecord(
                f"{path}: value matches none of the union's types ({names}): {'; '.join(errors)}",
                path=path,
            )

        return union


def _leaf(
    fast_type: Any,
    bounds: tuple[int, int] | None,
    convert: Callable[[Any, str], Any],
    node: PlanNode | None,
) -> Step:
    if isinstance(node, LeafNode) and node.active:
        clean = node.clean

        def cleaned_leaf(value: Any, path: str, changes: list[Change]) -> Any:
            return convert(clean(value, path, changes), path)

        return cleaned_leaf
    if bounds is not None:
        low, high = bounds

        def bounded_leaf(value: Any, path: str, _changes: list[Change]) -> Any:
            if type(value) is fast_type and low <= value <= high:
                return value
            return convert(value, path)

        return bounded_leaf

    def leaf(value: Any, path: str, _changes: list[Change]) -> Any:
        if type(value) is fast_type:
            return value
        return convert(value, path)

    return leaf


def _with_schema(
    convert: Callable[[Any, str, Mapping[str, Any]], Any], schema: Mapping[str, Any]
) -> Callable[[Any, str], Any]:
    return lambda value, path: convert(value, path, schema)


def _enum(schema: Mapping[str, Any]) -> Callable[[Any, str], Any]:
    symbols = frozenset(schema["symbols"])

    def convert(value: Any, path: str) -> Any:
        if type(value) is str and value in symbols:
            return value
        return convert_enum(value, schema, path)

    return convert


def _fixed(schema: Mapping[str, Any]) -> Callable[[Any, str], Any]:
    size = schema["size"]

    def convert(value: Any, path: str) -> bytes:
        raw = convert_bytes(value, path)
        if len(raw) != size:
            raise InvalidRecord(
                f"{path}: expected {size} bytes for fixed '{schema['name']}', got {len(raw)}.",
                path=path,
            )
        return raw

    return convert


def _unknown_type(name: str) -> Step:
    def unknown(_value: Any, path: str, _changes: list[Change]) -> Any:
        raise InvalidRecord(f"Unknown type '{name}' at {path}.", path=path)

    return unknown


def _record(
    schema: Mapping[str, Any],
    fields: list[tuple[str, str, Any, tuple[int, int] | None, Step, Any, Step | None]],
) -> Step:
    """The record's step; `fields` is filled after, so that a record may contain itself."""
    record_name = schema["name"]
    known = frozenset(f["name"] for f in schema["fields"])

    def record(value: Any, path: str, changes: list[Change]) -> dict[str, Any]:
        if type(value) is not dict and not isinstance(value, Mapping):
            raise type_error(path, f"an object (record '{record_name}')", value)
        if not known.issuperset(value):
            unknown = sorted(set(value) - known)
            raise InvalidRecord(
                f"{path}: unknown field(s) {', '.join(unknown)}; record '{record_name}' has "
                f"{', '.join(sorted(known))}.",
                path=f"{path}.{unknown[0]}",
            )
        out: dict[str, Any] = {}
        for name, suffix, fast_type, bounds, step, default, default_step in fields:
            if name in value:
                item = value[name]
                if type(item) is fast_type and (bounds is None or bounds[0] <= item <= bounds[1]):
                    out[name] = item
                else:
                    out[name] = step(item, path + suffix, changes)
            elif default_step is not None:
                out[name] = default_step(default, path + suffix, changes)
            else:
                raise InvalidRecord(
                    f"{path}{suffix}: required field is missing and has no default.",
                    path=path + suffix,
                )
        return out

    return record


def _array(items: Step) -> Step:
    def array(value: Any, path: str, changes: list[Change]) -> list[Any]:
        if not isinstance(value, list):
            raise type_error(path, "an array", value)
        return [items(v, f"{path}[{i}]", changes) for i, v in enumerate(value)]

    return array


def _map(values: Step) -> Step:
    def map_(value: Any, path: str, changes: list[Change]) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise type_error(path, "an object (map)", value)
        return {k: values(v, f"{path}.{k}", changes) for k, v in value.items()}

    return map_


def _cleaned_union(node: UnionNode, union: Step) -> Step:
    clean = node.clean

    def cleaned_union(value: Any, path: str, changes: list[Change]) -> Any:
        return union(clean(value, path, changes), path, changes)

    return cleaned_union
