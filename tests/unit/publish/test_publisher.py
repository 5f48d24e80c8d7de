"""The one publish path: each record answered, invalid ones refused or dead-lettered, never lost.

`Publisher` runs over a real registry on SQLite and a fake producer that answers as
`FeedProducer` does (tests/unit/publish/fake_producer.py).
"""

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from catalog.types import Feed
from hub_core.errors import ErrorCode, TerminalError
from hub_kafka.producer import Delivery
from publish.publisher import (
    IDEMPOTENCY_HEADER,
    IncomingRecord,
    OnError,
    Publisher,
    Unparsed,
)
from registry.service import RegistryService
from registry.types import Subject, Version
from registry.wire import unframe
from tests.unit.publish.conftest import READING
from tests.unit.publish.fake_producer import FakeProducer

pytestmark = pytest.mark.unit

Read = Callable[[bytes | None], Any]


def _reading(n: int, **changes: Any) -> IncomingRecord:
    return IncomingRecord(value={"id": n, "sensor": f"s{n}", "celsius": 20.5, **changes})


def test_valid_records_are_answered_with_where_kafka_stored_them(
    publisher: Publisher, readings: Feed, producer: FakeProducer, read: Read
) -> None:
    outcome = publisher.publish(readings, [_reading(1), _reading(2), _reading(3)])

    assert [(r.partition, r.offset, r.error_code) for r in outcome.results] == [
        (0, 0, None),
        (0, 1, None),
        (0, 2, None),
    ]
    assert (outcome.schema_version, outcome.accepted) == (1, 3)
    stored = producer.on("plant.readings")
    assert [read(s.value) for s in stored] == [
        {"id": n, "sensor": f"s{n}", "celsius": 20.5} for n in (1, 2, 3)
    ]
    # Confluent-framed with the id of the schema the answer names.
    assert {unframe(s.value or b"")[0] for s in stored} == {outcome.schema_id}


