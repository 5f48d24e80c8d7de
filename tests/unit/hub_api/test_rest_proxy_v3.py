"""A REST Proxy v3 record becomes the publisher's record, or is refused alone with a code."""

import base64
from typing import Any

import pytest

from hub_api.errors import MalformedBody
from hub_api.rest_proxy.v3 import incoming_record
from publish.errors import ProxyRefused
from publish.publisher import IncomingRecord

pytestmark = pytest.mark.unit


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "document",
    [
        {"key": {"data": "k"}, "value": {"type": "JSON", "data": {"n": 1}}, "timestamp": 5},
        # The same record in a shape only the model reads: a lower-case type.
        {"key": {"type": "json", "data": "k"}, "value": {"data": {"n": 1}}, "timestamp": 5},
    ],
)
def test_a_record_becomes_the_publishers_record_whichever_way_it_is_read(
    document: dict[str, Any],
) -> None:
    assert incoming_record(document) == IncomingRecord({"n": 1}, "k", None, 5)


def test_headers_are_base64_of_text_and_a_missing_value_is_a_tombstone() -> None:
    record = incoming_record({"headers": [{"name": "source", "value": _b64("web é")}]})
    assert record == IncomingRecord(None, None, {"source": "web é"}, None)


@pytest.mark.parametrize(
    ("document", "code", "words"),
    [
        ({"partition_id": 1, "value": {"data": {}}}, 42200, "partition_id 1"),
        ({"value": {"type": "BINARY", "data": "AA=="}}, 41501, "value.type 'BINARY'"),
        ({"value": {"schema_id": 3, "data": {}}}, 40001, "value.schema_id"),
        ({"headers": [{"name": "a", "value": "not base64!"}]}, 40001, "headers[0].value"),
        ({"headers": [{"name": "a", "value": ""}, {"name": "a"}]}, 40001, "given twice"),
    ],
)
def test_what_the_hub_cannot_take_is_refused_with_a_code(
    document: dict[str, Any], code: int, words: str
) -> None:
    with pytest.raises(ProxyRefused) as refused:
        incoming_record(document)
    assert int(refused.value.code) == code
    assert words in refused.value.message


def test_a_record_of_another_shape_is_refused_naming_the_problem() -> None:
    with pytest.raises(MalformedBody, match="records"):
        incoming_record({"records": []})
