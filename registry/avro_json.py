"""Avro's JSON encoding to the natural JSON of the one publish path.

Confluent REST Proxy clients send values in the Avro JSON encoding: a non-null union value wrapped
as `{"<branch type name>": value}`, bytes and fixed as strings of code points 0-255, enums as
strings, and logical types as their underlying types (a timestamp-millis as a long, a decimal as
the bytes of its unscaled two's-complement integer). `from_avro_json` turns such a value into the
natural JSON that `serde.to_datum` takes, so records from either door are checked and encoded by
the same code.
"""

import base64
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from registry.avro import PRIMITIVES, full_name, named_types
from registry.errors import InvalidRecord
from registry.serde import Converter  # tells union branches apart exactly as encoding will

_NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})
# Union branches the publish path may swap without changing the value a reader gets.
_EXACT_INTEGERS = frozenset({"int", "long"})


def from_avro_json(value: Any, schema: Any, *, path: str = "$") -> Any:
    """Convert `value`, in the Avro JSON encoding of `schema` (an `AvroSchema.resolved`), to
    natural JSON; raise `InvalidRecord` naming the path of the first mismatch."""
    return _Reader(schema).read(value, schema, path, namespace=None)


class _Reader:
    """Walks a schema and an Avro-JSON value together."""

    def __init__(self, schema: Any) -> None:
        # Every named type up front: a type may be defined in a field the value leaves out.
        self._named: dict[str, Any] = named_types(schema)

    def read(self, value: Any, schema: Any, path: str, *, namespace: str | None) -> Any:
        if isinstance(schema, list):
            return self._union(value, schema, path, namespace)
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return _primitive(value, schema, path)
            name = self._resolve(schema, namespace, path)
            return self.read(value, self._named[name], path, namespace=namespace)
        kind = schema["type"]
        if _is(kind, _NAMED_KINDS):
            namespace = _namespace_of(schema, namespace)
        if kind == "bytes" and schema.get("logicalType") == "decimal":
            return _decimal(value, schema, path)
        if _is(kind, PRIMITIVES):
            return _primitive(value, kind, path)
        if kind in ("record", "error"):
            return self._record(value, schema, path, namespace)
        if kind == "enum":
            return _enum(value, schema, path)
        if kind == "fixed":
            raw = _code_points(value, path, f"fixed '{schema['name']}'")
            if len(raw) != schema["size"]:
                raise InvalidRecord(
                    f"{path}: expected {schema['size']} bytes for fixed '{schema['name']}', "
                    f"got {len(raw)}.",
                    path=path,
                )
            return base64.b64encode(raw).decode("ascii")
        if kind == "array":
            if not isinstance(value, list):
                raise _type_error(path, "an array", value)
            return [
                self.read(item, schema["items"], f"{path}[{i}]", namespace=namespace)
                for i, item in enumerate(value)
            ]
        if kind == "map":
            if not isinstance(value, Mapping):
                raise _type_error(path, "an object (map)", value)
            return {
                key: self.read(item, schema["values"], f"{path}.{key}", namespace=namespace)
                for key, item in value.items()
            }
        # {"type": <another schema>}: a nested declaration or a named type's name.
        return self.read(value, kind, path, namespace=namespace)

    def _record(
        self, value: Any, schema: Mapping[str, Any], path: str, namespace: str | None
    ) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise _type_error(path, f"an object (record '{schema['name']}')", value)
        fields = {f["name"]: f for f in schema["fields"]}
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise InvalidRecord(
                f"{path}: unknown field(s) {', '.join(unknown)}; record '{schema['name']}' has "
                f"{', '.join(sorted(fields))}.",
                path=f"{path}.{unknown[0]}",
            )
        # Fields left out stay out: the publish path fills in defaults or names the missing one.
        return {
            name: self.read(item, fields[name]["type"], f"{path}.{name}", namespace=namespace)
            for name, item in value.items()
        }

    def _union(self, value: Any, branches: list[Any], path: str, namespace: str | None) -> Any:
        labels = [self._labels(b, namespace) for b in branches]
        if value is None:
            if any("null" in names for names in labels):
                return None
            raise InvalidRecord(
                f"{path}: null is not allowed here; the union's types are {_listing(labels)}.",
                path=path,
            )
        if not isinstance(value, Mapping) or len(value) != 1:
            raise _type_error(
                path,
                'a union value wrapped as {"<type>": value} with <type> one of '
                + _listing([n for n in labels if n[0] != "null"]),
                value,
            )
        ((label, inner),) = value.items()
        for index, names in enumerate(labels):
            if label in names and names[0] != "null":
                natural = self.read(inner, branches[index], path, namespace=namespace)
                self._check_branch_kept(natural, branches, labels, index, path, namespace)
                return natural
        raise InvalidRecord(
            f"{path}: {label!r} is not a type of this union; its types are {_listing(labels)}.",
            path=path,
        )

    def _check_branch_kept(
        self,
        natural: Any,
        branches: list[Any],
        labels: list[tuple[str, ...]],
        index: int,
        path: str,
        namespace: str | None,
    ) -> None:
        """Natural JSON names no branch: the publish path writes a union value under the first
        branch that accepts it, so an earlier branch that accepts it would change its type."""
        chosen = labels[index][0]
        for earlier in range(index):
            other = labels[earlier][0]
            if other == "null" or {other, chosen} <= _EXACT_INTEGERS:
                continue
            try:
                Converter(dict(self._named)).convert(
                    natural, branches[earlier], path, namespace=namespace
                )
            except (InvalidRecord, ValueError, TypeError, ArithmeticError):
                continue
            raise InvalidRecord(
                f"{path}: this {chosen!r} value cannot be published as {chosen!r}: the union's "
                f"earlier type {other!r} accepts it too, and the hub writes a union value under "
                "the first of its types that accepts it. Send a value only "
                f"{chosen!r} accepts, or use a schema whose union types do not overlap.",
                path=path,
            )

    def _labels(self, branch: Any, namespace: str | None) -> tuple[str, ...]:
        """The names a union value may be wrapped with for `branch`: its type name first."""
        if isinstance(branch, str):
            if branch in PRIMITIVES:
                return (branch,)
            name = self._resolve(branch, namespace, "$")
            return (name, name.rpartition(".")[2])
        kind = branch["type"]
        if _is(kind, _NAMED_KINDS):
            name = full_name(branch["name"], branch.get("namespace", namespace))
            return (name, name.rpartition(".")[2])
        if _is(kind, PRIMITIVES | {"array", "map"}):
            return (kind,)  # a logical type goes by its underlying type
        return self._labels(kind, namespace)

    def _resolve(self, name: str, namespace: str | None, path: str) -> str:
        """The full name a reference means: relative to the enclosing namespace first."""
        candidates = [name] if "." in name or not namespace else [f"{namespace}.{name}", name]
        for candidate in candidates:
            if candidate in self._named:
                return candidate
        raise InvalidRecord(f"{path}: unknown type '{name}' in the schema.", path=path)


