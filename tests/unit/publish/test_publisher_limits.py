"""What Kafka cannot hold is refused per record before it is produced; the batch goes on."""

import time
from typing import Any

import pytest

from catalog.types import Feed
from hub_core.errors import ErrorCode
from publish.publisher import IncomingRecord, Publisher
from tests.unit.publish.fake_producer import FakeProducer

pytestmark = pytest.mark.unit


def _reading(n: int, sensor: str | None = None, **extra: Any) -> IncomingRecord:
    return IncomingRecord(value={"id": n, "sensor": sensor or f"s{n}", "celsius": 20.5}, **extra)


@pytest.mark.parametrize("timestamp", [2**63, -1, "1969-12-31T23:59:59Z", 10**30])
def test_a_record_timestamp_outside_kafkas_range_is_refused_and_the_others_publish(
    publisher: Publisher, readings: Feed, producer: FakeProducer, timestamp: Any
) -> None:
    outcome = publisher.publish(
        readings, [_reading(1, timestamp=0), _reading(2, timestamp=timestamp), _reading(3)]
    )

    codes = [r.error_code for r in outcome.results]
    assert codes == [None, ErrorCode.INVALID_RECORD, None]
    assert outcome.results[1].path == "$.timestamp"
    assert len(producer.on("plant.readings")) == 2


@pytest.mark.parametrize("timestamp", [253402300799999, "9999-12-31T23:59:59Z"])
def test_a_record_timestamp_far_in_the_future_is_refused_alone_before_kafka_sees_it(
    publisher: Publisher, readings: Feed, producer: FakeProducer, timestamp: Any
) -> None:
    # A Kafka 4 broker refuses it for the whole produce batch it travels in.
    soon = int(time.time() * 1000) + 60_000
    outcome = publisher.publish(
        readings, [_reading(1, timestamp=soon), _reading(2, timestamp=timestamp), _reading(3)]
    )

    assert [r.error_code for r in outcome.results] == [None, ErrorCode.INVALID_RECORD, None]
    assert outcome.results[1].path == "$.timestamp"
    assert "ahead of the hub's clock" in (outcome.results[1].message or "")
    assert len(producer.on("plant.readings")) == 2


def test_a_record_over_the_size_limit_is_refused_with_41302_before_producing(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    outcome = publisher.publish(
        readings,
        [_reading(1), _reading(2, sensor="x" * 1_000_000), _reading(3, headers={"h": "v" * 10})],
    )

    assert [r.error_code for r in outcome.results] == [None, ErrorCode.RECORD_TOO_LARGE, None]
    assert "HUB_KAFKA_MAX_RECORD_BYTES" in (outcome.results[1].message or "")
    assert len(producer.on("plant.readings")) == 2


def test_headers_and_key_count_in_a_records_size(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    big = _reading(1, key="k" * 600_000, headers={"h": "v" * 600_000})

    assert publisher.publish(readings, [big]).results[0].error_code is ErrorCode.RECORD_TOO_LARGE
    assert producer.on("plant.readings") == []


@pytest.mark.parametrize("headers", [{"a\x00b": "v"}, {"h": "a\x00b"}, {"h" * 256: "v"}, {"": "v"}])
def test_a_header_with_a_nul_or_an_over_long_name_is_refused(
    publisher: Publisher, readings: Feed, headers: dict[str, str]
) -> None:
    result = publisher.publish(readings, [_reading(1, headers=headers)]).results[0]

    assert (result.error_code, result.path) == (ErrorCode.INVALID_RECORD, "$.headers")
