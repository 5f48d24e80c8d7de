"""Parsing Avro schema text into the forms the registry stores, compares and encodes with."""

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from registry.errors import InvalidSchema
from registry.schema_rules import SchemaLimits, check_document, check_text
from registry.types import SchemaReference

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
# Attribute order of a normalized schema; anything else follows, sorted.
_KEY_ORDER = (
    "type", "name", "fields", "symbols", "items", "values", "size", "default", "order",
    "logicalType", "precision", "scale", "doc", "aliases",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class AvroSchema:
    """A parsed Avro schema.

    `canonical` is the text stored and served (compact JSON, every attribute kept);
    `resolved` is self-contained: named types taken from references are inlined, so the
    compatibility engine and the encoder need nothing else.
    """

    canonical: str
    fingerprint: str
    resolved: Any
    parsed: Any = field(repr=False)
    references: tuple[SchemaReference, ...] = ()

    @property
    def json(self) -> Any:
        """The schema as JSON values (dicts, lists, strings), as stored."""
        return json.loads(self.canonical)


def parse(
    text: str,
    *,
    references: Iterable[tuple[SchemaReference, "AvroSchema"]] = (),
    normalize: bool = False,
    limits: SchemaLimits | None = None,
) -> AvroSchema:
    """Parse schema text whose named types may come from `references`; raise 42201 if invalid.

    With `limits`, the text is a schema being accepted: it must also keep the rules of
    `registry.schema_rules` (names, unions, sizes), which stored schemas are not held to.
    """
    references = tuple(references)
    if limits is not None:
        check_text(text, limits, references=len(references))
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSchema(
            f"Invalid schema: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})."
        ) from exc
    except RecursionError as exc:
        raise _too_deep() from exc
    try:
        _check_structure(document, "$")
        imported: dict[str, Any] = {}
        for _ref, schema in references:
            imported.update(named_types(schema.resolved))
        resolved = _Inliner(imported).inline(document, namespace=None)
    except RecursionError as exc:
        raise _too_deep() from exc
    if limits is not None:
        check_document(resolved, limits)
    try:
        parsed = fastavro.parse_schema(resolved, _write_hint=True)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from exc
    except RecursionError as exc:
        raise _too_deep() from exc
    if normalize:
        document = normalized(document)
    canonical = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
    refs = tuple(ref for ref, _ in references)
    # Identity ignores spelling, as Avro's own canonical text does: attribute order, a namespace
    # given apart or in the full name, `{"type": "int"}` for `"int"`. Docs, defaults and custom
    # attributes (cleaning rules) stay part of it.
    identity = fingerprint(document, refs)
    return AvroSchema(
        canonical=canonical,
        fingerprint=identity,
        resolved=resolved,
        parsed=parsed,
        references=refs,
    )


def _too_deep() -> InvalidSchema:
    # Only reachable without limits (a stored schema) or through long chains of references.
    return InvalidSchema(
        "Invalid schema at $: nested too deeply to parse; flatten the schema "
        "(HUB_REGISTRY_MAX_SCHEMA_DEPTH bounds the nesting of schemas the registry accepts)."
    )


# Attributes the specification requires, per complex type, with the JSON type they must have.
_REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    "record": (("name", str), ("fields", list)),
    "error": (("name", str), ("fields", list)),
    "enum": (("name", str), ("symbols", list)),
    "fixed": (("name", str), ("size", int)),
    "array": (("items", object),),
    "map": (("values", object),),
}


def _check_structure(node: Any, path: str) -> None:
    """Required attributes the Avro parser lets pass; raise 42201 naming where one is missing."""
    if isinstance(node, list):
        for i, branch in enumerate(node):
            _check_structure(branch, f"{path}[{i}]")
        return
    if not isinstance(node, Mapping):
        return
    kind = node.get("type")
    for attribute, expected in _REQUIRED.get(kind if isinstance(kind, str) else "", ()):
        if not isinstance(node.get(attribute), expected):
            raise InvalidSchema(
                f"Invalid schema: the {kind} at {path} needs a '{attribute}' attribute "
                f"({expected.__name__ if expected is not object else 'a schema'})."
            )
    if kind in ("record", "error"):
        for i, field in enumerate(node["fields"]):
            if not isinstance(field, Mapping) or "name" not in field or "type" not in field:
                raise InvalidSchema(
                    f"Invalid schema: field {i} of record '{node['name']}' at {path} needs "
                    "a 'name' and a 'type'."
                )
            _check_structure(field["type"], f"{path}.{field['name']}")
    elif kind == "array":
        _check_structure(node["items"], f"{path}[]")
    elif kind == "map":
        _check_structure(node["values"], f"{path}{{}}")
    elif isinstance(kind, dict | list):
        _check_structure(kind, path)


def fingerprint(document: Any, references: tuple[SchemaReference, ...] = ()) -> str:
    """A schema's identity: its normal form and its references, hashed."""
    return _fingerprint(
        json.dumps(normalized(document), separators=(",", ":"), ensure_ascii=False), references
    )


