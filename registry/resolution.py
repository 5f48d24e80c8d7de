"""Avro schemas as JSON values, resolved into the graph of types the compatibility rules walk.

A schema arrives as `json.loads` gives it: strings, lists and dicts, where a named type is
defined once and then referred to by name. `resolve` turns that into one node per type, with
every reference pointing at its definition's node, so that recursive types become cycles and a
type's identity is its node's identity.

Names follow the Avro specification: a dotted name is a full name; otherwise the `namespace`
attribute applies, else the namespace of the nearest enclosing named type. Aliases without a
dot are relative to the namespace of the type that declares them, as Avro Java reads them. A
reference without a dot is looked up in the enclosing namespace first and then in the null
namespace, which is Avro Java's fallback too.
"""

from dataclasses import dataclass, field
from typing import Any

from registry.errors import InvalidSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


@dataclass(frozen=True, slots=True)
class PrimitiveSchema:
    """A primitive type; a logical type annotation is kept only to describe it."""

    type: str
    logical_type: str | None = None


@dataclass(frozen=True, slots=True, eq=False)
class ArraySchema:
    items: "Node"


@dataclass(frozen=True, slots=True, eq=False)
class MapSchema:
    values: "Node"


@dataclass(frozen=True, slots=True, eq=False)
class UnionSchema:
    branches: tuple["Node", ...]


@dataclass(frozen=True, slots=True, eq=False)
class EnumSchema:
    fullname: str
    name: str
    aliases: frozenset[str]
    symbols: tuple[str, ...]
    default: str | None


@dataclass(frozen=True, slots=True, eq=False)
class FixedSchema:
    fullname: str
    name: str
    aliases: frozenset[str]
    size: int


@dataclass(frozen=True, slots=True, eq=False)
class Field:
    name: str
    aliases: tuple[str, ...]
    type: "Node"
    has_default: bool
    default: Any = None  # as written in the schema; meaningful only when `has_default`


@dataclass(slots=True, eq=False)
class RecordSchema:
    """A record; its fields are filled in after it is registered, so it can refer to itself."""

    fullname: str
    name: str
    aliases: frozenset[str]
    fields: tuple[Field, ...] = field(default=(), repr=False)
    _by_name: dict[str, Field] = field(default_factory=dict, init=False, repr=False)
    _indexed: tuple[Field, ...] = field(default=(), init=False, repr=False)

    def field_named(self, name: str) -> Field | None:
        """The field called `name` (its own name, not an alias), if any."""
        # Indexed on first use after the fields are set: a search per reader field made
        # comparing records of thousands of fields quadratic.
        if self._indexed is not self.fields:
            self._by_name = {}
            for f in self.fields:
                self._by_name.setdefault(f.name, f)
            self._indexed = self.fields
        return self._by_name.get(name)


Named = RecordSchema | EnumSchema | FixedSchema
Node = PrimitiveSchema | ArraySchema | MapSchema | UnionSchema | Named


_KINDS: dict[type, str] = {
    ArraySchema: "array",
    MapSchema: "map",
    UnionSchema: "union",
    EnumSchema: "enum",
    FixedSchema: "fixed",
    RecordSchema: "record",
}


def resolve(schema: Any) -> Node:
    """Resolve a JSON schema into its type graph; raise `InvalidSchema` naming what is wrong."""
    return _Resolver().node(schema, namespace="", path="")


def kind_of(node: Node) -> str:
    """The Avro type name of a node: `int`, `record`, `union`, ..."""
    if isinstance(node, PrimitiveSchema):
        return node.type
    return _KINDS[type(node)]


def describe(node: Node) -> str:
    """A short, quoted description for messages: `'int'`, `record 'ns.Address'`."""
    if isinstance(node, RecordSchema | EnumSchema | FixedSchema):
        return f"{kind_of(node)} '{node.fullname}'"
    return f"'{type_expression(node)}'"


def type_expression(node: Node) -> str:
    """A compact type expression: `int`, `array<string>`, `union<null, ns.Address>`."""
    if isinstance(node, PrimitiveSchema):
        return node.type
    if isinstance(node, ArraySchema):
        return f"array<{type_expression(node.items)}>"
    if isinstance(node, MapSchema):
        return f"map<{type_expression(node.values)}>"
    if isinstance(node, UnionSchema):
        return f"union<{', '.join(type_expression(b) for b in node.branches)}>"
    return node.fullname


