"""Whether a reader schema can read what a writer schema wrote, and the registry's modes over it.

The rules are the Avro specification's "Schema Resolution", with the verdicts of Avro Java's
`SchemaCompatibility`, which Confluent Schema Registry calls for every Avro check:

- primitives promote int → long, float, double; long → float, double; float → double; and
  string ↔ bytes. Logical type annotations are ignored: only the underlying types count.
- Named types match on their unqualified names, or when the reader lists the writer's full name
  among its aliases. Fixed sizes must then be equal, and every symbol the writer's enum can
  write must be in the reader's, unless the reader's enum declares a default symbol.
- A reader field missing from the writer needs a default; writer fields the reader lacks are
  skipped; a reader field's aliases find a writer field under an old name.
- Every branch of a writer union must be readable; a reader union reads a writer type when any
  of its branches can (Avro uses the first such branch).
- Recursive types are compatible unless some path through them is not.

A location is a JSON pointer into the reader schema, with Avro Java's segments: "/" is the
root, "/fields/1/type" the type of the reader's second field, "/fields/1" a reader field the
writer lacks, then ".../items", ".../values", ".../name", ".../size", ".../symbols", and a
reader union's branch by its index. A pointer follows a named reference into the type's
definition: it walks the schema as resolved, as Avro Java's does. A reason names the field by
its dotted path, with "[]" for array items and "{}" for map values ("field 'lines[].price'"),
and both schemas by their role ("the new schema", "version 3").

Where this departs from Avro Java (only the last can change a verdict):

- A union problem is located at the reader's union and the reason names the writer's branch;
  Java appends the writer union's branch index to the reader's path. When no reader branch can
  read a writer type, the problems of the reader branch of the same kind and name are listed
  after the MISSING_UNION_BRANCH, so the cause shows.
- A reader field with no default that the writer lacks is READER_FIELD_MISSING_DEFAULT_VALUE
  even when its type is an enum with a default symbol; Java compares that enum with the writer's
  whole record there and reports a TYPE_MISMATCH, incompatible all the same.
- A reader field whose name and alias both match writer fields reads the field of its own name,
  as the Python reference does; Java raises an error.
- Java reuses a pair's verdict even when it rested on the assumption that an enclosing recursive
  pair is compatible, which that pair may go on to disprove. Here such a verdict is dropped when
  its assumption fails, so a recursive schema that cannot read some data is never compatible.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Any, NamedTuple

from registry.resolution import (
    ArraySchema,
    EnumSchema,
    Field,
    FixedSchema,
    MapSchema,
    Node,
    PrimitiveSchema,
    RecordSchema,
    UnionSchema,
    describe,
    kind_of,
    resolve,
)
from registry.types import CompatibilityMode


@unique
class IncompatibilityKind(StrEnum):
    """Why a reader cannot read a writer's data; Avro Java's and Confluent's names."""

    TYPE_MISMATCH = "TYPE_MISMATCH"
    NAME_MISMATCH = "NAME_MISMATCH"
    FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
    MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
    READER_FIELD_MISSING_DEFAULT_VALUE = "READER_FIELD_MISSING_DEFAULT_VALUE"
    MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"


@unique
class Direction(StrEnum):
    """Which schema reads in a check, and so which schema an incompatibility's location is in."""

    BACKWARD = "BACKWARD"  # the new schema reads data of an existing version
    FORWARD = "FORWARD"  # an existing version reads data of the new schema


@dataclass(frozen=True, slots=True)
class Incompatibility:
    """One reason the reader cannot read the writer's data, and where in the reader it lies.

    `version` and `direction` say which existing version and which way a `check` found it;
    both are None from `reader_can_read`.
    """

    kind: IncompatibilityKind
    location: str
    reason: str
    version: int | None = None
    direction: Direction | None = None

    def message(self) -> str:
        """One line for an error response: kind, location and reason."""
        return f"{self.kind} at '{self.location}': {self.reason}"


@dataclass(frozen=True, slots=True)
class CompatibilityReport:
    """The outcome of a check: compatible when no incompatibility was found."""

    incompatibilities: tuple[Incompatibility, ...] = ()

    @property
    def compatible(self) -> bool:
        return not self.incompatibilities

    def messages(self) -> list[str]:
        """Every incompatibility as one line, in the order found."""
        return [incompatibility.message() for incompatibility in self.incompatibilities]


