"""Reading topics to show them: record counts over time and the latest records.

What the console shows of a feed comes from Kafka itself, not from counters a process keeps:
how many records arrived per interval is the difference of the offsets Kafka finds for the
interval's bounds (`ListOffsets` by timestamp, which every broker answers from its time index),
and the latest records are read by assigning each partition a few offsets before its end. The
answers survive restarts of the API and agree across its replicas; they count records as
published (a compacted topic's cleaned records included), which is what "records per second"
means to a publisher.

The reader never joins a consumer group and never commits: it is invisible to everyone else.
"""

import itertools
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import ListOffsetsResultInfo, OffsetSpec

from hub_kafka.errors import KafkaUnavailable
from hub_kafka.handles import Admin
from hub_kafka.security import client_config
from hub_kafka.settings import KafkaSettings

_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class TopicActivity:
    """Records per interval of a topic, oldest first, and its newest record's time."""

    topic: str
    interval_s: int
    counts: tuple[int, ...]
    end_offsets: dict[int, int]
    # The largest record timestamp of any partition (ms since the epoch), None when empty.
    last_timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One record as Kafka holds it."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


class TopicReader:
    """Counts and reads records of topics for display; one per process, thread-safe."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._admin = Admin(client_config(settings), owner="topic reader")
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Destroy the clients now (`hub_kafka.handles`)."""
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
        self._admin.close()

    def activity(
        self, partitions: dict[str, int], *, intervals: int, interval_s: int
    ) -> dict[str, TopicActivity]:
        """Records per interval over the last `intervals` intervals of each topic in
        `partitions` (topic -> its partition count); topics Kafka does not know are left out."""
        now_ms = int(time.time() * 1000)
        bounds = [now_ms - (intervals - k) * interval_s * 1000 for k in range(intervals)]
        wanted = [TopicPartition(t, p) for t, n in partitions.items() for p in range(n)]
        if not wanted:
            return {}
        # Every request goes out at once; the answers come back in about one round trip.
        asked = [self._list_offsets(wanted, OffsetSpec.for_timestamp(b)) for b in bounds]
        ends = self._list_offsets(wanted, OffsetSpec.latest())
        newest = _timestamps(self._list_offsets(wanted, OffsetSpec.max_timestamp()))
        end_offsets = _answers(ends)
        at_bound = [_answers(answer) for answer in asked]
        found = {}
        for topic, count in partitions.items():
            tps = [(topic, p) for p in range(count)]
            if any(tp not in end_offsets for tp in tps):
                continue  # the topic is gone, or not yet there
            at_bounds = []
            for offsets in at_bound:
                # No record at or after the bound (offset -1): the bound is past the end.
                at_bounds.append(
                    [offsets[tp] if offsets.get(tp, -1) >= 0 else end_offsets[tp] for tp in tps]
                )
            at_bounds.append([end_offsets[tp] for tp in tps])
            counts = tuple(
                sum(end - start for start, end in zip(before, after, strict=True))
                for before, after in itertools.pairwise(at_bounds)
            )
            stamps = [newest[tp] for tp in tps if tp in newest]
            found[topic] = TopicActivity(
                topic=topic,
                interval_s=interval_s,
                counts=counts,
                end_offsets={p: end_offsets[(topic, p)] for p in range(count)},
                last_timestamp_ms=max(stamps) if stamps else None,
            )
        return found

    def latest(self, topic: str, *, limit: int) -> list[RawRecord]:
        """The newest `limit` records of `topic` across its partitions, newest first; none when
        Kafka does not know the topic."""
        try:
            described = self._admin.client.list_topics(topic, timeout=_TIMEOUT_S).topics.get(topic)
        except KafkaException as exc:
            raise KafkaUnavailable(f"Kafka did not describe topic '{topic}': {exc}") from exc
        if described is None or described.error is not None:
            return []
        partitions = len(described.partitions)
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        ends = _answers(self._list_offsets(wanted, OffsetSpec.latest()))
        starts = _answers(self._list_offsets(wanted, OffsetSpec.earliest()))
        assignment = []
        remaining = 0
        for p in range(partitions):
            end, start = ends.get((topic, p), 0), starts.get((topic, p), 0)
            first = max(start, end - limit)
            if end > first:
                assignment.append(TopicPartition(topic, p, first))
                remaining += end - first
        if not assignment:
            return []
        records = self._read(assignment, ends, remaining)
        records.sort(key=lambda r: (r.timestamp_ms, r.offset), reverse=True)
        return records[:limit]

    def at(self, topic: str, partition: int, offset: int) -> RawRecord | None:
        """The record at (`topic`, `partition`, `offset`); None when Kafka no longer holds it
        (retention, compaction) or never did."""
        wanted = [TopicPartition(topic, partition)]
        ends = _answers(self._list_offsets(wanted, OffsetSpec.latest()))
        starts = _answers(self._list_offsets(wanted, OffsetSpec.earliest()))
        end, start = ends.get((topic, partition)), starts.get((topic, partition))
        if end is None or start is None or not start <= offset < end:
            return None
        assignment = [TopicPartition(topic, partition, offset)]
        found = self._read(assignment, {(topic, partition): offset + 1}, 1)
        # Compaction leaves gaps: the first record read may come after the one asked for.
        return next((r for r in found if r.offset == offset), None)

    def _read(
        self, assignment: list[TopicPartition], ends: dict[tuple[str, int], int], remaining: int
    ) -> list[RawRecord]:
        records: list[RawRecord] = []
        deadline = time.monotonic() + _TIMEOUT_S
        with self._lock:
            consumer = self._reading_consumer()
            consumer.assign(assignment)
            try:
                open_partitions = {(tp.topic, tp.partition) for tp in assignment}
                while open_partitions and time.monotonic() < deadline:
                    for message in consumer.consume(num_messages=remaining, timeout=0.1):
                        error = message.error()
                        if error is not None:
                            if error.code() == KafkaError._PARTITION_EOF:
                                open_partitions.discard((message.topic(), message.partition()))
                                continue
                            raise KafkaUnavailable(f"Kafka: reading failed: {error.str()}")
                        record = _raw(message)
                        records.append(record)
                        if record.offset + 1 >= ends[(record.topic, record.partition)]:
                            open_partitions.discard((record.topic, record.partition))
            finally:
                consumer.unassign()
        return records

    def _reading_consumer(self) -> Consumer:
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    **client_config(self._settings),
                    "group.id": "hub-api-reader",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    # A page waits for these reads: no backing off between fetches.
                    "fetch.wait.max.ms": 20,
                    "fetch.error.backoff.ms": 20,
                    "fetch.queue.backoff.ms": 20,
                }
            )
        return self._consumer

    def _list_offsets(
        self, partitions: Sequence[TopicPartition], spec: OffsetSpec
    ) -> dict[TopicPartition, Future[ListOffsetsResultInfo]]:
        try:
            return self._admin.client.list_offsets(
                {tp: spec for tp in partitions}, request_timeout=_TIMEOUT_S
            )
        except KafkaException as exc:
            raise KafkaUnavailable(f"Kafka did not list offsets: {exc}") from exc


