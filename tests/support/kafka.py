"""Reading topics back in tests."""

import time
from typing import Any

from confluent_kafka import Consumer, DeserializingConsumer, Message, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import Deserializer, StringDeserializer


def read_all(
    bootstrap: str, topic: str, *, expected: int, timeout_s: float = 30.0
) -> list[Message]:
    """Every message of `topic` from the beginning, once at least `expected` have arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tests-{topic}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    metadata = consumer.list_topics(topic, timeout=10)
    partitions = [TopicPartition(topic, p, 0) for p in metadata.topics[topic].partitions]
    consumer.assign(partitions)
    messages: list[Message] = []

    deadline = time.monotonic() + timeout_s
    while len(messages) < expected and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=1.0):
            if message.error() is None:
                messages.append(message)
    consumer.close()
    return messages


def read_avro(
    registry_url: str,
    bootstrap: str,
    topic: str,
    *,
    expected: int,
    key_deserializer: Deserializer | None = None,
) -> list[tuple[Any, Any]]:
    """(key, value) of the topic's records, read with confluent-kafka's own Avro deserializer
    against the registry at `registry_url`, once `expected` have arrived (or after 60 s)."""
    registry = SchemaRegistryClient({"url": registry_url})
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tests-avro-{topic}",
            "auto.offset.reset": "earliest",
            "key.deserializer": key_deserializer or StringDeserializer("utf_8"),
            "value.deserializer": AvroDeserializer(registry),
        }
    )
    consumer.subscribe([topic])
    received: list[tuple[Any, Any]] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received.append((message.key(), message.value()))
            if len(received) == expected:
                break
    finally:
        consumer.close()
    return received
