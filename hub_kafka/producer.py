"""Producers that answer per record only after Kafka acknowledged it.

`FeedProducer` is the shared idempotent producer (`acks=all`); `BatchProducer` is one for a
single publisher that waits for whole batches (a connector task's); `TransactionalProducers`
publish all-or-nothing batches in Kafka transactions.
"""

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from hub_core.naming import TopicName
from hub_kafka.access import log_client_error
from hub_kafka.security import client_config
from hub_kafka.settings import KafkaSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    """A record ready for Kafka: already encoded key and value bytes."""

    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]] = ()
    timestamp_ms: int | None = None


# A record for `produce_encoded`: topic, key, value, headers, timestamp in epoch milliseconds.
EncodedRecord = tuple[str, bytes | None, bytes | None, list[tuple[str, bytes]] | None, int | None]


@dataclass(frozen=True, slots=True)
class Delivery:
    """What Kafka said about one record: where it landed, or why it did not."""

    partition: int | None = None
    offset: int | None = None
    error: str | None = None
    retriable: bool = False
    sent: bool = True  # False: never handed to Kafka (the local queue stayed full)

    @property
    def ok(self) -> bool:
        return self.error is None


# What `produce_encoded` answers per record: (partition, offset), or why it was not stored.
Report = tuple[int | None, int | None] | Delivery


