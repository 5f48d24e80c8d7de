"""What the registry refuses in a schema it is asked to accept, so every later stage can carry it.

A schema the registry accepts for a feed is decoded by Avro Java (Spark's `spark-avro`), turned
into Spark columns and landed in Delta tables next to the hub's own `_hub_*` columns. Each rule
here is something one of those stages fails on, refused at registration instead (42201, with the
path in the schema, the rule and the fix):

- names as Avro Java enforces them: type names, namespace segments, field names and enum symbols
  match `[A-Za-z_][A-Za-z0-9_]*` (fastavro accepts `a b`; Avro Java throws
  `SchemaParseException: Illegal character`);
- field names of one record differ ignoring case (Spark and Delta resolve columns that way);
- names are at most `MAX_NAME_LENGTH` (255) characters (per dot-separated part): the metastore
  and the tools around the tables hold column names of bounded length;
- no field name starts with `_hub_`, in any case (the loaders add `_hub_partition`, ...);
- no union directly inside a union, no two union branches of the same type (the same full name,
  for named types), as the Avro specification says;
- sizes within `SchemaLimits`: the text, the nesting depth, fields, enum symbols, references;
- decimals (`bytes` or `fixed` with logicalType `decimal`) as the Avro specification says:
  precision at least 1, scale from 0 to the precision, a fixed large enough for the precision
  (see `_check_decimal` for how this departs from Avro Java);
- under a topic's subject (`T-value`, `T-key`), no recursive type: the loader flattens a value
  into columns and cannot flatten recursion, and no decimal precision over 38, the most a Spark
  or Delta decimal holds (see `check_subject`).

Aliases and custom attributes are left alone: no stage turns them into names. The rules apply
to schemas being accepted (registered, checked, given to a new feed), never to stored ones, so a
schema registered before a rule existed keeps resolving by its id.
"""

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from registry.errors import InvalidSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
RESERVED_FIELD_PREFIX = "_hub_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Characters of a name (a field name, an enum symbol, each part of a type name or namespace).
MAX_NAME_LENGTH = 255
# Digits of Spark's (and so Delta's) widest decimal, `DecimalType.MAX_PRECISION`.
SPARK_MAX_DECIMAL_PRECISION = 38
# Avro Java reads a decimal's precision and a fixed's size as Java ints.
_MAX_INT = 2**31 - 1
_NAMED = frozenset({"record", "error", "enum", "fixed"})
# A JSON string, escapes included, and the brackets that nest JSON values.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_BRACKET = re.compile(r"[\[\]{}]")
# JSON levels one level of Avro nesting may take (record, `fields`, field, union), plus slack
# for `{"type": {...}}` wrappers, defaults and custom attributes.
_JSON_LEVELS_PER_DEPTH = 4
_JSON_SLACK = 16


@dataclass(frozen=True, slots=True)
class SchemaLimits:
    """Bounds on a schema the registry accepts; each is a `HUB_REGISTRY_*` setting."""

    max_bytes: int = 256 * 1024
    max_depth: int = 32
    max_fields: int = 2_000
    max_enum_symbols: int = 1_000
    max_references: int = 100


def check_text(text: str, limits: SchemaLimits, *, references: int = 0) -> None:
    """The limits that must hold before the text is parsed: its size, how deep its JSON nests
    (so that no parser recurses without bound) and how many references it has."""
    # A character takes at least one byte, so a long text is refused without encoding it.
    size = len(text) if len(text) > limits.max_bytes else len(text.encode("utf-8"))
    if size > limits.max_bytes:
        raise _over(
            "$", "size", f"{size:,} bytes", f"{limits.max_bytes:,} bytes", "MAX_SCHEMA_BYTES"
        )
    check_references(references, limits)
    bound = limits.max_depth * _JSON_LEVELS_PER_DEPTH + _JSON_SLACK
    depth = 0
    for bracket in _JSON_BRACKET.finditer(_JSON_STRING.sub("", text)):
        if bracket.group() in "[{":
            depth += 1
            if depth > bound:
                raise InvalidSchema(
                    f"Invalid schema at $: its JSON nests more than {bound} levels deep, more "
                    f"than a schema within the nesting depth limit of {limits.max_depth} can; "
                    "flatten the schema, or raise the limit with HUB_REGISTRY_MAX_SCHEMA_DEPTH."
                )
        else:
            depth -= 1