class _Resolver:
    """One pass over a schema document, in document order, as Avro parsers read it."""

    def __init__(self) -> None:
        self._names: dict[str, Named] = {}

    def node(self, schema: Any, *, namespace: str, path: str) -> Node:
        if isinstance(schema, str):
            return self._reference(schema, namespace=namespace, path=path)
        if isinstance(schema, list):
            branches = tuple(
                self.node(branch, namespace=namespace, path=f"{path}/{index}")
                for index, branch in enumerate(schema)
            )
            return UnionSchema(branches)
        if isinstance(schema, dict):
            return self._complex(schema, namespace=namespace, path=path)
        raise _invalid(path, f"a schema must be a string, a list or an object, not {schema!r}")

    def _reference(self, name: str, *, namespace: str, path: str) -> Node:
        if name in PRIMITIVES:
            return PrimitiveSchema(name)
        candidates = [name] if "." in name else [_join(namespace, name), name]
        for candidate in candidates:
            if candidate in self._names:
                return self._names[candidate]
        raise _invalid(
            path,
            f"unknown type '{name}'; use a primitive type or the name of a named type "
            "defined earlier in the schema",
        )

    def _complex(self, schema: dict[str, Any], *, namespace: str, path: str) -> Node:
        kind = schema.get("type")
        if isinstance(kind, list | dict):
            # A nested schema in the `type` slot; lenient, as Avro Java accepts it in places.
            return self.node(kind, namespace=namespace, path=f"{path}/type")
        if not isinstance(kind, str):
            raise _invalid(path, "an object schema needs a string 'type'")
        if kind in PRIMITIVES:
            logical = schema.get("logicalType")
            return PrimitiveSchema(kind, logical if isinstance(logical, str) else None)
        if kind == "array":
            items = self._required(schema, "items", path)
            return ArraySchema(self.node(items, namespace=namespace, path=f"{path}/items"))
        if kind == "map":
            values = self._required(schema, "values", path)
            return MapSchema(self.node(values, namespace=namespace, path=f"{path}/values"))
        if kind in ("record", "error", "enum", "fixed"):
            return self._named(kind, schema, namespace=namespace, path=path)
        # `{"type": "Address"}` refers to a named type, as a bare "Address" does.
        return self._reference(kind, namespace=namespace, path=f"{path}/type")

    def _named(self, kind: str, schema: dict[str, Any], *, namespace: str, path: str) -> Named:
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise _invalid(path, f"a {kind} needs a non-empty string 'name'")
        if "." in name:
            space, _, short = name.rpartition(".")
        else:
            declared = schema.get("namespace", namespace)
            space, short = (declared if isinstance(declared, str) else ""), name
        fullname = _join(space, short)
        if fullname in self._names or fullname in PRIMITIVES:
            raise _invalid(path, f"the name '{fullname}' is defined twice")
        aliases = frozenset(
            alias if "." in alias else _join(space, alias)
            for alias in _strings(schema.get("aliases"), path=f"{path}/aliases")
        )
        node: Named
        if kind == "enum":
            symbols = tuple(_strings(self._required(schema, "symbols", path), path=path))
            default = schema.get("default")
            node = EnumSchema(
                fullname,
                short,
                aliases,
                symbols,
                default if isinstance(default, str) and default in symbols else None,
            )
        elif kind == "fixed":
            size = self._required(schema, "size", path)
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise _invalid(f"{path}/size", "a fixed size must be a non-negative integer")
            node = FixedSchema(fullname, short, aliases, size)
        else:
            node = RecordSchema(fullname, short, aliases)
        self._names[fullname] = node
        if isinstance(node, RecordSchema):
            node.fields = self._fields(schema, namespace=space, path=path)
        return node

    def _fields(self, record: dict[str, Any], *, namespace: str, path: str) -> tuple[Field, ...]:
        fields = self._required(record, "fields", path)
        if not isinstance(fields, list):
            raise _invalid(f"{path}/fields", "a record's 'fields' must be a list")
        resolved = []
        for index, spec in enumerate(fields):
            where = f"{path}/fields/{index}"
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                raise _invalid(where, "a field must be an object with a string 'name'")
            field_type = self.node(
                self._required(spec, "type", where), namespace=namespace, path=f"{where}/type"
            )
            aliases = tuple(_strings(spec.get("aliases"), path=f"{where}/aliases"))
            resolved.append(
                Field(spec["name"], aliases, field_type, "default" in spec, spec.get("default"))
            )
        return tuple(resolved)

    @staticmethod
    def _required(schema: dict[str, Any], key: str, path: str) -> Any:
        if key not in schema:
            raise _invalid(path, f"a {schema.get('type')} needs '{key}'")
        return schema[key]


def _join(namespace: str, name: str) -> str:
    return f"{namespace}.{name}" if namespace else name


def _strings(value: Any, *, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid(path, "expected a list of strings")
    return value


def _invalid(path: str, problem: str) -> InvalidSchema:
    return InvalidSchema(f"Invalid schema at '{path or '/'}': {problem}.")
