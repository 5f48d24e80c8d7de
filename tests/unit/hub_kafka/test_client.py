"""The Kafka client's promises that hold without a broker: settings checks, that records
Kafka cannot be reached for are reported as retriable failures, never lost or left hanging, and
that closing a client stops its threads at once."""

import gc
from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from hub_core.errors import ErrorCode
from hub_core.naming import TopicName
from hub_kafka.admin import TopicAdmin
from hub_kafka.errors import KafkaUnavailable
from hub_kafka.producer import FeedProducer, OutgoingRecord
from hub_kafka.reader import TopicReader
from hub_kafka.settings import KafkaSettings
from tests.support.ports import free_port
from tests.support.threads import librdkafka_threads

pytestmark = pytest.mark.unit


def test_the_local_broker_refuses_one_port_for_clients_and_controllers() -> None:
    with pytest.raises(ValidationError, match="HUB_KAFKA_CONTROLLER_PORT"):
        KafkaSettings(broker_port=19092, controller_port=19092)


def test_a_delivery_timeout_under_a_second_is_refused() -> None:
    with pytest.raises(ValidationError, match="delivery_timeout_ms"):
        KafkaSettings(delivery_timeout_ms=10)


def test_records_for_an_unreachable_kafka_are_reported_as_retriable_failures() -> None:
    # Nothing listens on the port: librdkafka gives up on each record after the timeout.
    settings = KafkaSettings(
        bootstrap_servers=f"127.0.0.1:{free_port()}", delivery_timeout_ms=1_000
    )
    producer = FeedProducer(settings)
    try:
        deliveries = producer.produce(
            TopicName("sales.orders"),
            [OutgoingRecord(key=None, value=b"one"), OutgoingRecord(key=b"k", value=b"two")],
        )
    finally:
        producer.close()
    assert len(deliveries) == 2
    assert all(not d.ok and d.retriable for d in deliveries)
    assert all(d.partition is None and d.offset is None for d in deliveries)


@pytest.fixture
def no_collection() -> Iterator[None]:
    """Clients other tests left to the garbage collector are destroyed first, and none while
    the test counts threads."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.usefixtures("no_collection")
def test_closing_the_admin_reader_and_producer_stops_their_threads_at_once() -> None:
    settings = KafkaSettings(bootstrap_servers=f"127.0.0.1:{free_port()}")
    before = librdkafka_threads()
    admin, reader, producer = TopicAdmin(settings), TopicReader(settings), FeedProducer(settings)
    assert librdkafka_threads() > before

    admin.close()
    reader.close()
    producer.close()
    # Still referenced here, and in a cycle in a real app: closing alone ended them.
    assert librdkafka_threads() == before
    assert admin.ping(timeout_s=0.1) is False
    with pytest.raises(KafkaUnavailable, match="topic admin is closed") as refused:
        admin.exists("sales.orders")
    assert refused.value.code == ErrorCode.KAFKA_UNAVAILABLE