def check_references(count: int, limits: SchemaLimits) -> None:
    """The limit on a schema's references, checked before any is fetched."""
    if count > limits.max_references:
        raise _over(
            "references", "number of references", f"{count:,}", f"{limits.max_references:,}",
            "MAX_SCHEMA_REFERENCES",
        )  # fmt: skip


def check_document(document: Any, limits: SchemaLimits) -> None:
    """Every rule on names, unions and sizes, over a schema as JSON values (references already
    inlined); raise 42201 naming the path and the rule of the first one broken."""
    _Walker(limits).walk(document)


def is_topic_subject(subject: str) -> bool:
    """Whether `subject` is a topic's value or key subject (topic-name strategy)."""
    return subject.endswith(("-value", "-key"))


def check_subject(document: Any, subject: str) -> None:
    """The rules of a topic's subject: a value or key schema has no recursive type, because the
    loader flattens it into table columns, and no decimal wider than a Spark column holds.
    Other subjects (shared types that schemas reference) may have both: a topic's schema that
    references them is checked with them inlined."""
    if not is_topic_subject(subject):
        return
    found = recursion(document)
    if found is not None:
        path, name = found
        raise InvalidSchema(
            f"Invalid schema at {path}: '{name}' refers to itself (a recursive type), which the "
            f"loader cannot flatten into table columns; schemas of topic subjects like "
            f"'{subject}' may not recur. Bound the nesting with distinct types (e.g. a fixed "
            "number of levels), or keep the tree in a string or bytes field."
        )
    _check_spark_decimals(document, subject)


def _check_spark_decimals(document: Any, subject: str) -> None:
    """42201 for a decimal of more than 38 digits: Avro allows any precision on `bytes`, but
    the loader turns a decimal into Spark's `DecimalType`, which fails above 38."""
    for path, node in _decimals(document):
        precision = node.get("precision")
        if isinstance(precision, int) and precision > SPARK_MAX_DECIMAL_PRECISION:
            raise InvalidSchema(
                f"Invalid schema at {path}: decimal precision {precision} is over "
                f"{SPARK_MAX_DECIMAL_PRECISION}, the most digits a Spark or Delta decimal "
                "holds, so the loader could not land it; decimals in schemas of topic subjects "
                f"like '{subject}' have a precision of at most {SPARK_MAX_DECIMAL_PRECISION}. "
                f"Lower the precision to {SPARK_MAX_DECIMAL_PRECISION} or less, or carry the "
                "value as a string."
            )


