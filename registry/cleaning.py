"""Canonical cleaning: rules a schema declares on its fields, applied before validation.

A field declares rules in the custom attribute "hub.clean", applied in the order listed:
`{"name": "email", "type": "string", "hub.clean": ["trim", "lowercase"]}`. Cleaning changes
representation, never meaning; it runs before `registry.serde.to_datum` and leaves what it cannot
make sense of as given, for validation to reject. A field's rules apply to its value and, through
arrays, maps and unions, to each element, map value and branch value; never to a nested record's
fields, which declare their own. A rule acts only on a string of a type it serves, else (null
included) does nothing; a rule that no type of its field can use is a schema error.

    trim                   strip surrounding whitespace: string, uuid, enum, and the text forms
                           of timestamp, date, decimal and numbers (to prepare parse_number)
    collapse_whitespace    each run of whitespace becomes one space: string, uuid
    lowercase, uppercase   str.lower / str.upper: string, uuid
    enum_case_insensitive  a string equal to a symbol but for ASCII case becomes it: enum
    utc_timestamp          ISO-8601 text with an offset becomes the same instant as
                           YYYY-MM-DDTHH:MM:SS[.fraction]Z, fraction digits kept as written; text
                           without an offset is left alone: (local-)timestamp, plain string
    parse_number           numeric text becomes the number when lossless: int, long, float,
                           double; decimal is allowed and left as text, which serde reads exactly

Lossless numbers: the text is ASCII `[+-]digits[.digits][(e|E)[+-]digits]`, nothing around it.
int/long: the number is an integer in range ("42.0", "1e3" are; "1.5" is not). float/double: the
binary value Avro stores, written as its shortest round-trip decimal (what readers print), is the
very number the text denotes, `Decimal(text) == Decimal(shortest(stored))`: "0.1" qualifies,
"0.10000000000000001" does not; for float, the 32-bit value.

One pass suffices: every rule is idempotent, and `validate_rules` refuses lists a second cleaning
would change: text rules (trim, collapse_whitespace, lowercase, uppercase) before the rules that
read a token (enum_case_insensitive, utc_timestamp, parse_number); not lowercase with uppercase,
nor with utc_timestamp (it would undo the "T" and "Z").

Unions: a value is cleaned as the branch serde reads it as (the first that takes it as given, else
the first that takes it once cleaned); a cleaning after which serde would read another branch is
not applied, since the branch is part of the meaning.

What each rule does to a value is in `registry.cleaning_rules`; this module decides where rules
apply and walks values.

Cost: `compile_rules` checks the rules once and builds a plan that visits only the parts of a value
with rules below them, and returns at once when there are none. `clean` and `has_rules` keep results
per schema object (by identity, as `AvroSchema.resolved`, never mutated), so a caller passing the
same schema object pays for compiling once. The result shares unchanged parts with the input,
which is never mutated.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from registry.avro import PRIMITIVES, find_named, remember_named
from registry.cleaning_rules import Rule, Step, rule_step
from registry.errors import InvalidRecord, InvalidSchema
from registry.serde import Converter  # tells union branches apart exactly as encoding will

ATTRIBUTE = "hub.clean"


@dataclass(frozen=True, slots=True)
class Change:
    """One rewrite: where (serde's path style, `$.a.b`, `$.a[1]`), by which rule, what to what."""

    path: str
    rule: Rule
    before: Any
    after: Any


@dataclass(frozen=True, slots=True)
class Cleaned:
    """A cleaned value and every change made to it, in the order made."""

    value: Any
    changes: tuple[Change, ...]


_TEXT_RULES = (Rule.TRIM, Rule.COLLAPSE_WHITESPACE, Rule.LOWERCASE, Rule.UPPERCASE)
_NUMBERS = frozenset({"int", "long", "float", "double"})
# The kinds of value (Avro types, logical types by their own name) each rule serves.
_SERVES: dict[Rule, frozenset[str]] = {
    Rule.TRIM: frozenset({"string", "uuid", "enum", "timestamp", "date", "decimal", *_NUMBERS}),
    Rule.COLLAPSE_WHITESPACE: frozenset({"string", "uuid"}),
    Rule.LOWERCASE: frozenset({"string", "uuid"}),
    Rule.UPPERCASE: frozenset({"string", "uuid"}),
    Rule.ENUM_CASE_INSENSITIVE: frozenset({"enum"}),
    Rule.UTC_TIMESTAMP: frozenset({"timestamp", "string"}),
    Rule.PARSE_NUMBER: frozenset({*_NUMBERS, "decimal"}),
}
# As serde reads them: logicalType -> (the type it must annotate, the kind it makes).
_LOGICAL = {
    "timestamp-millis": ("long", "timestamp"),
    "timestamp-micros": ("long", "timestamp"),
    "local-timestamp-millis": ("long", "timestamp"),
    "local-timestamp-micros": ("long", "timestamp"),
    "date": ("int", "date"),
    "decimal": ("bytes", "decimal"),
    "uuid": ("string", "uuid"),
}
# Which JSON values serde can take for a kind; used to narrow a union's branches for a value.
_TAKES: dict[str, frozenset[str]] = {
    "null": frozenset({"null"}),
    "boolean": frozenset({"boolean"}),
    **dict.fromkeys(("int", "long"), frozenset({"number"})),
    **dict.fromkeys(
        ("float", "double", "timestamp", "date", "decimal"), frozenset({"number", "string"})
    ),
    **dict.fromkeys(("record", "map"), frozenset({"object"})),
    "array": frozenset({"array"}),
}  # anything else (string, uuid, enum, bytes, fixed) takes strings only


def has_rules(schema: Any) -> bool:
    """Whether any field of `schema` declares a cleaning rule; callers skip `clean` if not."""
    return _has_rules_cached(IdentityKey(schema))


def validate_rules(schema: Any) -> None:
    """Raise `InvalidSchema` (42201) naming the field, the rule and the valid rules if any
    `"hub.clean"` declaration in `schema` is malformed, unknown or cannot apply."""
    compile_rules(schema)


def compile_rules(schema: Any) -> "CleaningPlan":
    """Validate the rules of a self-contained JSON `schema` and build its cleaning plan."""
    return _Compiler().plan(schema)


def clean(value: Any, schema: Any) -> Cleaned:
    """Clean a natural-JSON `value` by the rules its `schema` declares; never mutates `value`."""
    return _plan_cached(IdentityKey(schema)).clean(value)


def plan_for(schema: Any) -> "CleaningPlan":
    """The cleaning plan of `schema`, compiled once per schema object (as `clean` uses it)."""
    return _plan_cached(IdentityKey(schema))


class CleaningPlan:
    """The compiled rules of one schema; `clean` is cheap and safe to share between threads."""

    __slots__ = ("_root",)

    def __init__(self, root: "PlanNode | None") -> None:
        self._root = root

    @property
    def active(self) -> bool:
        """Whether the schema declares any rule that can change a value."""
        return self._root is not None

    @property
    def root(self) -> "PlanNode | None":
        """The plan's tree, aligned with the schema (`registry.compiled` walks it); None if idle."""
        return self._root

    def clean(self, value: Any) -> Cleaned:
        """Clean `value`; the result shares unchanged parts with it."""
        if self._root is None:
            return Cleaned(value, ())
        changes: list[Change] = []
        return Cleaned(self._root.clean(value, "$", changes), tuple(changes))


class IdentityKey:
    """A cache key that is the schema object itself; holding it keeps its id from reuse."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IdentityKey) and other.obj is self.obj


@lru_cache(maxsize=256)
def _plan_cached(key: IdentityKey) -> CleaningPlan:
    return compile_rules(key.obj)


@lru_cache(maxsize=256)
def _has_rules_cached(key: IdentityKey) -> bool:
    return _declares(key.obj)


def _declares(node: Any) -> bool:
    if isinstance(node, list):
        return any(_declares(branch) for branch in node)
    if not isinstance(node, Mapping):
        return False
    if node.get(ATTRIBUTE):
        return True
    return any(_declares(node.get(key)) for key in ("type", "fields", "items", "values"))


# ---------------------------------------------------------------------------------------------
# Plan nodes: each returns the value itself when nothing changed, so parents copy only on write.
# They mirror the schema's shape, so `registry.compiled` can fuse them into its conversion walk.


class PlanNode:
    __slots__ = ("active", "kind")

    def __init__(self, kind: str, *, active: bool = False) -> None:
        self.kind = kind
        self.active = active

    def clean(self, value: Any, path: str, changes: list[Change]) -> Any:
        raise NotImplementedError

    def children(self) -> list["PlanNode"]:
        return []


class LeafNode(PlanNode):
    __slots__ = ("steps",)

    def __init__(self, kind: str, steps: tuple[tuple[Rule, Step], ...]) -> None:
        super().__init__(kind, active=bool(steps))
        self.steps = steps

    def clean(self, value: Any, path: str, changes: list[Change]) -> Any:
        for rule, step in self.steps:
            new = step(value)
            if new is not None:
                changes.append(Change(path, rule, value, new))
                value = new
        return value


class RecordNode(PlanNode):
    __slots__ = ("fields",)

    def __init__(self) -> None:
        super().__init__("record")
        self.fields: tuple[tuple[str, PlanNode], ...] = ()

    def children(self) -> list[PlanNode]:
        return [node for _, node in self.fields]

    def clean(self, value: Any, path: str, changes: list[Change]) -> Any:
        if not _is_mapping(value):
            return value
        out: dict[str, Any] | None = None
        for name, node in self.fields:
            if name in value:
                old = value[name]
                new = node.clean(old, f"{path}.{name}", changes)
                if new is not old:
                    if out is None:
                        out = dict(value)
                    out[name] = new
        return value if out is None else out


class ArrayNode(PlanNode):
    __slots__ = ("items",)

    def __init__(self, items: PlanNode) -> None:
        super().__init__("array")
        self.items = items

    def children(self) -> list[PlanNode]:
        return [self.items]

    def clean(self, value: Any, path: str, changes: list[Change]) -> Any:
        if not isinstance(value, list):
            return value
        out: list[Any] | None = None
        for i, old in enumerate(value):
            new = self.items.clean(old, f"{path}[{i}]", changes)
            if new is not old:
                if out is None:
                    out = list(value)
                out[i] = new
        return value if out is None else out


class MapNode(PlanNode):
    __slots__ = ("values",)

    def __init__(self, values: PlanNode) -> None:
        super().__init__("map")
        self.values = values

    def children(self) -> list[PlanNode]:
        return [self.values]

    def clean(self, value: Any, path: str, changes: list[Change]) -> Any:
        if not _is_mapping(value):
            return value
        out: dict[str, Any] | None = None
        for key, old in value.items():
            new = self.values.clean(old, f"{path}.{key}", changes)
            if new is not old:
                if out is None:
                    out = dict(value)
                out[key] = new
        return value if out is None else out


@dataclass(frozen=True, slots=True)
class _Branch:
    schema: Any
    node: PlanNode


class UnionNode(PlanNode):
    __slots__ = ("branches", "by_json", "named", "namespace")

    def __init__(self, named: dict[str, Any], namespace: str | None) -> None:
        super().__init__("union")
        self.branches: list[_Branch] = []
        self.by_json: dict[str, tuple[_Branch, ...]] = {}
        self.named = named
        self.namespace = namespace

    def children(self) -> list[PlanNode]:
        return [b.node for b in self.branches]

    def clean(self, value: Any, path: str, changes: list[Change]) -> Any:
        if value is None:
            return value
        candidates = self.by_json.get(_json_kind(value), ())
        if len(candidates) == 1:
            only = candidates[0].node
            return only.clean(value, path, changes) if only.active else value
        chosen = self._reads_as(value)
        for branch in candidates if chosen is None else (chosen,):
            if branch.node.active:
                trial: list[Change] = []
                new = branch.node.clean(value, path, trial)
                if new is not value and self._reads_as(new) is branch:
                    changes.extend(trial)
                    return new
        return value

    def _reads_as(self, value: Any) -> _Branch | None:
        """The branch serde reads `value` as: the first that converts it."""
        for branch in self.by_json.get(_json_kind(value), ()):
            try:
                Converter(dict(self.named)).convert(
                    value, branch.schema, "$", namespace=self.namespace
                )
            except (InvalidRecord, ValueError, TypeError, ArithmeticError):
                continue
            return branch
        return None


def _json_kind(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if _is_mapping(value):
        return "object"
    if isinstance(value, list):
        return "array"
    return "other"


def _is_mapping(value: Any) -> bool:
    return type(value) is dict or isinstance(value, Mapping)  # skip the slow ABC check for JSON


# ---------------------------------------------------------------------------------------------
# Compiling: walk the schema as serde does, naming fields by path, and validate as we go.


class _Compiler:
    def __init__(self) -> None:
        self._named: dict[str, Any] = {}  # filled as serde's converter fills its own
        self._records: dict[int, RecordNode] = {}  # by id() of the record's definition
        self._nodes: list[PlanNode] = []

    def plan(self, schema: Any) -> CleaningPlan:
        root = self._node(schema, (), "$", None, set())
        self._settle()
        return CleaningPlan(root if root.active else None)

    def _settle(self) -> None:
        """Mark containers active when anything below them is (records may be recursive)."""
        changed = True
        while changed:
            changed = False
            for node in self._nodes:
                if not node.active and any(child.active for child in node.children()):
                    node.active = changed = True
        for node in self._nodes:
            if isinstance(node, RecordNode):
                node.fields = tuple((name, n) for name, n in node.fields if n.active)

    def _node(
        self, schema: Any, rules: tuple[Rule, ...], path: str, ns: str | None, kinds: set[str]
    ) -> PlanNode:
        if isinstance(schema, list):
            return self._union(schema, rules, path, ns, kinds)
        if isinstance(schema, str):
            if schema in PRIMITIVES:
                return self._leaf(schema, {}, rules, path, kinds)
            named = find_named(self._named, schema, ns)
            if named is None:
                raise InvalidSchema(f"Invalid schema: unknown type '{schema}' at {path}.")
            if named["type"] in ("record", "error"):
                kinds.add("record")
                return self._records[id(named)]
            return self._node(named, rules, path, ns, kinds)
        if not isinstance(schema, Mapping):
            raise InvalidSchema(f"Invalid schema: {schema!r} at {path} is not an Avro type.")
        if ATTRIBUTE in schema:
            raise InvalidSchema(
                f'Invalid schema: "{ATTRIBUTE}" at {path} sits on a type; declare it on the '
                'record field instead, e.g. {"name": "email", "type": "string", '
                f'"{ATTRIBUTE}": ["trim"]}}.'
            )
        kind = schema.get("type")
        logical = _LOGICAL.get(schema.get("logicalType", ""))
        if logical is not None and kind == logical[0]:
            return self._leaf(logical[1], schema, rules, path, kinds)
        if kind in PRIMITIVES:
            return self._leaf(kind, schema, rules, path, kinds)
        if kind in ("record", "error", "enum", "fixed"):
            inner = self._remember(schema, ns)
            if kind in ("record", "error"):
                kinds.add("record")
                return self._record(schema, path, inner)
            return self._leaf(kind, schema, rules, path, kinds)
        if kind == "array":
            return self._container(
                ArrayNode(self._node(schema["items"], rules, f"{path}[]", ns, kinds))
            )
        if kind == "map":
            return self._container(
                MapNode(self._node(schema["values"], rules, f"{path}{{}}", ns, kinds))
            )
        return self._node(kind, rules, path, ns, kinds)

    def _container(self, node: PlanNode) -> PlanNode:
        self._nodes.append(node)
        return node

    def _remember(self, schema: Mapping[str, Any], ns: str | None) -> str | None:
        return remember_named(self._named, schema, ns)

    def _record(self, schema: Mapping[str, Any], path: str, ns: str | None) -> PlanNode:
        node = RecordNode()
        self._records[id(schema)] = node
        self._container(node)
        fields = []
        for field in schema["fields"]:
            field_path = f"{path}.{field['name']}"
            rules = _declared(field, field_path)
            kinds: set[str] = set()
            fields.append((field["name"], self._node(field["type"], rules, field_path, ns, kinds)))
            _check_served(rules, kinds, field_path)
        node.fields = tuple(fields)
        return node

    def _union(
        self, schema: list[Any], rules: tuple[Rule, ...], path: str, ns: str | None, kinds: set[str]
    ) -> PlanNode:
        union = UnionNode(self._named, ns)
        for branch in schema:
            node = self._node(branch, rules, path, ns, kinds)
            union.branches.append(_Branch(branch, node))
        for json_kind in ("string", "number", "boolean", "object", "array"):
            union.by_json[json_kind] = tuple(
                b for b in union.branches if json_kind in _takes(b.node)
            )
        return self._container(union)

    def _leaf(
        self,
        kind: str,
        schema: Mapping[str, Any],
        rules: tuple[Rule, ...],
        path: str,
        kinds: set[str],
    ) -> PlanNode:
        kinds.add(kind)
        steps = []
        for rule in rules:
            if kind in _SERVES[rule]:
                step = rule_step(rule, kind, schema, path)
                if step is not None:
                    steps.append((rule, step))
        return LeafNode(kind, tuple(steps))


_STRING_ONLY = frozenset({"string"})


def _takes(node: PlanNode) -> frozenset[str]:
    takes = _TAKES.get(node.kind, _STRING_ONLY)
    if isinstance(node, LeafNode) and any(rule is Rule.PARSE_NUMBER for rule, _ in node.steps):
        return takes | {"string"}
    return takes


_BY_NAME = {rule.value: rule for rule in Rule}


def _valid_rules() -> str:
    return ", ".join(Rule)


def _declared(field: Mapping[str, Any], path: str) -> tuple[Rule, ...]:
    """The rules a field declares, checked on their own (not yet against the field's type)."""
    if ATTRIBUTE not in field:
        return ()
    declared = field[ATTRIBUTE]
    if not isinstance(declared, list) or not all(isinstance(r, str) for r in declared):
        raise InvalidSchema(
            f'Invalid schema: field {path}: "{ATTRIBUTE}" must be a list of rule names, e.g. '
            f'["trim"], not {declared!r}. Valid rules: {_valid_rules()}.'
        )
    rules: list[Rule] = []
    for name in declared:
        if name not in _BY_NAME:
            raise InvalidSchema(
                f"Invalid schema: field {path}: unknown cleaning rule '{name}'. "
                f"Valid rules: {_valid_rules()}."
            )
        if _BY_NAME[name] in rules:
            raise InvalidSchema(f"Invalid schema: field {path}: rule '{name}' is listed twice.")
        rules.append(_BY_NAME[name])
    for first, second in ((Rule.LOWERCASE, Rule.UPPERCASE), (Rule.LOWERCASE, Rule.UTC_TIMESTAMP)):
        if first in rules and second in rules:
            raise InvalidSchema(
                f"Invalid schema: field {path}: rules '{first}' and '{second}' conflict "
                f"({_CONFLICTS[second]}); keep one."
            )
    for i, rule in enumerate(rules):
        later_text = [r for r in rules[i + 1 :] if r in _TEXT_RULES]
        if rule not in _TEXT_RULES and later_text:
            raise InvalidSchema(
                f"Invalid schema: field {path}: list '{later_text[0]}' before '{rule}': it "
                f"prepares the text '{rule}' reads, and one cleaning must reach the result."
            )
    return tuple(rules)


_CONFLICTS = {
    Rule.UPPERCASE: "each undoes the other",
    Rule.UTC_TIMESTAMP: "lowercase would undo the 'T' and 'Z' of a UTC timestamp",
}


def _check_served(rules: tuple[Rule, ...], kinds: set[str], path: str) -> None:
    for rule in rules:
        if not _SERVES[rule] & kinds:
            fitting = [r for r in Rule if _SERVES[r] & kinds]
            raise InvalidSchema(
                f"Invalid schema: field {path}: rule '{rule}' cannot apply to its type "
                f"({', '.join(sorted(kinds))}); it serves {', '.join(sorted(_SERVES[rule]))}. "
                f"Rules for this field: {', '.join(fitting) or 'none'}. "
                f"Valid rules: {_valid_rules()}."
            )
