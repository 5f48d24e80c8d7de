"""Compacted Kafka topics used as small key-value tables (offsets, configs, status).

Kafka Connect keeps its shared state the same way: the latest record per key is the value,
a tombstone deletes it, and any process that reaches Kafka can read it. That is what lets the
API answer for connectors running in other processes.
"""

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from hub_core.naming import TopicName
from hub_kafka.admin import TopicAdmin
from hub_kafka.errors import KafkaUnavailable
from hub_kafka.producer import FeedProducer, OutgoingRecord
from hub_kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

_TIMEOUT_S = 10.0
# Empty polls after which a read stops short of the end offset (a gap left by compaction).
_IDLE_POLLS = 10
_NOT_YET_KNOWN = frozenset({KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART})


class StateTopic:
    """One compacted, single-partition topic of JSON values keyed by text."""

    def __init__(
        self, topic: str, *, kafka: KafkaSettings, admin: TopicAdmin, producer: FeedProducer | None
    ) -> None:
        self.topic = topic
        self._kafka = kafka
        self._admin = admin
        self._producer = producer
        self._ensured = False

    def ensure(self) -> None:
        """Create the topic (compacted, one partition, so order per key is total) if missing."""
        if not self._ensured:
            self._admin.create(
                self.topic,
                partitions=1,
                config={"cleanup.policy": "compact", "min.compaction.lag.ms": "0"},
            )
            self._ensured = True

    def put(self, key: str, value: Any) -> None:
        """Write `value` (None: a tombstone) under `key` and wait for Kafka's acknowledgement."""
        if self._producer is None:
            raise RuntimeError(f"state topic {self.topic} was opened read-only")
        self.ensure()
        body = None if value is None else json.dumps(value, sort_keys=True).encode()
        [delivery] = self._producer.produce(
            TopicName(self.topic), [OutgoingRecord(key=key.encode(), value=body)]
        )
        if not delivery.ok:
            raise KafkaUnavailable(
                f"Kafka did not store '{key}' in {self.topic}: {delivery.error}. "
                f"Check that Kafka at {self._kafka.bootstrap_servers} is reachable."
            )

    def snapshot(self) -> dict[str, Any]:
        """The latest value of every key, read from the beginning to the current end."""
        self.ensure()
        values: dict[str, Any] = {}
        consumer = self._consumer()
        try:
            low, high = self._watermarks(consumer)
            if high <= low:
                return values
            consumer.assign([TopicPartition(self.topic, 0, OFFSET_BEGINNING)])
            position, idle = low, 0
            while position < high and idle < _IDLE_POLLS:
                messages = consumer.consume(num_messages=500, timeout=1.0)
                idle = 0 if messages else idle + 1
                for message in messages:
                    if message.error() is not None:
                        continue
                    _apply(values, message.key(), message.value())
                    position = (message.offset() or 0) + 1
        except KafkaException as exc:
            raise KafkaUnavailable(
                f"Could not read {self.topic}: {exc}. Check that Kafka at "
                f"{self._kafka.bootstrap_servers} is reachable."
            ) from exc
        finally:
            consumer.close()
        return values

    def follow(
        self, on_change: Callable[[str, Any], None], *, stop: threading.Event, start_at_end: bool
    ) -> None:
        """Call `on_change(key, value)` for each new record until `stop` is set."""
        self.ensure()
        consumer = self._consumer()
        try:
            start = OFFSET_BEGINNING
            if start_at_end:
                start = self._watermarks(consumer)[1]
            consumer.assign([TopicPartition(self.topic, 0, start)])
            while not stop.is_set():
                for message in consumer.consume(num_messages=100, timeout=0.5):
                    key, raw = message.key(), message.value()
                    if message.error() is None and key is not None:
                        on_change(key.decode(), None if raw is None else json.loads(raw))
        finally:
            consumer.close()

    def _watermarks(self, consumer: Consumer) -> tuple[int, int]:
        """Low and high offsets; a topic created a moment ago may take a while to be known.

        The loop waits for the new topic to appear, for at most `_TIMEOUT_S`: it is a poll for
        readiness, not a retry of a failure, so every other error is raised at once (Kafka
        being away is `KafkaUnavailable`, which the connector task retries with backoff).
        """
        deadline = time.monotonic() + _TIMEOUT_S
        while True:
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(self.topic, 0), timeout=_TIMEOUT_S
                )
                return low, high
            except KafkaException as exc:
                code = exc.args[0].code()
                if code not in _NOT_YET_KNOWN or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _consumer(self) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": self._kafka.bootstrap_servers,
                "group.id": f"hub-connect-state-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )


def _apply(values: dict[str, Any], key: bytes | None, value: bytes | None) -> None:
    if key is None:
        return
    name = key.decode()
    if value is None:
        values.pop(name, None)
    else:
        values[name] = json.loads(value)
