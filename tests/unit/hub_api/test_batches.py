"""Reading a publish body: JSON only, within the record limit, every problem worded as a 4xx."""

import json
from typing import Any

import pytest

from hub_api.batches import parse_batch
from hub_api.errors import MalformedBody, TooManyRecords, UnsupportedMediaType
from hub_api.gateway.body import parse_publish_body
from hub_api.gateway.models import RecordsIn
from hub_core.errors import ErrorCode
from publish.publisher import IncomingRecord

pytestmark = pytest.mark.unit


def _parse(
    body: Any, *, content_type: str = "application/json", max_records: int = 100
) -> tuple[list[IncomingRecord], int | None]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_publish_body(raw, content_type=content_type, max_records=max_records)


def test_records_come_out_with_their_key_headers_timestamp_and_pinned_version() -> None:
    records, version = _parse(
        {
            "records": [
                {"value": {"id": 1}},
                {"value": {"id": 2}, "key": "k", "headers": {"origin": "lab"}, "timestamp": 5},
            ],
            "schema_version": 3,
        }
    )

    assert records == [
        IncomingRecord(value={"id": 1}),
        IncomingRecord(value={"id": 2}, key="k", headers={"origin": "lab"}, timestamp=5),
    ]
    assert version == 3


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "application/vnd.hub.v1+json"],
)
def test_json_content_types_are_accepted(content_type: str) -> None:
    records, _version = _parse({"records": [{"value": 1}]}, content_type=content_type)

    assert records == [IncomingRecord(value=1)]


@pytest.mark.parametrize(("content_type", "shown"), [("text/csv", "text/csv"), ("", "(none)")])
def test_a_body_that_is_not_json_is_refused_with_415_naming_its_type(
    content_type: str, shown: str
) -> None:
    with pytest.raises(UnsupportedMediaType) as refused:
        _parse({"records": [{"value": 1}]}, content_type=content_type)

    assert refused.value.code is ErrorCode.UNSUPPORTED_MEDIA_TYPE
    assert refused.value.code.http_status == 415
    assert f"'{shown}'" in refused.value.message
    assert "application/json" in refused.value.message


def test_malformed_json_is_a_400_saying_where() -> None:
    with pytest.raises(MalformedBody) as refused:
        _parse(b'{"records": [')

    assert refused.value.code is ErrorCode.MALFORMED_REQUEST
    assert refused.value.message.startswith("Malformed JSON body:")
    assert "line 1" in refused.value.message


def test_a_body_with_a_byte_order_mark_is_read_as_json_loads_reads_it() -> None:
    records, _version = _parse(b'\xef\xbb\xbf{"records": [{"value": "caf\\u00e9"}]}')

    assert records == [IncomingRecord(value="café")]


def test_too_many_records_are_refused_before_any_is_validated() -> None:
    # The records are not even valid: the count alone refuses the batch, cheaply.
    with pytest.raises(TooManyRecords) as refused:
        _parse({"records": [{"colour": "red"}] * 11}, max_records=10)

    assert refused.value.code is ErrorCode.TOO_MANY_RECORDS
    assert "11 records" in refused.value.message
    assert "HUB_API_MAX_RECORDS_PER_REQUEST" in refused.value.message


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"records": [{"value": 1, "colour": "red"}]}, "records.0.colour"),
        ({"records": [{"key": "k"}]}, "records.0.value"),
        ({"records": []}, "records"),
        ({"records": [{"value": 1}], "schema_version": "latest"}, "schema_version"),
        ({"rows": [{"value": 1}]}, "rows"),
        ([{"value": 1}], "body"),
    ],
    ids=["unknown-key", "no-value", "empty", "bad-version", "wrong-field", "not-an-object"],
)
def test_a_body_of_the_wrong_shape_is_a_400_naming_the_place(body: Any, named: str) -> None:
    with pytest.raises(MalformedBody) as refused:
        _parse(body)

    assert refused.value.message.startswith("Malformed request: ")
    assert named in refused.value.message


def test_a_body_outside_the_plain_shape_is_converted_by_the_model() -> None:
    # A float timestamp is not the plain shape; the model turns it into epoch milliseconds.
    records, _version = _parse({"records": [{"value": 1, "timestamp": 1_714_564_800_000.0}]})

    assert records == [IncomingRecord(value=1, timestamp=1_714_564_800_000)]
    assert type(records[0].timestamp) is int


def test_parse_batch_validates_any_batch_model_with_the_same_limits() -> None:
    body = parse_batch(b'{"records": [{"value": {"a": 1}}]}', RecordsIn, max_records=5)

    assert body.records[0].value == {"a": 1}
    with pytest.raises(TooManyRecords):
        parse_batch(json.dumps({"records": [{"value": 1}] * 6}).encode(), RecordsIn, max_records=5)
