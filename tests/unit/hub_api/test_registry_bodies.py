"""The registry's two hottest answers, written directly, are the bytes their models render."""

import json

import pytest

from hub_api.errors import RegistryJSONResponse
from hub_api.registry.models import ReferenceModel, SchemaPublic, SubjectVersionPublic
from hub_api.registry.routes import lookup_body, schema_body
from registry.types import (
    RegisteredSchema,
    SchemaId,
    SchemaReference,
    StoredSchema,
    Subject,
    Version,
)

pytestmark = pytest.mark.unit

_TEXTS = [
    json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}),
    '{"type":"enum","name":"Größe","symbols":["S","M"],"doc":"tab\\there, \\"quoted\\" \\\\"}',
    '"string"',
    '{"type": "string", "doc": "control \x01 and line\nbreak, \u2028 and \x7f / é"}',
]
_REFERENCES = [
    (),
    (SchemaReference(name="com.acme.Customer", subject="customers-value", version=Version(3)),),
    (
        SchemaReference(name="a.A", subject="a", version=Version(1)),
        SchemaReference(name='b."B"', subject="b/é", version=Version(2)),
    ),
]


def _rendered(model: SchemaPublic | SubjectVersionPublic) -> bytes:
    """What the route rendered before: the model, dumped, through `JSONResponse`."""
    return RegistryJSONResponse(model.model_dump(by_alias=True, exclude_none=True)).body


@pytest.mark.parametrize("text", _TEXTS)
@pytest.mark.parametrize("references", _REFERENCES)
def test_a_schema_by_id_is_the_json_of_its_model(
    text: str, references: tuple[SchemaReference, ...]
) -> None:
    stored = StoredSchema(schema_id=SchemaId(7), schema=text, references=references)
    listed = [ReferenceModel(name=r.name, subject=r.subject, version=r.version) for r in references]
    model = SchemaPublic(schema_=text, references=listed or None)
    assert schema_body(stored) == _rendered(model)
    assert json.loads(schema_body(stored))["schema"] == text


@pytest.mark.parametrize("text", _TEXTS)
@pytest.mark.parametrize("references", _REFERENCES)
def test_a_lookup_answer_is_the_json_of_its_model(
    text: str, references: tuple[SchemaReference, ...]
) -> None:
    found = RegisteredSchema(
        subject=Subject('orders."ü"-value'),
        version=Version(12),
        schema_id=SchemaId(2_147_483_647),
        schema=text,
        references=references,
    )
    assert lookup_body(found) == _rendered(SubjectVersionPublic.of(found))