def _decimals(document: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(path, schema) of every decimal defined in `document` (references are not followed:
    a named type is checked where it is defined)."""
    stack: list[tuple[Any, str]] = [(document, "$")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, list):
            stack.extend((branch, f"{path}[{i}]") for i, branch in reversed(list(enumerate(node))))
        elif isinstance(node, Mapping):
            if _is_decimal(node):
                yield path, node
            stack.extend((child, where) for child, _, where in reversed(_children(node, "", path)))


def recursion(document: Any) -> tuple[str, str] | None:
    """(path, full name) of the first reference to a named type from inside its own
    definition, if any. Types are defined before they are used, so every cycle passes
    through such a reference."""
    open_names: set[str] = set()
    # Iterative: (node, namespace, path), or a marker closing a named type's definition.
    stack: list[tuple[Any, str, str] | str] = [(document, "", "$")]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            open_names.discard(item)
            continue
        node, namespace, path = item
        if isinstance(node, str):
            if node not in PRIMITIVES:
                for candidate in _candidates(node, namespace):
                    if candidate in open_names:
                        return path, candidate
            continue
        if isinstance(node, list):
            stack.extend(
                (branch, namespace, f"{path}[{i}]") for i, branch in reversed(list(enumerate(node)))
            )
            continue
        if not isinstance(node, Mapping):
            continue
        kind = node.get("type")
        if kind in _NAMED and isinstance(node.get("name"), str):
            full = _full_name(node["name"], node.get("namespace"), namespace)
            namespace = full.rpartition(".")[0]
            open_names.add(full)
            stack.append(full)
        stack.extend(reversed(_children(node, namespace, path)))
    return None


class _Walker:
    """One iterative pass over a schema document checking every rule but recursion."""

    def __init__(self, limits: SchemaLimits) -> None:
        self._limits = limits
        self._fields = 0

    def walk(self, document: Any) -> None:
        # (node, enclosing namespace, path, depth in records/arrays/maps, inside a union)
        stack: list[tuple[Any, str, str, int, bool]] = [(document, "", "$", 0, False)]
        while stack:
            node, namespace, path, depth, in_union = stack.pop()
            if isinstance(node, list):
                self._union(node, namespace, path, in_union)
                stack.extend(
                    (branch, namespace, f"{path}[{i}]", depth, True)
                    for i, branch in reversed(list(enumerate(node)))
                )
                continue
            if not isinstance(node, Mapping):
                continue
            kind = node.get("type")
            if isinstance(kind, list | dict):
                stack.append((kind, namespace, f"{path}.type", depth, in_union))
                continue
            if kind in ("record", "error", "array", "map"):
                depth += 1
                if depth > self._limits.max_depth:
                    raise _over(
                        path, "nesting depth", str(depth), str(self._limits.max_depth),
                        "MAX_SCHEMA_DEPTH", what="records, arrays and maps nested in one another",
                    )  # fmt: skip
            if kind in _NAMED and isinstance(node.get("name"), str):
                namespace = self._named(node, namespace, path)
            if kind in ("record", "error"):
                self._record(node, path)
            elif kind == "enum":
                self._enum(node, path)
            if kind == "fixed":
                _check_fixed_size(node, path)
            if _is_decimal(node):
                _check_decimal(node, path)
            stack.extend(
                (child, namespace, child_path, depth, False)
                for child, _, child_path in reversed(_children(node, namespace, path))
            )
        if self._fields > self._limits.max_fields:
            raise _over(
                "$", "number of fields", f"{self._fields:,}", f"{self._limits.max_fields:,}",
                "MAX_SCHEMA_FIELDS", what="the fields of all its records",
            )  # fmt: skip

    def _named(self, node: Mapping[str, Any], namespace: str, path: str) -> str:
        name: str = node["name"]
        declared = node.get("namespace")
        if "." not in name and isinstance(declared, str) and declared:
            _check_dotted(declared, f"{path}.namespace", "namespace")
        _check_dotted(name, f"{path}.name", f"{node['type']} name")
        return _full_name(name, declared, namespace).rpartition(".")[0]

    def _record(self, node: Mapping[str, Any], path: str) -> None:
        fields = node.get("fields")
        if not isinstance(fields, list):
            return
        self._fields += len(fields)
        seen: dict[str, tuple[int, str]] = {}
        for index, spec in enumerate(fields):
            name = spec.get("name") if isinstance(spec, Mapping) else None
            if not isinstance(name, str):
                continue
            where = f"{path}.fields[{index}].name"
            if not _is_name(name):
                raise _bad_name(where, "field name", name)
            folded = name.casefold()
            if folded.startswith(RESERVED_FIELD_PREFIX):
                raise InvalidSchema(
                    f"Invalid schema at {where}: field name '{name}' starts with "
                    f"'{RESERVED_FIELD_PREFIX}', which is reserved for the columns the hub adds "
                    "to every table (_hub_partition, _hub_offset, ...); rename the field."
                )
            if folded in seen:
                first, other = seen[folded]
                raise InvalidSchema(
                    f"Invalid schema at {where}: field name '{name}' equals field '{other}' "
                    f"({path}.fields[{first}]) ignoring case; Spark and Delta tables resolve "
                    "column names ignoring case, so field names of a record must differ in "
                    "more than case. Rename one of them."
                )
            seen[folded] = (index, name)

    def _enum(self, node: Mapping[str, Any], path: str) -> None:
        symbols = node.get("symbols")
        if not isinstance(symbols, list):
            return
        if len(symbols) > self._limits.max_enum_symbols:
            raise _over(
                f"{path}.symbols", "number of enum symbols", f"{len(symbols):,}",
                f"{self._limits.max_enum_symbols:,}", "MAX_ENUM_SYMBOLS",
            )  # fmt: skip
        for index, symbol in enumerate(symbols):
            if not isinstance(symbol, str) or not _is_name(symbol):
                raise _bad_name(f"{path}.symbols[{index}]", "enum symbol", symbol)

    @staticmethod
    def _union(branches: list[Any], namespace: str, path: str, in_union: bool) -> None:
        if in_union:
            raise InvalidSchema(
                f"Invalid schema at {path}: a union directly inside a union; the Avro "
                "specification forbids it. List its branches in the outer union instead."
            )
        seen: dict[str, int] = {}
        for index, branch in enumerate(branches):
            key = _branch_type(branch, namespace)
            if key is None:
                continue
            if key == "union":
                raise InvalidSchema(
                    f"Invalid schema at {path}[{index}]: a union directly inside a union; the "
                    "Avro specification forbids it. List its branches in the outer union instead."
                )
            if key in seen:
                raise InvalidSchema(
                    f"Invalid schema at {path}[{index}]: the union has two branches of type "
                    f"'{key}' ({path}[{seen[key]}] and {path}[{index}]); the Avro specification "
                    "allows one branch per type (per full name, for records, enums and fixed). "
                    "Remove the duplicate."
                )
            seen[key] = index


def _children(node: Mapping[str, Any], namespace: str, path: str) -> list[tuple[Any, str, str]]:
    """(child schema, namespace, path) of each schema directly inside `node`."""
    kind = node.get("type")
    if kind in ("record", "error") and isinstance(node.get("fields"), list):
        return [
            (spec["type"], namespace, f"{path}.fields[{i}].type")
            for i, spec in enumerate(node["fields"])
            if isinstance(spec, Mapping) and "type" in spec
        ]
    if kind == "array" and "items" in node:
        return [(node["items"], namespace, f"{path}.items")]
    if kind == "map" and "values" in node:
        return [(node["values"], namespace, f"{path}.values")]
    if isinstance(kind, list | dict) or (
        isinstance(kind, str) and kind not in PRIMITIVES and kind not in _NAMED
    ):
        return [(kind, namespace, f"{path}.type")]
    return []


def _is_decimal(node: Mapping[str, Any]) -> bool:
    return node.get("logicalType") == "decimal" and node.get("type") in ("bytes", "fixed")


def _check_decimal(node: Mapping[str, Any], path: str) -> None:
    """The Avro specification's rules for a decimal: precision at least 1, scale from 0 to the
    precision, and a fixed with room for the precision.

    Avro Java does not fail on a decimal that breaks them: it drops the logical type and reads
    plain bytes (`LogicalTypes.fromSchemaIgnoreInvalid`), which would land as a binary column.
    The registry refuses it instead, as fastavro, its parser, already did for a scale over the
    precision or a fixed too small: whoever wrote `decimal` meant a number, and the publish
    gateway needs the precision to check values against.
    """
    precision = node.get("precision")
    if not _is_int(precision) or not 1 <= precision <= _MAX_INT:
        raise InvalidSchema(
            f"Invalid schema at {path}.precision: a decimal's precision must be an integer of at "
            f"least 1 (the number of digits it holds), {_given(precision)}; the Avro specification "
            'requires it (and Avro Java reads it as a 32-bit int). Give it, e.g. "precision": 10.'
        )
    scale = node.get("scale", 0)
    if not _is_int(scale) or not 0 <= scale <= precision:
        raise InvalidSchema(
            f"Invalid schema at {path}.scale: a decimal's scale must be an integer from 0 to its "
            f"precision ({precision}), {_given(scale)}; the Avro specification requires it. Lower "
            "the scale, or raise the precision."
        )
    size = node.get("size")
    if node.get("type") == "fixed" and _is_int(size):
        _check_fixed_room(size, precision, path)


def _check_fixed_size(node: Mapping[str, Any], path: str) -> None:
    """A fixed's size is a count of bytes that Avro Java reads as a 32-bit int: a negative
    size or one over 2**31-1 is refused there, so the registry refuses it too (fastavro, its
    parser, would take any integer). A size that is not an integer is fastavro's to refuse."""
    size = node.get("size")
    if _is_int(size) and not 0 <= size <= _MAX_INT:
        raise InvalidSchema(
            f"Invalid schema at {path}.size: a fixed's size must be a number of bytes from 0 to "
            f"{_MAX_INT:,} (Avro Java reads it as a 32-bit int), not {size:,}; give the fixed "
            "the size of the values it holds."
        )


def _check_fixed_room(size: int, precision: int, path: str) -> None:
    """A decimal's fixed has room for its precision (its size is in range: `_check_fixed_size`
    ran first)."""
    if precision > _fixed_digits(size):
        needed = max(1, math.ceil((precision / math.log10(2) + 1) / 8))
        while _fixed_digits(needed) < precision:
            needed += 1
        raise InvalidSchema(
            f"Invalid schema at {path}: a fixed of {size} bytes holds a decimal of at most "
            f"{_fixed_digits(size)} digits, fewer than its precision {precision}; the Avro "
            f"specification requires room for them. Make it {needed} bytes, or lower the "
            "precision."
        )


def _fixed_digits(size: int) -> int:
    """The most decimal digits a two's-complement number of `size` bytes always holds."""
    return math.floor((8 * size - 1) * math.log10(2)) if size >= 1 else 0


def _given(value: Any) -> str:
    return "and it has none" if value is None else f"not {value!r}"


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _branch_type(branch: Any, namespace: str) -> str | None:
    """What a union branch is, for the one-branch-per-type rule: a primitive, array, map, the
    full name of a named type, or "union"."""
    if isinstance(branch, list):
        return "union"
    if isinstance(branch, str):
        return branch if branch in PRIMITIVES else _full_name(branch, None, namespace)
    if not isinstance(branch, Mapping):
        return None
    kind = branch.get("type")
    if isinstance(kind, list):
        return "union"
    if isinstance(kind, dict):
        return _branch_type(kind, namespace)
    if kind in _NAMED and isinstance(branch.get("name"), str):
        return _full_name(branch["name"], branch.get("namespace"), namespace)
    if isinstance(kind, str):
        return _branch_type(kind, namespace) if kind not in ("array", "map") else kind
    return None


def _full_name(name: str, declared: Any, namespace: str) -> str:
    if "." in name:
        return name
    space = declared if isinstance(declared, str) else namespace
    return f"{space}.{name}" if space else name


def _candidates(name: str, namespace: str) -> list[str]:
    return [name] if "." in name or not namespace else [f"{namespace}.{name}", name]


def _check_dotted(value: str, path: str, what: str) -> None:
    if not all(_is_name(segment) for segment in value.split(".")):
        raise _bad_name(path, what, value, dotted=True)


def _is_name(text: str) -> bool:
    return len(text) <= MAX_NAME_LENGTH and _NAME.fullmatch(text) is not None


def _bad_name(path: str, what: str, value: Any, *, dotted: bool = False) -> InvalidSchema:
    parts = " (each dot-separated part)" if dotted else ""
    if isinstance(value, str) and any(
        len(part) > MAX_NAME_LENGTH for part in (value.split(".") if dotted else [value])
    ):
        return InvalidSchema(
            f"Invalid schema at {path}: {what} '{value[:40]}...' is {len(value):,} characters "
            f"long; a name{parts} may have at most {MAX_NAME_LENGTH}. Shorten it."
        )
    return InvalidSchema(
        f"Invalid schema at {path}: {what} {value!r} breaks the Avro naming rule: a name{parts} "
        "must start with a letter or '_' and contain only letters, digits and '_' "
        "([A-Za-z_][A-Za-z0-9_]*); Avro Java, which the loader uses, refuses it. Rename it."
    )


def _over(
    path: str, limit: str, value: str, maximum: str, setting: str, *, what: str = ""
) -> InvalidSchema:
    counted = f" ({what})" if what else ""
    return InvalidSchema(
        f"Invalid schema at {path}: the schema's {limit}{counted} is {value}, over the limit of "
        f"{maximum}; make the schema smaller, or raise the limit with HUB_REGISTRY_{setting}."
    )
