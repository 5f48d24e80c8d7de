"""The producers against the real broker: every record answered, in order, even when more
records are sent at once than the local queue holds; a connector task's batch producer answers
the records Kafka refused, in their places."""

import asyncio
import os

import pytest

from hub_kafka.admin import TopicAdmin
from hub_kafka.producer import (
    BatchProducer,
    Delivery,
    EncodedRecord,
    FeedProducer,
    OutgoingRecord,
    Report,
)
from hub_kafka.settings import KafkaSettings
from tests.support.hub_client import unique_topic
from tests.support.kafka import read_all
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

QUEUE = 10  # records librdkafka may hold unacknowledged
RECORDS = 250


@pytest.fixture
def small_queue(kafka_bootstrap: str) -> KafkaSettings:
    return KafkaSettings(bootstrap_servers=kafka_bootstrap, producer_queue_max_messages=QUEUE)


def _records(topic: str, tag: str) -> list[EncodedRecord]:
    return [
        (topic, f"k{n % 7}".encode(), f"{tag}-{n}".encode(), None, None) for n in range(RECORDS)
    ]


def _check(reports: list[Report]) -> None:
    assert len(reports) == RECORDS
    failed = [r for r in reports if isinstance(r, Delivery)]
    assert failed == []
    by_partition: dict[int | None, list[int | None]] = {}
    for partition, offset in reports:  # type: ignore[misc]  # all tuples, checked above
        by_partition.setdefault(partition, []).append(offset)
    for offsets in by_partition.values():
        assert offsets == sorted(offsets), "one partition's records kept their order"


def _topic(settings: KafkaSettings) -> str:
    topic = unique_topic("producer")
    TopicAdmin(settings).create(topic, partitions=3, config={})
    return topic


def test_a_batch_larger_than_the_local_queue_waits_for_room(small_queue: KafkaSettings) -> None:
    topic = _topic(small_queue)
    producer = FeedProducer(small_queue)
    try:
        _check(producer.produce_encoded(_records(topic, "sync")))
    finally:
        producer.close()
    stored = read_all(small_queue.bootstrap_servers, topic, expected=RECORDS)
    assert sorted(m.value() for m in stored) == sorted(f"sync-{n}".encode() for n in range(RECORDS))


def test_awaiting_acknowledgements_on_an_event_loop(small_queue: KafkaSettings) -> None:
    topic = _topic(small_queue)
    producer = FeedProducer(small_queue)

    async def three_requests_at_once() -> list[list[Report]]:
        return await asyncio.gather(
            *(producer.produce_encoded_async(_records(topic, f"r{n}")) for n in range(3))
        )

    try:
        answers = asyncio.run(three_requests_at_once())
    finally:
        producer.close()
    for reports in answers:
        _check(reports)
    stored = read_all(small_queue.bootstrap_servers, topic, expected=3 * RECORDS)
    sent = [f"r{r}-{n}".encode() for r in range(3) for n in range(RECORDS)]
    assert sorted(m.value() for m in stored) == sorted(sent)


def test_a_batch_producer_answers_a_whole_batch_once_kafka_stored_it(
    small_queue: KafkaSettings,
) -> None:
    topic = _topic(small_queue)
    producer = BatchProducer(small_queue)
    try:
        reports = producer.produce_encoded(_records(topic, "batch"))
    finally:
        producer.close()
    assert reports == [(None, None)] * RECORDS  # stored; where is not reported
    stored = read_all(small_queue.bootstrap_servers, topic, expected=RECORDS)
    by_key: dict[bytes | None, list[int]] = {}
    partitions: dict[bytes | None, set[int]] = {}
    for message in sorted(stored, key=lambda m: (m.partition(), m.offset())):
        by_key.setdefault(message.key(), []).append(int(message.value().split(b"-")[1]))
        partitions.setdefault(message.key(), set()).add(message.partition())
    assert all(len(p) == 1 for p in partitions.values()), "a key's records share a partition"
    assert len(set().union(*partitions.values())) > 1, "the partitioner spread the keys"
    assert sorted(n for numbers in by_key.values() for n in numbers) == list(range(RECORDS))
    for numbers in by_key.values():
        assert numbers == sorted(numbers), "one key's records kept their order"


def test_a_batch_producer_answers_the_records_kafka_refused_in_their_places(
    kafka_bootstrap: str,
) -> None:
    settings = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    admin = TopicAdmin(settings)
    roomy, strict = unique_topic("producer-roomy"), unique_topic("producer-strict")
    admin.create(roomy, partitions=1, config={})
    admin.create(strict, partitions=1, config={"max.message.bytes": "1024"})
    large = os.urandom(4000)  # within the client's limit, over the strict topic's, compressed too
    producer = BatchProducer(settings)
    try:
        reports = producer.produce_encoded(
            [
                (roomy, b"a", b"first", None, None),
                (strict, b"b", large, None, None),
                (roomy, b"c", b"third", [("h", b"v")], 1_700_000_000_000),
            ]
        )
        letters = producer.produce_many([(roomy, OutgoingRecord(key=None, value=b"letter"))])
    finally:
        producer.close()
    assert reports[0] == (None, None)
    assert reports[2] == (None, None)
    refused = reports[1]
    assert isinstance(refused, Delivery)
    assert refused.error is not None and "too large" in refused.error.lower()
    assert not refused.retriable
    assert letters == [Delivery()] and letters[0].ok
    stored = read_all(kafka_bootstrap, roomy, expected=3)
    assert [m.value() for m in stored] == [b"first", b"third", b"letter"]
    assert stored[1].headers() == [("h", b"v")]
    assert stored[1].timestamp()[1] == 1_700_000_000_000


def test_a_batch_producer_never_answers_stored_when_kafka_cannot_be_reached() -> None:
    settings = KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_port()}", delivery_timeout_ms=1500)
    producer = BatchProducer(settings)
    try:
        reports = producer.produce_encoded(_records("nowhere", "lost")[:5])
    finally:
        producer.close()
    assert len(reports) == 5
    for report in reports:
        assert isinstance(report, Delivery), "a record Kafka never took is not answered stored"
        assert report.retriable, "the connector publishes the batch again"