class FeedProducer:
    """A shared producer; a background thread serves delivery reports to waiting requests."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._producer = Producer(_idempotent_config(settings))
        self._closed = threading.Event()
        self._poller = threading.Thread(
            target=self._serve_reports, name="kafka-delivery", daemon=True
        )
        self._poller.start()

    def produce(self, topic: TopicName, records: Sequence[OutgoingRecord]) -> list[Delivery]:
        """Send `records` to `topic` and wait until Kafka acknowledged or failed each one."""
        return self.produce_many([(topic, r) for r in records])

    def produce_many(self, items: Sequence[tuple[str, OutgoingRecord]]) -> list[Delivery]:
        """Send records to their topics and wait for every acknowledgement, in order."""
        pending = _Pending(len(items))
        for index, (topic, record) in enumerate(items):
            while not _enqueue(self._producer, topic, record, pending, index):
                self._producer.poll(_QUEUE_FULL_PAUSE_S)  # the local queue is full: let it drain
        pending.wait(self._report_timeout_s)
        return pending.deliveries()

    def produce_encoded(self, items: Sequence[EncodedRecord]) -> list[Report]:
        """As `produce_many`, for records as plain tuples, answered as `(partition, offset)`
        when acknowledged and as a `Delivery` when not.

        The publish path sends hundreds of records per request: a tuple per record in and out
        costs a fraction of an `OutgoingRecord` and a `Delivery` each.
        """
        pending = _Pending(len(items))
        sent = 0
        deadline = time.monotonic() + self._queue_wait_s
        while (sent := self._send_encoded(items, sent, pending)) < len(items):
            if time.monotonic() >= deadline:
                _not_sent(pending, sent, len(items))
                break
            self._producer.poll(_QUEUE_FULL_PAUSE_S)  # the local queue is full: let it drain
        pending.wait(self._report_timeout_s)
        return pending.reports()

    async def produce_encoded_async(self, items: Sequence[EncodedRecord]) -> list[Report]:
        """As `produce_encoded`, awaiting the acknowledgements instead of blocking a thread.

        The records are handed to librdkafka on the calling (event loop) thread; the delivery
        thread wakes the request when the last report is in. Requests that wait this way hold
        no thread each, and the publish path's Python work runs on one thread instead of
        contending for the GIL across a pool.
        """
        sending = await self.send_encoded_async(items)
        return await sending.reports()

    async def send_encoded_async(self, items: Sequence[EncodedRecord]) -> "Sending":
        """The first half of `produce_encoded_async`: hand `items` to librdkafka (waiting on
        the event loop while its queue is full) and return what awaits their reports.

        Batches sent one after another, each awaited before the next is sent, reach Kafka in
        that order: a stream of records keeps its order while many batches await their
        acknowledgements at once.
        """
        loop = asyncio.get_running_loop()
        done = loop.create_future()

        def wake() -> None:  # on the delivery thread
            with suppress(RuntimeError):  # the loop closed while the request waited
                loop.call_soon_threadsafe(_resolve, done)

        pending = _Pending(len(items), on_done=wake)
        sent = 0
        deadline = time.monotonic() + self._queue_wait_s
        while (sent := self._send_encoded(items, sent, pending)) < len(items):
            if time.monotonic() >= deadline:
                _not_sent(pending, sent, len(items))
                break
            await asyncio.sleep(_QUEUE_FULL_PAUSE_S)  # the local queue is full: let it drain
        return Sending(pending, done, self._report_timeout_s)

    def _send_encoded(self, items: Sequence[EncodedRecord], start: int, pending: "_Pending") -> int:
        """Hand `items[start:]` to librdkafka; the position reached (short if its queue is full)."""
        producer = self._producer
        report = pending.report
        for index in range(start, len(items)):
            topic, key, value, headers, timestamp_ms = items[index]
            if not _send(producer, topic, key, value, headers, timestamp_ms, report, pending,
                         index):  # fmt: skip
                return index
        return len(items)

    @property
    def _queue_wait_s(self) -> float:
        return self._settings.producer_queue_wait_ms / 1000

    @property
    def _report_timeout_s(self) -> float:
        # delivery.timeout.ms bounds every report; the margin covers the poll interval.
        return self._settings.delivery_timeout_ms / 1000 + 5

    def close(self) -> None:
        """Deliver what is queued (bounded by the delivery timeout), stop the poller, then
        destroy the producer now (`hub_kafka.handles`)."""
        self._producer.flush(self._settings.delivery_timeout_ms / 1000)
        self._closed.set()
        self._poller.join(timeout=5)
        self._producer.close()

    def _serve_reports(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.1)


class Sending:
    """Records handed to the producer, whose delivery reports can be awaited."""

    __slots__ = ("_done", "_pending", "_timeout_s")

    def __init__(self, pending: "_Pending", done: "asyncio.Future[None]", timeout_s: float) -> None:
        self._pending = pending
        self._done = done
        self._timeout_s = timeout_s

    async def reports(self) -> list[Report]:
        """Every record's report, in order, once all are in; records not reported in time
        are answered as not acknowledged."""
        with suppress(TimeoutError):
            await asyncio.wait_for(self._done, self._timeout_s)
        return self._pending.reports()


class BatchProducer:
    """A producer for one publisher that sends a batch at a time and waits for all of it.

    A connector task publishes batch after batch, and needs to know only that a whole batch is
    stored, or which of its records are not. `FeedProducer` has librdkafka call back into
    Python for every record with a message object made for it: about 1.5-2 µs of CPU a
    record more (`bench/delivery_reports.py`), a tenth of what a CDC change costs. This
    producer asks librdkafka to report failures only (`delivery.report.only.error`) and waits
    for a batch with `flush`, which returns once each record it holds is stored or has failed.
    A stored record is answered `(None, None)`: where it landed is not known. A failed one is
    found in the batch by its topic, key and value.

    One batch is in flight at a time (a lock), so `flush` waits for that batch alone and every
    failure heard belongs to it: one producer per publishing task, as Kafka Connect gives each
    task its own. Records still unanswered when the wait ends (`delivery.timeout.ms` and a
    margin) are answered as not acknowledged, so a batch published again may store some of
    them twice: at least once, as a connector's positions already are. A failure heard later,
    of such a record, counts against a record of the batch then in flight only if one is alike,
    which is then published again.
    """

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self._failures: list[tuple[str | None, bytes | None, bytes | None, KafkaError]] = []
        self._lock = threading.Lock()
        self._producer = Producer(
            {
                **_idempotent_config(settings),
                "delivery.report.only.error": True,
                "on_delivery": self._failed,
            }
        )

    def _failed(self, err: KafkaError, msg: Message) -> None:  # in `flush`, on the caller
        self._failures.append((msg.topic(), msg.key() or None, msg.value() or None, err))

    def produce_encoded(self, items: Sequence[EncodedRecord]) -> list[Report]:
        """As `FeedProducer.produce_encoded`, answering a stored record `(None, None)`."""
        with self._lock:
            reports: list[Report] = [_STORED] * len(items)
            sent = self._send(items, reports)
            if sent < len(items):
                log.warning("producer queue full: %d records not sent", len(items) - sent)
                reports[sent:] = [QUEUE_FULL] * (len(items) - sent)
            unanswered = self._producer.flush(self._settings.delivery_timeout_ms / 1000 + 5)
            failures, self._failures = self._failures, []
            if unanswered:
                log.warning("Kafka left %d records unanswered in time: the batch's records "
                            "are answered as not acknowledged", unanswered)  # fmt: skip
                reports[:sent] = [_NOT_ACKNOWLEDGED if r is _STORED else r for r in reports[:sent]]
            if failures:
                _place(failures, items[:sent], reports)
            return reports

    def produce_many(self, items: Sequence[tuple[str, OutgoingRecord]]) -> list[Delivery]:
        """As `FeedProducer.produce_many`; a stored record's `Delivery` has no place."""
        encoded = [
            (topic, r.key, r.value, list(r.headers) or None, r.timestamp_ms) for topic, r in items
        ]
        return [
            report if isinstance(report, Delivery) else _STORED_DELIVERY
            for report in self.produce_encoded(encoded)
        ]

    def _send(self, items: Sequence[EncodedRecord], reports: list[Report]) -> int:
        """Hand `items` to librdkafka in order; how many it took before its queue stayed full
        for `producer_queue_wait_ms`. A record it refuses outright is answered in `reports`."""
        producer = self._producer
        deadline = time.monotonic() + self._settings.producer_queue_wait_ms / 1000
        for index, (topic, key, value, headers, timestamp_ms) in enumerate(items):
            while True:
                try:
                    producer.produce(
                        topic, value, key, _ANY_PARTITION, None, None, timestamp_ms or 0,
                        headers or None,  # type: ignore[arg-type]  # bytes values are accepted
                    )  # fmt: skip
                    break
                except BufferError:
                    if time.monotonic() >= deadline:
                        return index
                    producer.poll(_QUEUE_FULL_PAUSE_S)  # the local queue is full: let it drain
                except KafkaException as exc:
                    reports[index] = Delivery(error=str(exc), retriable=False)
                    break
        return len(items)

    def close(self) -> None:
        """Deliver what is queued (bounded by the delivery timeout), then destroy the producer
        now (`hub_kafka.handles`)."""
        with self._lock:
            self._producer.flush(self._settings.delivery_timeout_ms / 1000)
            self._producer.close()