def _is(kind: Any, kinds: frozenset[str]) -> bool:
    """Whether a `type` attribute (a name, or a nested schema) is one of `kinds`."""
    return isinstance(kind, str) and kind in kinds


def _namespace_of(schema: Mapping[str, Any], enclosing: str | None) -> str | None:
    name = full_name(schema["name"], schema.get("namespace", enclosing))
    return name.rpartition(".")[0] or None


def _listing(labels: list[tuple[str, ...]]) -> str:
    return ", ".join(names[0] for names in labels)


def _type_error(path: str, expected: str, value: Any) -> InvalidRecord:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return InvalidRecord(
        f"{path}: expected {expected}, got {type(value).__name__} {shown}.", path=path
    )


def _primitive(value: Any, kind: str, path: str) -> Any:
    """Primitives are the same in both encodings but bytes; ranges are checked when encoding."""
    if kind == "bytes":
        return base64.b64encode(_code_points(value, path, "bytes")).decode("ascii")
    if kind == "null":
        ok = value is None
    elif kind == "boolean":
        ok = isinstance(value, bool)
    elif kind in ("int", "long"):
        ok = not isinstance(value, bool) and (
            isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        )
    elif kind in ("float", "double"):
        ok = (not isinstance(value, bool) and isinstance(value, int | float)) or value in (
            "NaN",
            "Infinity",
            "-Infinity",
        )
    else:
        ok = isinstance(value, str)
    if not ok:
        expected = {"null": "null", "boolean": "a boolean", "string": "a string"}
        raise _type_error(path, expected.get(kind, f"a number ({kind})"), value)
    return value


def _code_points(value: Any, path: str, what: str) -> bytes:
    """Avro JSON bytes: one character per byte, code points 0-255."""
    if not isinstance(value, str):
        raise _type_error(path, f"{what} as a string of code points 0-255", value)
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError as exc:
        raise InvalidRecord(
            f"{path}: {what} must be a string of code points 0-255 (one character per byte); "
            f"character {value[exc.start]!r} at index {exc.start} is not.",
            path=path,
        ) from exc


def _enum(value: Any, schema: Mapping[str, Any], path: str) -> str:
    symbols: list[str] = schema["symbols"]
    if not isinstance(value, str) or value not in symbols:
        raise InvalidRecord(
            f"{path}: {value!r} is not a symbol of enum '{schema['name']}'; "
            f"valid symbols: {', '.join(symbols)}.",
            path=path,
        )
    return value


def _decimal(value: Any, schema: Mapping[str, Any], path: str) -> str:
    """A decimal's unscaled two's-complement big-endian bytes, as the decimal text serde takes."""
    raw = _code_points(value, path, "a decimal's unscaled two's-complement bytes")
    if not raw:
        raise InvalidRecord(
            f"{path}: a decimal needs at least one byte of its unscaled value.", path=path
        )
    unscaled = int.from_bytes(raw, "big", signed=True)
    return format(Decimal(unscaled).scaleb(-int(schema.get("scale", 0))), "f")
