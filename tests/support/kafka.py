"""Reading topics back in tests."""

import time

from confluent_kafka import Consumer, Message, TopicPartition


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
