"""The shared producer against the real broker: every record answered, in order, even when more
records are sent at once than its local queue holds."""

import asyncio

import pytest

from hub_kafka.admin import TopicAdmin
from hub_kafka.producer import Delivery, EncodedRecord, FeedProducer, Report
from hub_kafka.settings import KafkaSettings
from tests.support.hub_client import unique_topic
from tests.support.kafka import read_all

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
