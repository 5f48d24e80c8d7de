import json

import pytest

from hub_core.errors import ErrorCode
from registry.avro import parse
from registry.errors import InvalidSchema

pytestmark = pytest.mark.unit

RECORD = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "id", "type": "long", "doc": "The id."}],
}


def test_formatting_does_not_change_a_schemas_identity() -> None:
    compact = parse(json.dumps(RECORD, separators=(",", ":")))
    pretty = parse(json.dumps(RECORD, indent=4))
    assert compact.fingerprint == pretty.fingerprint
    assert compact.canonical == pretty.canonical


def test_docs_are_part_of_a_schemas_identity() -> None:
    other = {**RECORD, "fields": [{"name": "id", "type": "long", "doc": "Another doc."}]}
    assert parse(json.dumps(RECORD)).fingerprint != parse(json.dumps(other)).fingerprint


def test_a_primitive_schema_parses() -> None:
    assert parse('"string"').json == "string"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"type": "record", "name": "X"', "not valid JSON"),
        ('{"type": "record", "name": "X", "fields": [{"name": "a", "type": "nope"}]}', "nope"),
        ('{"type": "enum", "name": "E"}', "Invalid schema"),
    ],
)
def test_invalid_schemas_raise_42201_naming_the_problem(text: str, reason: str) -> None:
    with pytest.raises(InvalidSchema, match=reason) as caught:
        parse(text)
    assert caught.value.code is ErrorCode.INVALID_SCHEMA
    assert caught.value.code.http_status == 422