# `Producer.produce` is called with positional arguments (topic, value, key, partition,
# callback, on_delivery, timestamp, headers): confluent-kafka takes about 0.4 µs more a call to
# parse keywords. A delivery callback goes in `callback`, the first of the two names it takes:
# a None there hides one given as `on_delivery`. The integration tests read the records'
# timestamps and headers back, and wait for their reports.
_ANY_PARTITION = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses, by key
# What `BatchProducer` answers for a record Kafka stored: where is not known.
_STORED: Report = (None, None)
_STORED_DELIVERY = Delivery()


def _place(
    failures: list[tuple[str | None, bytes | None, bytes | None, KafkaError]],
    items: Sequence[EncodedRecord],
    reports: list[Report],
) -> None:
    """Answer each failed record in `reports`, found in `items` by topic, key and value (the
    first not yet answered, when several are alike)."""
    places: dict[tuple[str | None, bytes | None, bytes | None], list[int]] = {}
    for index, (topic, key, value, _, _) in enumerate(items):
        places.setdefault((topic, key or None, value or None), []).append(index)
    for failed_topic, failed_key, failed_value, err in failures:
        indices = places.get((failed_topic, failed_key, failed_value))
        if indices:
            reports[indices.pop(0)] = _failure(err)


def _idempotent_config(settings: KafkaSettings) -> dict[str, object]:
    """The idempotent producer's settings (`acks=all`), as `FeedProducer` and `BatchProducer`
    use them."""
    return {
        **client_config(settings),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": settings.linger_ms,
        "queue.buffering.max.messages": settings.producer_queue_max_messages,
        "queue.buffering.max.kbytes": settings.producer_queue_max_kbytes,
        "delivery.timeout.ms": settings.delivery_timeout_ms,
        "compression.type": "lz4",
        "error_cb": log_client_error(settings),
    }