def reader_can_read(reader: Any, writer: Any) -> list[Incompatibility]:
    """Every reason `reader` cannot read data written with `writer`; empty when it can.

    Both are schemas as JSON values (what `json.loads` returns). Raises `InvalidSchema` when
    either is not a valid schema.
    """
    return _Checker(reader_role="the reader schema", writer_role="the writer schema").run(
        resolve(reader), resolve(writer)
    )


_BACKWARD_MODES = frozenset(
    {
        CompatibilityMode.BACKWARD,
        CompatibilityMode.BACKWARD_TRANSITIVE,
        CompatibilityMode.FULL,
        CompatibilityMode.FULL_TRANSITIVE,
    }
)
_FORWARD_MODES = frozenset(
    {
        CompatibilityMode.FORWARD,
        CompatibilityMode.FORWARD_TRANSITIVE,
        CompatibilityMode.FULL,
        CompatibilityMode.FULL_TRANSITIVE,
    }
)
_TRANSITIVE_MODES = frozenset(
    {
        CompatibilityMode.BACKWARD_TRANSITIVE,
        CompatibilityMode.FORWARD_TRANSITIVE,
        CompatibilityMode.FULL_TRANSITIVE,
    }
)


def check(
    existing: Sequence[Any],
    candidate: Any,
    mode: CompatibilityMode,
    *,
    versions: Sequence[int] | None = None,
) -> CompatibilityReport:
    """Check `candidate` against a subject's `existing` schemas (oldest first) under `mode`.

    The non-transitive modes check against the latest existing schema, the transitive ones
    against each; a subject with no schemas accepts anything. `versions` numbers `existing`
    for the report and its reasons; by default they are numbered 1, 2, ... in order.
    """
    if mode is CompatibilityMode.NONE or not existing:
        return CompatibilityReport()
    numbers = list(range(1, len(existing) + 1)) if versions is None else list(versions)
    if len(numbers) != len(existing):
        raise ValueError(f"got {len(numbers)} version numbers for {len(existing)} schemas")
    targets = range(len(existing)) if mode in _TRANSITIVE_MODES else [len(existing) - 1]
    new = resolve(candidate)
    found: list[Incompatibility] = []
    for index in targets:
        old = resolve(existing[index])
        version = numbers[index]
        if mode in _BACKWARD_MODES:
            checker = _Checker(reader_role="the new schema", writer_role=f"version {version}")
            found += checker.run(new, old, version=version, direction=Direction.BACKWARD)
        if mode in _FORWARD_MODES:
            checker = _Checker(reader_role=f"version {version}", writer_role="the new schema")
            found += checker.run(old, new, version=version, direction=Direction.FORWARD)
    return CompatibilityReport(tuple(found))


# Writer types each reader type can read besides its own (the specification's promotions).
_PROMOTIONS: dict[str, frozenset[str]] = {
    "long": frozenset({"int"}),
    "float": frozenset({"int", "long"}),
    "double": frozenset({"int", "long", "float"}),
    "bytes": frozenset({"string"}),
    "string": frozenset({"bytes"}),
}

_UNASSUMED = 1 << 62


@dataclass(frozen=True, slots=True)
class _Finding:
    """An incompatibility relative to the pair it was found in; placed when reported.

    `pointer` is the path below that pair, `fields` the field names (and "[]", "{}") on it,
    and `detail` the reason without its subject.
    """

    kind: IncompatibilityKind
    pointer: tuple[str, ...]
    fields: tuple[str, ...]
    detail: str

    def under(self, pointer: tuple[str, ...], fields: tuple[str, ...]) -> "_Finding":
        return _Finding(self.kind, pointer + self.pointer, fields + self.fields, self.detail)

    def placed(self, *, version: int | None, direction: Direction | None) -> Incompatibility:
        location = "/" + "/".join(s.replace("~", "~0").replace("/", "~1") for s in self.pointer)
        reason = f"{_subject(self.fields)} {self.detail}"
        return Incompatibility(self.kind, location, reason, version, direction)


class _Outcome(NamedTuple):
    """A pair's findings; when there are none, `assumes` is the depth of the outermost open
    recursive pair the verdict assumed compatible (`_UNASSUMED` when it assumed nothing)."""

    findings: tuple[_Finding, ...]
    assumes: int = _UNASSUMED


_COMPATIBLE = _Outcome(())


def _all(outcomes: Iterable[_Outcome]) -> _Outcome:
    findings: list[_Finding] = []
    assumes = _UNASSUMED
    for outcome in outcomes:
        findings += outcome.findings
        assumes = min(assumes, outcome.assumes)
    return _Outcome(tuple(findings), assumes)


