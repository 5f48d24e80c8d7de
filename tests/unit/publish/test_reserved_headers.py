"""Header names starting with `hub.` belong to the hub's lineage: a publisher's record that uses
one is refused alone, whatever the case or width of its letters, while the hub's own headers
(request id, idempotency key, a connector's) are still written."""

from typing import Any

import pytest

from catalog.types import Feed
from hub_core.errors import ErrorCode
from publish.headers import is_reserved
from publish.publisher import (
    IDEMPOTENCY_HEADER,
    REQUEST_ID_HEADER,
    IncomingRecord,
    OnError,
    Publisher,
)
from tests.unit.publish.fake_producer import FakeProducer

pytestmark = pytest.mark.unit


def _reading(n: int, **extra: Any) -> IncomingRecord:
    return IncomingRecord(value={"id": n, "sensor": f"s{n}", "celsius": 20.5}, **extra)


@pytest.mark.parametrize(
    "name",
    [
        "hub.request-id",
        "hub.idempotency-key",
        "hub.anything",
        "HUB.Request-Id",
        " hub.request-id",
        # Full-width letters and dot: the same name once normalised (NFKC).
        "\uff48\uff55\uff42\uff0erequest-id",
        "hub.",
    ],
)
def test_a_header_named_like_the_hubs_is_refused_alone_and_the_batch_publishes(
    publisher: Publisher, readings: Feed, producer: FakeProducer, name: str
) -> None:
    outcome = publisher.publish(
        readings,
        [_reading(1), _reading(2, headers={"source": "lab", name: "forged"}), _reading(3)],
        request_id="req-1",
    )

    assert [r.error_code for r in outcome.results] == [None, ErrorCode.RESERVED_HEADER_NAME, None]
    refused = outcome.results[1]
    assert refused.path == "$.headers"
    assert "reserved for the hub's lineage; rename the header" in (refused.message or "")
    assert [m.headers for m in producer.on("plant.readings")] == [
        [(REQUEST_ID_HEADER, b"req-1")],
        [(REQUEST_ID_HEADER, b"req-1")],
    ]


@pytest.mark.parametrize("name", ["hub", "hubby.request-id", "x-hub.request-id", "hub-request"])
def test_names_that_only_look_alike_are_a_publishers_own(name: str) -> None:
    assert not is_reserved(name)


def test_a_refused_record_goes_to_the_dead_letter_topic_with_why_when_asked(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    forged = {IDEMPOTENCY_HEADER: "someone-else:0"}
    outcome = publisher.publish(readings, [_reading(1, headers=forged)], on_error=OnError.DLQ)

    assert outcome.results[0].dead_lettered
    (letter,) = producer.on("plant.readings.dlq")
    assert dict(letter.headers)["hub.error.code"] == b"42231"
    assert producer.on("plant.readings") == []


def test_the_hubs_own_headers_of_a_record_are_written_beside_the_publishers(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    record = _reading(
        1, headers={"source": "lab"}, hub_headers={"hub.cdc.unchanged-columns": "body"}
    )

    assert publisher.publish(readings, [record], idempotency_key="k").results[0].ok
    (message,) = producer.on("plant.readings")
    assert message.headers == [
        ("source", b"lab"),
        ("hub.cdc.unchanged-columns", b"body"),
        (IDEMPOTENCY_HEADER, b"k:0"),
    ]
