from typing import Any

import pytest

from registry.diff import ChangeKind, diff

pytestmark = pytest.mark.unit


def record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Order", "fields": list(fields)}


def changes(older: Any, newer: Any) -> dict[tuple[str, ChangeKind], tuple[bool, bool]]:
    return {
        (c.path, c.kind): (c.backward.compatible, c.forward.compatible)
        for c in diff(older, newer).changes
    }


def test_each_change_gets_the_verdicts_of_the_compatibility_engine() -> None:
    older = record(
        {"name": "id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": "string", "default": ""},
        {"name": "gone", "type": "string"},
        {"name": "cur", "type": "string", "default": "EUR"},
        {"name": "code", "type": "int"},
    )
    newer = record(
        {"name": "id", "type": "string"},
        {"name": "quantity", "type": "long", "aliases": ["qty"]},
        {"name": "cur", "type": "string", "default": "USD"},
        {"name": "code", "type": "string"},
        {"name": "channel", "type": "string", "default": "web"},
        {"name": "must", "type": "int"},
    )
    assert changes(older, newer) == {
        ("quantity", ChangeKind.RENAMED): (True, False),
        ("quantity", ChangeKind.WIDENED): (True, False),
        ("cur", ChangeKind.DEFAULT_CHANGED): (True, True),
        ("code", ChangeKind.RETYPED): (False, False),
        ("channel", ChangeKind.ADDED): (True, True),
        ("must", ChangeKind.ADDED): (False, True),
        ("note", ChangeKind.REMOVED): (True, True),
        ("gone", ChangeKind.REMOVED): (True, False),
    }


def test_nested_records_are_compared_field_by_field() -> None:
    address = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    wider = {**address, "fields": [*address["fields"], {"name": "zip", "type": "string"}]}
    found = diff(record({"name": "to", "type": address}), record({"name": "to", "type": wider}))
    (change,) = found.changes
    assert (change.path, change.kind, change.backward.compatible) == (
        "to.zip",
        ChangeKind.ADDED,
        False,
    )
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in change.backward.reason
    assert found.unplaced == ()


def test_a_change_the_fields_do_not_hold_is_kept_unplaced() -> None:
    renamed = {**record({"name": "id", "type": "string"}), "name": "Purchase"}
    found = diff(record({"name": "id", "type": "string"}), renamed)
    assert found.changes == ()
    assert {i.kind for i in found.unplaced} == {"NAME_MISMATCH"}