def _answers(
    futures: dict[TopicPartition, Future[ListOffsetsResultInfo]],
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> offset for each partition Kafka answered (unknown ones left out)."""
    found: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            found[(tp.topic, tp.partition)] = future.result(timeout=_TIMEOUT_S).offset
        except KafkaException as exc:
            if exc.args and exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                continue
            raise KafkaUnavailable(f"Kafka did not list offsets: {exc}") from exc
    return found


def _timestamps(
    futures: dict[TopicPartition, Future[ListOffsetsResultInfo]],
) -> dict[tuple[str, int], int]:
    """(topic, partition) -> its largest record timestamp, for partitions that hold records."""
    found: dict[tuple[str, int], int] = {}
    for tp, future in futures.items():
        try:
            info = future.result(timeout=_TIMEOUT_S)
        except KafkaException:
            continue  # a missing topic is left out by `_answers` already
        if info.offset >= 0 and info.timestamp >= 0:
            found[(tp.topic, tp.partition)] = info.timestamp
    return found


def _raw(message: Message) -> RawRecord:
    return RawRecord(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=message.offset() or 0,
        timestamp_ms=message.timestamp()[1],
        key=_bytes(message.key()),
        value=_bytes(message.value()),
        headers=tuple((h[0], _bytes(h[1]) or b"") for h in message.headers() or ()),
    )


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data