class TransactionalProducers:
    """A small pool of transactional producers for all-or-nothing batches (`atomic=true`).

    A transaction belongs to one producer at a time, so concurrent atomic requests each take
    one from the pool. Consumers that read with `isolation.level=read_committed` (the hub's
    loaders do) never see the records of an aborted batch.
    """

    def __init__(self, settings: KafkaSettings, *, id_prefix: str, size: int = 2) -> None:
        self._settings = settings
        self._id_prefix = id_prefix
        self._idle: queue.LifoQueue[Producer] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._created = 0
        self._lock = threading.Lock()

    def produce_atomically(self, items: Sequence[tuple[str, OutgoingRecord]]) -> list[Delivery]:
        """Publish all of `items` in one transaction: every one acknowledged, or none visible."""
        with self._slots:
            try:
                producer = self._take()
            except KafkaException as exc:
                return _all_failed(items, f"No transactional producer: {exc.args[0].str()}")
            try:
                return self._transaction(producer, items)
            finally:
                self._idle.put(producer)

    def _transaction(
        self, producer: Producer, items: Sequence[tuple[str, OutgoingRecord]]
    ) -> list[Delivery]:
        timeout_s = self._settings.delivery_timeout_ms / 1000
        pending = _Pending(len(items))
        deadline = time.monotonic() + self._settings.producer_queue_wait_ms / 1000
        try:
            producer.begin_transaction()
            for index, (topic, record) in enumerate(items):
                while not _enqueue(producer, topic, record, pending, index):
                    if time.monotonic() >= deadline:
                        log.warning("atomic batch aborted: the producer queue stayed full")
                        producer.abort_transaction(timeout_s)
                        return [QUEUE_FULL for _ in items]
                    producer.poll(_QUEUE_FULL_PAUSE_S)  # the local queue is full: let it drain
            producer.commit_transaction(timeout_s)
        except KafkaException as exc:
            error = exc.args[0]
            log.warning("atomic batch aborted: %s", error.str())
            if error.txn_requires_abort():
                producer.abort_transaction(timeout_s)
            return _all_failed(items, f"The atomic batch was aborted: {error.str()}")
        return pending.deliveries()

    def _take(self) -> Producer:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            self._created += 1
            transactional_id = f"{self._id_prefix}-{self._created}"
        producer = Producer(
            {
                **client_config(self._settings),
                "transactional.id": transactional_id,
                "linger.ms": self._settings.linger_ms,
                "queue.buffering.max.messages": self._settings.producer_queue_max_messages,
                "queue.buffering.max.kbytes": self._settings.producer_queue_max_kbytes,
                "compression.type": "lz4",
                "error_cb": log_client_error(self._settings),
            }
        )
        producer.init_transactions(self._settings.delivery_timeout_ms / 1000)
        return producer

    def close(self) -> None:
        """Deliver what the idle producers hold, then destroy them now (`hub_kafka.handles`)."""
        while True:
            try:
                producer = self._idle.get_nowait()
            except queue.Empty:
                return
            producer.flush(5)
            producer.close()


