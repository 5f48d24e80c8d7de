"""The Kafka client's promises that hold without a broker: settings checks, and that records
Kafka cannot be reached for are reported as retriable failures, never lost or left hanging."""

import pytest
from pydantic import ValidationError

from hub_core.naming import TopicName
from hub_kafka.producer import FeedProducer, OutgoingRecord
from hub_kafka.settings import KafkaSettings
from tests.support.ports import free_port

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
