"""The OpenAPI document the app serves is valid and self-contained: clients generate code from
it, and a generator stops at the first `$ref` it cannot follow."""

from collections.abc import Iterator
from typing import Any

import pytest
from openapi_spec_validator import validate

from hub_api.app import create_app
from hub_api.settings import ApiSettings
from registry.settings import RegistrySettings

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    # Building the document opens no database or broker: only the lifespan does.
    app = create_app(ApiSettings(), RegistrySettings(database_url="sqlite:///unused.db"))
    return app.openapi()


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def _resolve(document: dict[str, Any], ref: str) -> object:
    assert ref.startswith("#/"), f"{ref} points outside the document"
    node: object = document
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        assert isinstance(node, dict) and part in node, f"{ref} does not resolve"
        node = node[part]
    return node


def test_the_openapi_document_is_valid(document: dict[str, Any]) -> None:
    validate(document)


def test_every_ref_in_the_openapi_document_resolves(document: dict[str, Any]) -> None:
    refs = set(_refs(document))
    assert refs
    for ref in sorted(refs):
        _resolve(document, ref)


@pytest.mark.parametrize(
    ("path", "media_type", "model", "record"),
    [
        ("/v1/feeds/{topic}/records", "application/json", "RecordsIn", "RecordIn"),
        (
            "/topics/{topic}",
            "application/vnd.kafka.avro.v2+json",
            "ProduceRequestIn",
            "ProxyRecordIn",
        ),
    ],
)
def test_raw_publish_bodies_are_documented_as_components(
    document: dict[str, Any], path: str, media_type: str, model: str, record: str
) -> None:
    body = document["paths"][path]["post"]["requestBody"]
    assert body["required"] is True
    schema = body["content"][media_type]["schema"]
    assert schema == {"$ref": f"#/components/schemas/{model}"}
    records = _resolve(document, schema["$ref"])
    assert isinstance(records, dict)
    assert records["properties"]["records"]["items"] == {"$ref": f"#/components/schemas/{record}"}