class _Pending:
    """The delivery reports of one request's records, and an event set when all are in.

    One per request rather than a Future per record. Reports arrive on the poller thread (or a
    request thread draining a full queue); `itertools.count` hands out the countdown atomically
    under the GIL, so no lock is taken per record, and a report is kept as the few values it
    carries until the request reads them. `on_done`, if given, is called once, on the thread
    that delivered the last report.
    """

    __slots__ = ("_count", "_done", "_on_done", "_reported", "_reports")

    def __init__(self, count: int, *, on_done: Callable[[], None] | None = None) -> None:
        self._reports: list[tuple[int | None, int | None] | Delivery | None] = [None] * count
        self._count = count
        self._reported = itertools.count(1)
        self._done = threading.Event()
        self._on_done = on_done
        if count == 0:
            self._finish()

    def _finish(self) -> None:
        self._done.set()
        if self._on_done is not None:
            self._on_done()

    def report(self, index: int, err: KafkaError | None, msg: Message) -> None:
        """A delivery report from librdkafka, for the record at `index`."""
        if err is None:
            self._reports[index] = (msg.partition(), msg.offset())
        else:
            self._reports[index] = _failure(err)
        if next(self._reported) == self._count:
            self._finish()

    def fail(self, index: int, delivery: Delivery) -> None:
        """A record that never reached the producer's queue."""
        self._reports[index] = delivery
        if next(self._reported) == self._count:
            self._finish()

    def wait(self, timeout_s: float) -> None:
        self._done.wait(timeout_s)

    def reports(self) -> list[Report]:
        """Every report: `(partition, offset)`, or a `Delivery` saying why not."""
        return [_NOT_ACKNOWLEDGED if r is None else r for r in self._reports]

    def deliveries(self) -> list[Delivery]:
        """Every report, with records Kafka never answered for reported as retriable failures."""
        out = []
        for report in self._reports:
            if isinstance(report, tuple):
                out.append(Delivery(partition=report[0], offset=report[1]))
            else:
                out.append(_NOT_ACKNOWLEDGED if report is None else report)
        return out


_NOT_ACKNOWLEDGED = Delivery(error="Kafka did not acknowledge the record in time.", retriable=True)
# A record never handed to librdkafka: its queue (bounded in records and bytes) stayed full for
# `producer_queue_wait_ms`. Waiting longer would hold the request's memory without bound, and
# the record was never sent, so answering it as unsent cannot duplicate it.
QUEUE_FULL = Delivery(error="The producer's queue stayed full.", retriable=True, sent=False)
_QUEUE_FULL_PAUSE_S = 0.05


def _not_sent(pending: _Pending, start: int, end: int) -> None:
    """Report the records from `start` on as never sent, in order: none of them reached the
    queue, and later ones must not overtake them."""
    log.warning("producer queue full: %d records not sent", end - start)
    for index in range(start, end):
        pending.fail(index, QUEUE_FULL)


def _resolve(future: "asyncio.Future[None]") -> None:
    if not future.done():  # a request that timed out has cancelled its future
        future.set_result(None)


def _enqueue(
    producer: Producer, topic: str, record: OutgoingRecord, pending: _Pending, index: int
) -> bool:
    """As `_send`, for an `OutgoingRecord`."""
    headers: list[tuple[str, bytes]] | None = None
    if record.headers:
        headers = record.headers if type(record.headers) is list else list(record.headers)
    return _send(
        producer, topic, record.key, record.value, headers, record.timestamp_ms,
        pending.report, pending, index,
    )  # fmt: skip


def _send(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes]] | None,
    timestamp_ms: int | None,
    report: Callable[[int, KafkaError | None, Message], None],
    pending: _Pending,
    index: int,
) -> bool:
    """Hand one record to librdkafka; False if its local queue is full (try again later).

    A record librdkafka refuses outright is reported to `pending` as failed.
    """

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        report(index, err, msg)

    try:
        producer.produce(
            topic, value, key, _ANY_PARTITION, on_delivery, None, timestamp_ms or 0,
            headers or None,  # type: ignore[arg-type]  # bytes values are accepted
        )  # fmt: skip
    except BufferError:
        return False
    except KafkaException as exc:
        pending.fail(index, Delivery(error=str(exc), retriable=False))
    return True


# Failures that mean "Kafka could not be reached in time", not "Kafka refused the record":
# librdkafka does not flag them retriable, because it has already retried them itself.
_UNREACHABLE = frozenset(
    {
        KafkaError._MSG_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_ENOUGH_REPLICAS,
        KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)


def _failure(err: KafkaError) -> Delivery:
    """A failed delivery as librdkafka reported it."""
    return Delivery(error=err.str(), retriable=err.retriable() or err.code() in _UNREACHABLE)


def _all_failed(items: Sequence[object], message: str) -> list[Delivery]:
    return [Delivery(error=message, retriable=True) for _ in items]
