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
    Message,
    TopicPartition,
)

from hub_core.naming import TopicName
from hub_kafka.admin import TopicAdmin
from hub_kafka.errors import KafkaUnavailable
from hub_kafka.producer import FeedProducer, OutgoingRecord
from hub_kafka.security import client_config
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
        self._cache: StateCache | None = None
        self.consumers_opened = 0  # Kafka consumers this topic built to read itself

    def follow_with(self, cache: "StateCache") -> None:
        """Read from `cache` from now on, and wait for it to see each write of ours."""
        self._cache = cache

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
        """Write `value` (None: a tombstone) under `key` and wait for Kafka's acknowledgement,
        and, when a cache follows this topic, until the cache has seen it (read-after-write)."""
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
        if self._cache is not None and delivery.offset is not None:
            self._cache.wait_for(self.topic, delivery.offset + 1)

    def snapshot(self) -> dict[str, Any]:
        """The latest value of every key: from the cache that follows the topic, or read from
        the beginning to the current end."""
        if self._cache is not None:
            return self._cache.values(self.topic)
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
        self.consumers_opened += 1
        return consumer(self._kafka)


def consumer(kafka: KafkaSettings) -> Consumer:
    """A consumer of state topics: assigned partitions, no group offsets."""
    return Consumer(
        {
            **client_config(kafka),
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


class StateCache:
    """The latest value of every key of some state topics, kept current by one consumer.

    The API answers every connector request from memory: building a consumer per request
    costs a connection, a metadata round trip and a read of the whole topic, for every GET.
    One thread per API worker follows the topics from their beginning instead. Readers wait
    (at most `timeout_s`) until it has caught up with the ends the topics had when it started;
    writers wait until it has seen their own write (`wait_for`), so a pause is visible to the
    next GET of the same worker.
    """

    def __init__(
        self, topics: list[StateTopic], *, kafka: KafkaSettings, timeout_s: float = _TIMEOUT_S
    ) -> None:
        self._topics = topics
        self._kafka = kafka
        self._timeout_s = timeout_s
        self._values: dict[str, dict[str, Any]] = {t.topic: {} for t in topics}
        self._positions: dict[str, int] = {t.topic: 0 for t in topics}
        self._changed = threading.Condition()
        self._caught_up = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="connector-state", daemon=True)
        self.consumers_opened = 0

    def start(self) -> None:
        """Start following; the topics are read in the background."""
        for topic in self._topics:
            topic.follow_with(self)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=_TIMEOUT_S)

    def values(self, topic: str) -> dict[str, Any]:
        """A copy of the latest value of every key of `topic`, once the cache caught up."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._caught_up, self._timeout_s):
                raise self._unavailable("has not been read to its end yet")
            return dict(self._values[topic])

    def wait_for(self, topic: str, position: int) -> None:
        """Wait until the cache has read `topic` up to `position` (an offset past a write)."""
        with self._changed:
            if not self._changed.wait_for(
                lambda: self._positions[topic] >= position, self._timeout_s
            ):
                raise self._unavailable(f"has not reached offset {position - 1}")

    def _unavailable(self, what: str) -> KafkaUnavailable:
        return KafkaUnavailable(
            f"The connector state in Kafka {what} after {self._timeout_s:.0f} s. Check that "
            f"Kafka at {self._kafka.bootstrap_servers} is reachable."
        )

    def _run(self) -> None:
        """Create the topics if needed, then follow them until stopped. Kafka being away (or
        any other failure) is logged and tried again a second later: readers get 503 meanwhile,
        and the reader must not die with the worker still serving."""
        while not self._stop.is_set():
            try:
                for topic in self._topics:
                    topic.ensure()
                self._follow()
                return
            except Exception as exc:  # the one reader must outlive any failure
                log.warning("connector state: cannot read its topics yet: %s", exc)
                self._stop.wait(1.0)

    def _follow(self) -> None:
        reader = consumer(self._kafka)
        self.consumers_opened += 1
        try:
            ends = {t.topic: t._watermarks(reader)[1] for t in self._topics}
            reader.assign([TopicPartition(t, 0, OFFSET_BEGINNING) for t in ends])
            idle = 0
            while not self._stop.is_set():
                messages = reader.consume(num_messages=500, timeout=0.2)
                idle = 0 if messages else idle + 1
                self._apply(messages)
                if not self._caught_up and (idle >= _IDLE_POLLS or self._reached(ends)):
                    with self._changed:
                        self._caught_up = True
                        self._changed.notify_all()
        finally:
            reader.close()

    def _reached(self, ends: dict[str, int]) -> bool:
        return all(self._positions[topic] >= end for topic, end in ends.items())

    def _apply(self, messages: list[Message]) -> None:
        if not messages:
            return
        with self._changed:
            for message in messages:
                topic = message.topic()
                if message.error() is not None or topic not in self._values:
                    continue
                _apply(self._values[topic], message.key(), message.value())
                self._positions[topic] = (message.offset() or 0) + 1
            self._changed.notify_all()