def test_an_invalid_record_is_refused_with_its_code_and_path_and_the_others_still_publish(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    outcome = publisher.publish(readings, [_reading(1), _reading(2, celsius="warm"), _reading(3)])

    ok, refused, last = outcome.results
    assert ok.ok and last.ok
    assert refused.error_code is ErrorCode.INVALID_RECORD
    assert refused.path == "$.celsius"
    assert "celsius" in (refused.message or "")
    assert not refused.dead_lettered
    assert len(producer.on("plant.readings")) == 2
    assert producer.on("plant.readings.dlq") == []


def test_with_on_error_dlq_an_invalid_record_goes_to_the_dead_letter_topic_with_its_error(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    outcome = publisher.publish(
        readings, [_reading(1), _reading(2, id="two")], on_error=OnError.DLQ
    )

    accepted, dead = outcome.results
    assert accepted.ok
    assert (dead.error_code, dead.path, dead.dead_lettered) == (
        ErrorCode.INVALID_RECORD,
        "$.id",
        True,
    )
    [letter] = producer.on("plant.readings.dlq")
    headers = dict(letter.headers)
    assert headers["hub.error.code"] == b"42220"
    assert headers["hub.error.path"] == b"$.id"
    assert headers["hub.feed"] == b"plant.readings"
    assert headers["hub.error.message"].decode() == dead.message
    # The record as it was sent, so it can be fixed and published again.
    assert json.loads(letter.value or b"")["value"] == {
        "id": "two",
        "sensor": "s2",
        "celsius": 20.5,
    }
    assert len(producer.on("plant.readings")) == 1


def test_a_tombstone_is_refused_on_an_event_feed(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    [result] = publisher.publish(readings, [IncomingRecord(value=None, key="s1")]).results

    assert result.error_code is ErrorCode.TOMBSTONE_NOT_ALLOWED
    assert result.path == "$.value"
    assert "plant.readings" in (result.message or "")
    assert "changelog" in (result.message or "")
    assert producer.sent == []


def test_a_changelog_record_is_keyed_by_its_key_fields_and_a_tombstone_keeps_the_key(
    publisher: Publisher, sensors: Feed, producer: FakeProducer, read: Read
) -> None:
    outcome = publisher.publish(
        sensors,
        [
            IncomingRecord(value={"sensor": "s1", "location": "hall"}),
            IncomingRecord(value=None, key={"sensor": "s1"}),
        ],
    )

    assert [r.ok for r in outcome.results] == [True, True]
    update, tombstone = producer.on("plant.sensors")
    assert read(update.key) == {"sensor": "s1"}
    assert tombstone.key == update.key
    assert tombstone.value is None


def test_a_tombstone_without_its_key_is_refused_naming_the_key_fields(
    publisher: Publisher, sensors: Feed, producer: FakeProducer
) -> None:
    [result] = publisher.publish(sensors, [IncomingRecord(value=None)]).results

    assert result.error_code is ErrorCode.INVALID_RECORD
    assert result.path == "$.key"
    assert "sensor" in (result.message or "")
    assert producer.sent == []


def test_with_an_idempotency_key_each_record_carries_the_key_and_its_position(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    records = [_reading(1), IncomingRecord(value=_reading(2).value, headers={"origin": "lab"})]
    publisher.publish(readings, records, idempotency_key="req-7")

    first, second = producer.on("plant.readings")
    assert first.headers == [(IDEMPOTENCY_HEADER, b"req-7:0")]
    assert second.headers == [("origin", b"lab"), (IDEMPOTENCY_HEADER, b"req-7:1")]


def test_without_an_idempotency_key_records_carry_only_their_own_headers(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    publisher.publish(readings, [_reading(1)])

    assert producer.on("plant.readings")[0].headers == []


def test_a_timestamp_is_sent_as_epoch_milliseconds_and_a_bad_one_is_refused(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    good = IncomingRecord(value=_reading(1).value, timestamp="2024-05-01T12:00:00+00:00")
    bad = IncomingRecord(value=_reading(2).value, timestamp="yesterday")
    outcome = publisher.publish(readings, [good, bad])

    assert producer.on("plant.readings")[0].timestamp_ms == 1_714_564_800_000
    assert (outcome.results[1].error_code, outcome.results[1].path) == (
        ErrorCode.INVALID_RECORD,
        "$.timestamp",
    )


def test_records_kafka_did_not_take_are_answered_as_retriable_or_not(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    producer.failures["plant.readings"] = Delivery(error="Broker: timed out", retriable=True)
    [unreachable] = publisher.publish(readings, [_reading(1)]).results
    producer.failures["plant.readings"] = Delivery(error="Broker: record too large")
    [refused] = publisher.publish(readings, [_reading(2)]).results

    assert unreachable.error_code is ErrorCode.KAFKA_UNAVAILABLE
    assert "Retry" in (unreachable.message or "")
    assert refused.error_code is ErrorCode.KAFKA_REFUSED
    assert "will not help" in (refused.message or "")


def test_unparseable_source_data_is_dead_lettered_with_its_raw_text_and_origin(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    error = TerminalError("line 12: not JSON", code=ErrorCode.UNPARSEABLE_SOURCE_RECORD)
    source = {"file": "/var/log/app.log", "offset": 4096}
    [result] = publisher.dead_letter(readings, [Unparsed(raw="{oops", error=error, source=source)])

    assert (result.error_code, result.message, result.dead_lettered) == (
        ErrorCode.UNPARSEABLE_SOURCE_RECORD,
        "line 12: not JSON",
        True,
    )
    [letter] = producer.on("plant.readings.dlq")
    assert json.loads(letter.value or b"") == {"raw": "{oops", "source": source}
    headers = dict(letter.headers)
    assert headers["hub.error.code"] == b"42242"
    assert headers["hub.feed"] == b"plant.readings"
    assert json.loads(headers["hub.source.partition"]) == source
    assert producer.on("plant.readings") == []


def test_a_dead_letter_kafka_did_not_take_is_not_reported_as_dead_lettered(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    producer.failures["plant.readings.dlq"] = Delivery(error="Broker: timed out", retriable=True)
    error = TerminalError("not JSON", code=ErrorCode.UNPARSEABLE_SOURCE_RECORD)
    [result] = publisher.dead_letter(readings, [Unparsed(raw="x", error=error)])

    assert result.error_code is ErrorCode.KAFKA_UNAVAILABLE
    assert not result.dead_lettered


def test_an_atomic_batch_with_an_invalid_record_publishes_nothing(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    outcome = publisher.publish(
        readings,
        [_reading(1), _reading(2, celsius=None), _reading(3)],
        atomic=True,
        on_error=OnError.DLQ,  # not even the dead letter: all or nothing
    )

    first, invalid, last = outcome.results
    assert invalid.error_code is ErrorCode.INVALID_RECORD
    for held_back in (first, last):
        assert held_back.error_code is ErrorCode.BATCH_REJECTED
        assert "record 1 is invalid" in (held_back.message or "")
    assert producer.sent == []
    assert producer.calls == 0


def test_an_atomic_batch_of_valid_records_is_published_together(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    outcome = publisher.publish(readings, [_reading(1), _reading(2)], atomic=True)

    assert [(r.partition, r.offset) for r in outcome.results] == [(0, 0), (0, 1)]
    assert producer.calls == 1


def test_a_pinned_schema_version_encodes_with_that_version(
    publisher: Publisher, readings: Feed, registry: RegistryService, producer: FakeProducer
) -> None:
    newer = {
        **READING,
        "fields": [*READING["fields"], {"name": "note", "type": "string", "default": ""}],
    }
    registry.register(subject=Subject("plant.readings-value"), schema_text=json.dumps(newer))

    pinned = publisher.publish(readings, [_reading(1)], schema_version=Version(1))
    latest = publisher.publish(readings, [_reading(2, note="recalibrated")])

    assert (pinned.schema_version, latest.schema_version) == (1, 2)
    first, second = producer.on("plant.readings")
    assert unframe(first.value or b"")[0] == pinned.schema_id != latest.schema_id
    assert unframe(second.value or b"")[0] == latest.schema_id


def test_publishing_on_an_event_loop_answers_as_publishing_on_a_thread(
    publisher: Publisher, readings: Feed, producer: FakeProducer
) -> None:
    records = [_reading(1), _reading(2, id="two"), _reading(3)]
    on_thread = publisher.publish(readings, records, on_error=OnError.DLQ)
    on_loop = asyncio.run(
        publisher.publish_async(publisher.codecs(readings), records, on_error=OnError.DLQ)
    )

    def shape(outcome: Any) -> list[tuple[object, ...]]:
        return [(r.ok, r.error_code, r.path, r.dead_lettered) for r in outcome.results]

    assert shape(on_loop) == shape(on_thread)
    assert [r.offset for r in on_loop.results if r.ok] == [2, 3]
    assert len(producer.on("plant.readings.dlq")) == 2
