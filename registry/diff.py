"""What changed between two versions of a schema, field by field, and what each change means.

`diff(older, newer)` lists every field added, removed, renamed (the newer field lists the older
name among its aliases), widened or retyped, and every default changed, walking nested records
that keep their name. Each change carries two verdicts: backward (the newer schema reads data
written with the older) and forward (the older schema reads data written with the newer).

The verdicts are not decided here: both directions are checked once with
`compatibility.reader_can_read`, and each incompatibility is given to the change whose field its
location points into (a JSON pointer into the reader schema, so into the newer schema for
backward and the older for forward). The diff and the registry therefore never disagree.
Incompatibilities that point at no listed change (the root record renamed, a record inside a
union changed) are kept in `SchemaDiff.unplaced`, so none is lost.
"""

import json
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Any

from registry.compatibility import Incompatibility, reader_can_read
from registry.resolution import Field, RecordSchema, resolve, type_expression


@unique
class ChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    RENAMED = "renamed"
    WIDENED = "widened"
    RETYPED = "retyped"
    DEFAULT_CHANGED = "default changed"


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether one direction of reading still works across a change, and why."""

    compatible: bool
    reason: str


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One change of one field; `path` is dotted, as in the newer schema (the older one for a
    removed field)."""

    path: str
    kind: ChangeKind
    detail: str
    backward: Verdict
    forward: Verdict


@dataclass(frozen=True, slots=True)
class SchemaDiff:
    changes: tuple[FieldChange, ...]
    unplaced: tuple[Incompatibility, ...]


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a field sits: its pointer in the newer and in the older schema (None if absent)."""

    newer: str | None
    older: str | None


_SKIPPED_BY_NEWER = Verdict(True, "the newer schema skips this field when it reads older data")
_SKIPPED_BY_OLDER = Verdict(True, "the older schema skips this field when it reads newer data")


def diff(older: Any, newer: Any) -> SchemaDiff:
    """The changes from `older` to `newer` (schemas as JSON values), each with its verdicts."""
    old_root, new_root = resolve(older), resolve(newer)
    backward = reader_can_read(newer, older)
    forward = reader_can_read(older, newer)
    walker = _Walker(backward, forward)
    if isinstance(old_root, RecordSchema) and isinstance(new_root, RecordSchema):
        walker.records(old_root, new_root, older_at="", newer_at="", prefix="")
    placed = walker.placed
    unplaced = tuple(i for i in (*backward, *forward) if id(i) not in placed)
    return SchemaDiff(tuple(walker.changes), unplaced)


class _Walker:
    def __init__(self, backward: list[Incompatibility], forward: list[Incompatibility]) -> None:
        self._backward = backward
        self._forward = forward
        self.changes: list[FieldChange] = []
        self.placed: set[int] = set()
        self._seen: set[tuple[int, int]] = set()

    def records(
        self, older: RecordSchema, newer: RecordSchema, *, older_at: str, newer_at: str,
        prefix: str,
    ) -> None:  # fmt: skip
        if (id(older), id(newer)) in self._seen:  # recursive types: each pair once
            return
        self._seen.add((id(older), id(newer)))
        matched: set[int] = set()
        for index, field in enumerate(newer.fields):
            at_newer = f"{newer_at}/fields/{index}"
            path = prefix + field.name
            found = _older_field(older, field)
            if found is None:
                self._add(path, ChangeKind.ADDED, _typed(field), _Place(at_newer, None))
                continue
            old_index, old_field = found
            matched.add(old_index)
            place = _Place(at_newer, f"{older_at}/fields/{old_index}")
            if old_field.name != field.name:
                self._add(path, ChangeKind.RENAMED, f"was '{old_field.name}'", place)
            self._compare(old_field, field, place, path)
        for index, field in enumerate(older.fields):
            if index not in matched:
                place = _Place(None, f"{older_at}/fields/{index}")
                self._add(prefix + field.name, ChangeKind.REMOVED, _typed(field), place)

    def _compare(self, older: Field, newer: Field, place: _Place, path: str) -> None:
        if isinstance(older.type, RecordSchema) and isinstance(newer.type, RecordSchema):
            self.records(
                older.type, newer.type, older_at=f"{place.older}/type",
                newer_at=f"{place.newer}/type", prefix=f"{path}.",
            )  # fmt: skip
        else:
            before, after = type_expression(older.type), type_expression(newer.type)
            if before != after:
                assert place.newer is not None
                widened = not any(
                    _within(i.location, f"{place.newer}/type") for i in self._backward
                )
                kind = ChangeKind.WIDENED if widened else ChangeKind.RETYPED
                self._add(path, kind, f"{before} → {after}", place)
        if older.has_default != newer.has_default or (
            older.has_default and _json(older.default) != _json(newer.default)
        ):
            detail = f"{_default(older)} → {_default(newer)}"
            self._add(path, ChangeKind.DEFAULT_CHANGED, detail, place)

    def _add(self, path: str, kind: ChangeKind, detail: str, place: _Place) -> None:
        backward = (
            self._verdict(self._backward, place.newer, kind, "newer")
            if place.newer is not None
            else _SKIPPED_BY_NEWER
        )
        forward = (
            self._verdict(self._forward, place.older, kind, "older")
            if place.older is not None
            else _SKIPPED_BY_OLDER
        )
        self.changes.append(FieldChange(path, kind, detail, backward, forward))

    def _verdict(
        self, found: list[Incompatibility], at: str, kind: ChangeKind, reader: str
    ) -> Verdict:
        here = [i for i in found if _within(i.location, at)]
        if here:
            self.placed.update(id(i) for i in here)
            return Verdict(False, "; ".join(f"{i.kind}: {i.reason}" for i in here))
        return Verdict(True, _COMPATIBLE_BECAUSE[kind].format(reader=reader))


_COMPATIBLE_BECAUSE = {
    ChangeKind.ADDED: "the {reader} schema fills the field from its default",
    ChangeKind.REMOVED: "the {reader} schema fills the field from its default",
    ChangeKind.RENAMED: "the {reader} schema finds the field by its name or alias",
    ChangeKind.WIDENED: "the {reader} schema's type reads the other's (an Avro promotion)",
    ChangeKind.RETYPED: "the {reader} schema's type reads the other's",
    ChangeKind.DEFAULT_CHANGED: "a default is used only when the writer lacks the field",
}


def _older_field(older: RecordSchema, newer: Field) -> tuple[int, Field] | None:
    """The older field `newer` reads: the one of its name, else one its aliases name."""
    for index, field in enumerate(older.fields):
        if field.name == newer.name:
            return index, field
    for index, field in enumerate(older.fields):
        if field.name in newer.aliases:
            return index, field
    return None


def _within(location: str, pointer: str) -> bool:
    return location == pointer or location.startswith(pointer + "/")


def _typed(field: Field) -> str:
    text = type_expression(field.type)
    return f"{text}, default {_json(field.default)}" if field.has_default else text


def _default(field: Field) -> str:
    return _json(field.default) if field.has_default else "no default"


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