def _fingerprint(canonical: str, references: tuple[SchemaReference, ...]) -> str:
    digest = hashlib.sha256(canonical.encode("utf-8"))
    for ref in references:
        digest.update(f"\0{ref.name}\0{ref.subject}\0{ref.version}".encode())
    return digest.hexdigest()


def full_name(name: str, namespace: str | None) -> str:
    """The full name of a named type: dotted names are already full."""
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def remember_named(
    named: dict[str, Any], schema: Mapping[str, Any], namespace: str | None
) -> str | None:
    """Put a named type (record, enum, fixed) met in a schema walk into `named`, under its full
    name and, unless taken, its short one; returns the namespace its inner names resolve in."""
    full = full_name(schema["name"], schema.get("namespace", namespace))
    named[full] = schema
    named.setdefault(schema["name"], schema)
    return full.rpartition(".")[0] or None


def find_named(named: Mapping[str, Any], name: str, namespace: str | None) -> Any | None:
    """The named type a reference `name` means in `namespace`, from `remember_named`'s map."""
    return named.get(name) or named.get(f"{namespace}.{name}")


def named_types(schema: Any, namespace: str | None = None) -> dict[str, Any]:
    """Every named type defined in `schema`, by full name, with names made full."""
    found: dict[str, Any] = {}

    def walk(node: Any, ns: str | None) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch, ns)
        elif isinstance(node, Mapping):
            kind = node.get("type")
            if kind in _NAMED and "name" in node:
                name = full_name(node["name"], node.get("namespace", ns))
                ns = name.rpartition(".")[0] or None
                found[name] = {**node, "name": name}
                found[name].pop("namespace", None)
            for child in _children(node):
                walk(child, ns)

    walk(schema, namespace)
    return found


def _children(node: Mapping[str, Any]) -> list[Any]:
    kind = node.get("type")
    if kind in ("record", "error"):
        return [f.get("type") for f in node.get("fields", []) if isinstance(f, Mapping)]
    if kind == "array":
        return [node.get("items")]
    if kind == "map":
        return [node.get("values")]
    if isinstance(kind, dict | list):
        return [kind]
    return []


class _Inliner:
    """Replaces the first use of each referenced type name by its definition."""

    def __init__(self, imported: dict[str, Any]) -> None:
        self._imported = imported
        self._defined: set[str] = set()

    def inline(self, node: Any, namespace: str | None) -> Any:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            name = node if node in self._imported else full_name(node, namespace)
            if name in self._imported and name not in self._defined:
                definition = self._imported[name]
                self._defined.add(name)
                return self.inline(definition, namespace)
            return node
        if isinstance(node, list):
            return [self.inline(branch, namespace) for branch in node]
        if not isinstance(node, Mapping):
            return node
        kind = node.get("type")
        out = dict(node)
        if kind in _NAMED and isinstance(node.get("name"), str):
            name = full_name(node["name"], node.get("namespace", namespace))
            self._defined.add(name)
            namespace = name.rpartition(".")[0] or None
        if kind in ("record", "error") and isinstance(node.get("fields"), list):
            out["fields"] = [
                {**f, "type": self.inline(f.get("type"), namespace)}
                if isinstance(f, Mapping)
                else f
                for f in node["fields"]
            ]
        elif kind == "array" and "items" in node:
            out["items"] = self.inline(node["items"], namespace)
        elif kind == "map" and "values" in node:
            out["values"] = self.inline(node["values"], namespace)
        elif isinstance(kind, dict | list | str):
            out["type"] = self.inline(kind, namespace)
        return out


def normalized(schema: Any, namespace: str | None = None) -> Any:
    """A normal form: full names, no `namespace`, fixed attribute order, bare primitives."""
    if isinstance(schema, str):
        return schema if schema in PRIMITIVES else full_name(schema, namespace)
    if isinstance(schema, list):
        return [normalized(branch, namespace) for branch in schema]
    if not isinstance(schema, Mapping):
        return schema
    node = dict(schema)
    kind = node.get("type")
    if kind in _NAMED and isinstance(node.get("name"), str):
        node["name"] = full_name(node["name"], node.pop("namespace", namespace))
        namespace = node["name"].rpartition(".")[0] or None
    else:
        node.pop("namespace", None)
    if kind in ("record", "error"):
        node["fields"] = [
            _ordered({**f, "type": normalized(f.get("type"), namespace)}) for f in node["fields"]
        ]
    elif kind == "array":
        node["items"] = normalized(node["items"], namespace)
    elif kind == "map":
        node["values"] = normalized(node["values"], namespace)
    elif isinstance(kind, dict | list):
        return (
            normalized(kind, namespace)
            if len(node) == 1
            else _ordered({**node, "type": normalized(kind, namespace)})
        )
    if kind in PRIMITIVES and len(node) == 1:
        return kind
    return _ordered(node)


def _ordered(node: dict[str, Any]) -> dict[str, Any]:
    known = [k for k in _KEY_ORDER if k in node]
    rest = sorted(k for k in node if k not in _KEY_ORDER)
    return {k: node[k] for k in (*known, *rest)}