def _under(outcome: _Outcome, pointer: tuple[str, ...], fields: tuple[str, ...] = ()) -> _Outcome:
    return _Outcome(tuple(f.under(pointer, fields) for f in outcome.findings), outcome.assumes)


def _subject(fields: tuple[str, ...]) -> str:
    if not fields:
        return "the root type"
    path = ""
    for part in fields:
        path += part if part in ("[]", "{}") or not path else f".{part}"
    return f"element '{path}'" if fields[0] in ("[]", "{}") else f"field '{path}'"


class _Checker:
    """One reader/writer comparison, with its memory of the record pairs it has seen.

    Only records can recur, so only record pairs are remembered. A pair met again while it is
    still being checked is assumed compatible: a failure anywhere in it is found on the way
    out. A verdict that rests on such an assumption is kept as tentative and is promoted or
    dropped when the assumed pair's own verdict is known.
    """

    def __init__(self, *, reader_role: str, writer_role: str) -> None:
        self._reader = reader_role
        self._writer = writer_role
        self._open: dict[tuple[int, int], int] = {}
        self._settled: dict[tuple[int, int], tuple[_Finding, ...]] = {}
        self._tentative: dict[tuple[int, int], int] = {}

    def run(
        self,
        reader: Node,
        writer: Node,
        *,
        version: int | None = None,
        direction: Direction | None = None,
    ) -> list[Incompatibility]:
        outcome = self._compare(reader, writer)
        return [f.placed(version=version, direction=direction) for f in outcome.findings]

    def _compare(self, reader: Node, writer: Node, *, writer_branch: bool = False) -> _Outcome:
        if isinstance(reader, RecordSchema) and isinstance(writer, RecordSchema):
            return self._records(reader, writer)
        if isinstance(writer, UnionSchema):
            if isinstance(reader, UnionSchema):
                return _all(self._union_reads(reader, branch) for branch in writer.branches)
            return _all(
                self._compare(reader, branch, writer_branch=True) for branch in writer.branches
            )
        if isinstance(reader, UnionSchema):
            return self._union_reads(reader, writer)
        if isinstance(reader, PrimitiveSchema) and isinstance(writer, PrimitiveSchema):
            if reader.type == writer.type or writer.type in _PROMOTIONS.get(reader.type, ()):
                return _COMPATIBLE
        elif isinstance(reader, ArraySchema) and isinstance(writer, ArraySchema):
            return _under(self._compare(reader.items, writer.items), ("items",), ("[]",))
        elif isinstance(reader, MapSchema) and isinstance(writer, MapSchema):
            return _under(self._compare(reader.values, writer.values), ("values",), ("{}",))
        elif isinstance(reader, EnumSchema) and isinstance(writer, EnumSchema):
            return _all([self._names(reader, writer), self._symbols(reader, writer)])
        elif isinstance(reader, FixedSchema) and isinstance(writer, FixedSchema):
            return _all([self._names(reader, writer), self._size(reader, writer)])
        can_be = "can be " if writer_branch else ""
        return self._found(
            IncompatibilityKind.TYPE_MISMATCH,
            f"is {describe(reader)} in {self._reader} but {can_be}{describe(writer)} in "
            f"{self._writer}; a reader expecting {describe(reader)} cannot read "
            f"{describe(writer)}",
        )

    def _union_reads(self, reader: UnionSchema, writer: Node) -> _Outcome:
        """Whether some branch of the reader's union reads `writer` (never itself a union)."""
        closest: _Outcome | None = None
        for index, branch in enumerate(reader.branches):
            outcome = self._compare(branch, writer)
            if not outcome.findings:
                return outcome
            if closest is None and _same_type(branch, writer):
                closest = _under(outcome, (str(index),))
        missing = _Finding(
            IncompatibilityKind.MISSING_UNION_BRANCH,
            (),
            (),
            f"is {describe(reader)} in {self._reader}, which has no branch that can read "
            f"{describe(writer)} written by {self._writer}",
        )
        return _Outcome((missing, *(closest.findings if closest else ())))

    def _records(self, reader: RecordSchema, writer: RecordSchema) -> _Outcome:
        pair = (id(reader), id(writer))
        if pair in self._settled:
            return _Outcome(self._settled[pair])
        if pair in self._tentative:
            return _Outcome((), self._tentative[pair])
        if pair in self._open:
            return _Outcome((), self._open[pair])
        depth = len(self._open)
        self._open[pair] = depth
        try:
            outcome = _all([self._names(reader, writer), self._fields(reader, writer)])
        finally:
            del self._open[pair]
        # Verdicts that assumed this pair compatible stand or fall with it.
        resting = [other for other, on in self._tentative.items() if on >= depth]
        for other in resting:
            del self._tentative[other]
            if not outcome.findings and outcome.assumes >= depth:
                self._settled[other] = ()
            elif not outcome.findings:
                self._tentative[other] = outcome.assumes
        if outcome.findings or outcome.assumes >= depth:
            self._settled[pair] = outcome.findings
            return _Outcome(outcome.findings)
        self._tentative[pair] = outcome.assumes
        return outcome

    def _fields(self, reader: RecordSchema, writer: RecordSchema) -> _Outcome:
        outcomes = []
        for index, field in enumerate(reader.fields):
            written = _written_field(writer, field)
            if written is not None:
                outcome = self._compare(field.type, written.type)
                outcomes.append(_under(outcome, ("fields", str(index), "type"), (field.name,)))
            elif not field.has_default:
                missing = self._found(
                    IncompatibilityKind.READER_FIELD_MISSING_DEFAULT_VALUE,
                    f"is in {self._reader} but not in {self._writer}, and has no default "
                    "value to read in its place",
                )
                outcomes.append(_under(missing, ("fields", str(index)), (field.name,)))
        return _all(outcomes)

    def _names(
        self,
        reader: RecordSchema | EnumSchema | FixedSchema,
        writer: RecordSchema | EnumSchema | FixedSchema,
    ) -> _Outcome:
        if _names_match(reader, writer):
            return _COMPATIBLE
        kind = kind_of(reader)
        outcome = self._found(
            IncompatibilityKind.NAME_MISMATCH,
            f"is {kind} '{reader.fullname}' in {self._reader} but {kind} '{writer.fullname}' "
            f"in {self._writer}; the names must match, or '{reader.fullname}' must list "
            f"'{writer.fullname}' among its aliases",
        )
        return _under(outcome, ("name",))

    def _symbols(self, reader: EnumSchema, writer: EnumSchema) -> _Outcome:
        readable = frozenset(reader.symbols)  # a set: enums may have a thousand symbols
        missing = [symbol for symbol in writer.symbols if symbol not in readable]
        if not missing or reader.default is not None:
            return _COMPATIBLE
        outcome = self._found(
            IncompatibilityKind.MISSING_ENUM_SYMBOLS,
            f"is enum '{reader.fullname}' in {self._reader}, which lacks "
            f"{', '.join(repr(s) for s in missing)} that {self._writer} can write, and has no "
            "default symbol to read them as",
        )
        return _under(outcome, ("symbols",))

    def _size(self, reader: FixedSchema, writer: FixedSchema) -> _Outcome:
        if reader.size == writer.size:
            return _COMPATIBLE
        outcome = self._found(
            IncompatibilityKind.FIXED_SIZE_MISMATCH,
            f"is fixed '{reader.fullname}' of {reader.size} bytes in {self._reader} but "
            f"{writer.size} bytes in {self._writer}; a fixed type's size cannot change",
        )
        return _under(outcome, ("size",))

    @staticmethod
    def _found(kind: IncompatibilityKind, detail: str) -> _Outcome:
        return _Outcome((_Finding(kind, (), (), detail),))


def _written_field(writer: RecordSchema, field: Field) -> Field | None:
    """The writer's field a reader field reads: the one of its name, else of its first alias."""
    for name in (field.name, *field.aliases):
        written = writer.field_named(name)
        if written is not None:
            return written
    return None


def _names_match(
    reader: RecordSchema | EnumSchema | FixedSchema,
    writer: RecordSchema | EnumSchema | FixedSchema,
) -> bool:
    # Avro Java compares unqualified names (a namespace may move) and qualified aliases.
    return reader.name == writer.name or writer.fullname in reader.aliases


def _same_type(reader: Node, writer: Node) -> bool:
    """Whether a reader union's branch is the one meant for `writer`, to explain a failure."""
    if kind_of(reader) != kind_of(writer):
        return False
    if isinstance(reader, RecordSchema | EnumSchema | FixedSchema):
        assert isinstance(writer, RecordSchema | EnumSchema | FixedSchema)
        return _names_match(reader, writer)
    return True
