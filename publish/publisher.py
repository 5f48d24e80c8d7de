"""The one publish path: clean, validate, encode as framed Avro, produce to Kafka.

The REST gateway and every connector publish through `Publisher`, so a record is checked and
encoded the same way whichever door it came in by, and answered only after Kafka acknowledged it.
"""

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum, unique
from typing import Any, cast

from catalog.types import Feed, FeedKind
from hub_core.errors import ErrorCode, HubError
from hub_core.naming import TopicName, dlq_topic, key_subject, value_subject
from hub_kafka.producer import (
    BatchProducer,
    Delivery,
    EncodedRecord,
    FeedProducer,
    OutgoingRecord,
    Report,
    Sending,
    TransactionalProducers,
)
from publish.errors import RecordTooLarge
from publish.headers import caller_headers, hub_headers
from publish.timestamps import MAX_TIMESTAMP_AHEAD_MS, MAX_TIMESTAMP_MS, epoch_ms, too_far_ahead
from registry.cleaning import Change
from registry.compiled import CompiledSchema, compiled
from registry.errors import InvalidRecord, TombstoneNotAllowed
from registry.service import RegistryService
from registry.types import RegisteredSchema, SchemaId, Subject, Version

DEFAULT_MAX_RECORD_BYTES = 1_000_000  # KafkaSettings.max_record_bytes's default
# What Kafka's record format adds to a record's key, value and headers, at most: its length,
# attributes, timestamp and offset deltas, key and value lengths, header count (varints); and
# per header, the lengths of its name and value.
_RECORD_FRAMING = 64
_HEADER_FRAMING = 10
IDEMPOTENCY_HEADER = "hub.idempotency-key"
# The publish request's id (the API's `X-Request-Id`), on each of its records: lineage traces a
# table row back to the request that wrote it (docs/lineage.md).
REQUEST_ID_HEADER = "hub.request-id"
# "No key", even in a keyed feed (a CDC truncate concerns every key at once). Kafka refuses
# null keys on compacted topics, so it is written as an empty (zero-byte) key.
NO_KEY: Any = object()


@unique
class OnError(StrEnum):
    """What happens to records that fail validation."""

    REJECT = "reject"  # answered with their error; nothing is written for them
    DLQ = "dlq"  # written to `<topic>.dlq` with the error in headers


# IncomingRecord and PublishResult are made once per record on the publish path, where a frozen
# dataclass's __init__ (an object.__setattr__ per field) costs three times a plain one's.
@dataclass(slots=True)
class IncomingRecord:
    """A record as a publisher gives it, in natural JSON."""

    value: Any
    key: Any = None
    headers: Mapping[str, str] | None = None
    timestamp: Any = None  # ISO-8601 text or epoch milliseconds; default: when Kafka gets it
    # Headers the hub sets itself (a connector's `hub.cdc.*`), never filled from a caller's
    # input: `headers` may not use the hub's names (publish/headers.py).
    hub_headers: Mapping[str, str] | None = None


@dataclass(slots=True)
class PublishResult:
    """Per record: where Kafka stored it, or the error that kept it out of the feed."""

    partition: int | None = None
    offset: int | None = None
    error_code: ErrorCode | None = None
    message: str | None = None
    path: str | None = None
    dead_lettered: bool = False
    cleaned: tuple[Change, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error_code is None


@dataclass(frozen=True, slots=True)
class Unparsed:
    """Source data that could not become a record at all (a log line, a row): it goes to the
    feed's dead-letter topic as its raw text, with `error` and where it came from."""

    raw: str
    error: HubError
    source: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    schema_id: SchemaId
    schema_version: Version
    results: list[PublishResult]

    @property
    def accepted(self) -> int:
        return sum(r.error_code is None for r in self.results)


# A record ready for Kafka and what cleaning changed in it: (topic, key, value, headers,
# timestamp_ms) as `FeedProducer.produce_encoded` takes it, then the changes. A plain tuple: the
# publish path makes one per record, and a dataclass instance costs several times more.
_Prepared = tuple[EncodedRecord, tuple[Change, ...]]


@dataclass(frozen=True, slots=True)
class _ValueCodec:
    """How one request's values are checked, cleaned and encoded: resolved once per request."""

    feed: Feed
    topic: TopicName
    schema: CompiledSchema
    schema_id: SchemaId


@dataclass(frozen=True, slots=True)
class _KeyCodec:
    """How one request's keys are encoded; `schema` is None for a feed without key fields."""

    feed: Feed
    schema: CompiledSchema | None
    schema_id: SchemaId
    subject: Subject


@dataclass(frozen=True, slots=True)
class Codecs:
    """A request's schemas, resolved once: how its values and keys are encoded."""

    values: _ValueCodec
    keys: _KeyCodec
    version: Version
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES  # HUB_KAFKA_MAX_RECORD_BYTES

    def outcome(self, results: list[PublishResult]) -> PublishOutcome:
        """The answer to a batch encoded with these codecs, given each record's result."""
        return PublishOutcome(self.values.schema_id, self.version, results)


@dataclass(frozen=True, slots=True)
class _BuiltCodecs:
    """The codecs built for a feed's latest schemas, and the lookups they were built from:
    valid while the feed and registry caches still answer with those same objects."""

    feed: Feed
    value_subject: Subject
    value: RegisteredSchema
    key_subject: Subject
    key: RegisteredSchema | None
    codecs: Codecs


_MAX_REMEMBERED_FEEDS = 10_000


def _prepare(
    record: IncomingRecord,
    values: _ValueCodec,
    keys: _KeyCodec,
    marker: list[tuple[str, bytes]] | None,
    max_bytes: int,
    latest_ms: float,
) -> _Prepared:
    """`record` checked, cleaned and encoded; `latest_ms` is the latest timestamp Kafka takes
    (the clock read once per request, not per record)."""
    changes: tuple[Change, ...] = ()
    if record.value is None:
        if values.feed.kind is not FeedKind.CHANGELOG:
            raise TombstoneNotAllowed(values.feed.topic, str(values.feed.kind))
        value = None
    else:
        value, changes = values.schema.clean_encode(record.value, values.schema_id)
    key = None if record.key is None and keys.schema is None else _encode_key(record, keys)
    headers = caller_headers(record.headers) if record.headers is not None else None
    if record.hub_headers is not None:
        headers = [*(headers or ()), *hub_headers(record.hub_headers)]
    if marker is not None:
        headers = marker if headers is None else headers + marker
    timestamp = record.timestamp
    timestamp_ms = (
        timestamp
        if timestamp is None or (type(timestamp) is int and 0 <= timestamp <= MAX_TIMESTAMP_MS)
        else epoch_ms(timestamp)
    )
    if timestamp_ms is not None and timestamp_ms > latest_ms:
        raise too_far_ahead(timestamp)
    size = (len(value) if value else 0) + (len(key) if key else 0) + _RECORD_FRAMING
    if headers:
        size += sum(len(name) + len(data) + _HEADER_FRAMING for name, data in headers)
    if size > max_bytes:
        raise RecordTooLarge(size, max_bytes)
    return (values.topic, key, value, headers, timestamp_ms), changes


def _encode_key(record: IncomingRecord, keys: _KeyCodec) -> bytes | None:
    if record.key is NO_KEY:
        return b""
    if keys.schema is None:
        return _plain_key(record.key)
    key = record.key
    if key is None:
        if not isinstance(record.value, Mapping):
            raise InvalidRecord(
                f"$.key: feed '{keys.feed.topic}' is keyed by {', '.join(keys.feed.key_fields)}; "
                "give the key when the value is null (a tombstone).",
                path="$.key",
            )
        key = {name: record.value.get(name) for name in keys.feed.key_fields}
    try:
        return keys.schema.to_message(key, keys.schema_id)
    except InvalidRecord as exc:
        path = exc.path.replace("$", "$.key", 1)
        raise InvalidRecord(exc.message.replace("$", "$.key", 1), path=path) from exc


class Publisher:
    """Publishes records to a feed under its latest (or a pinned) schema version.

    Over a `BatchProducer` (a connector task's, `PublishServices.batch_publisher`) it publishes
    with `publish` and `dead_letter` only, and a stored record's result has no partition and
    offset.
    """

    def __init__(
        self,
        registry: RegistryService,
        producer: FeedProducer | BatchProducer,
        transactions: TransactionalProducers | None = None,
        *,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self._registry = registry
        self._producer = producer
        self._transactions = transactions
        self._max_record_bytes = max_record_bytes
        self._latest_codecs: dict[str, _BuiltCodecs] = {}

    def publish(
        self,
        feed: Feed,
        records: Sequence[IncomingRecord],
        *,
        schema_version: Version | None = None,
        on_error: OnError = OnError.REJECT,
        atomic: bool = False,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> PublishOutcome:
        """Publish `records`; never raises for a record, answers each one instead.

        With an `idempotency_key`, each record carries the header `hub.idempotency-key`
        (`<key>:<position>`), so a record written twice (a retry after an acknowledgement was
        lost) is recognisable downstream. With a `request_id`, each carries `hub.request-id`.
        """
        codecs = self.codecs(feed, schema_version)
        # An atomic batch with an invalid record publishes nothing, dead letters included.
        batch = PreparedBatch(
            records,
            codecs,
            on_error=OnError.REJECT if atomic else on_error,
            idempotency_key=idempotency_key,
            request_id=request_id,
        )
        if atomic:
            return codecs.outcome(self._publish_atomically(codecs.values.topic, batch.prepared))
        reports = self._producer.produce_encoded(batch.items) if batch.items else []
        return codecs.outcome(batch.results(reports))

    async def publish_async(
        self,
        codecs: Codecs,
        records: Sequence[IncomingRecord],
        *,
        on_error: OnError = OnError.REJECT,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> PublishOutcome:
        """As `publish` (not atomic), on an event loop: the records are checked, encoded and
        handed to the producer on the calling thread, and their acknowledgements awaited.

        `codecs` come from `codecs()`, which may read the registry database: call it off the
        event loop.
        """
        batch = PreparedBatch(
            records,
            codecs,
            on_error=on_error,
            idempotency_key=idempotency_key,
            request_id=request_id,
        )
        sending = await self.send_async(codecs, batch)
        return await sending.outcome()

    async def send_async(self, codecs: Codecs, batch: "PreparedBatch") -> "SentBatch":
        """The first half of `publish_async`: hand a prepared batch to the producer (waiting
        while its queue is full) and return what awaits its outcome. Batches sent one after
        another reach Kafka in that order, however many await their acknowledgements."""
        producer = self._producer
        if isinstance(producer, BatchProducer):
            raise TypeError("a BatchProducer waits for its batches: it cannot publish on a loop")
        sending = await producer.send_encoded_async(batch.items) if batch.items else None
        return SentBatch(codecs, batch, sending)

    def dead_letter(self, feed: Feed, unparsed: Sequence[Unparsed]) -> list[PublishResult]:
        """Write source data that could not become records to the feed's dead-letter topic;
        each is answered with its error, marked dead-lettered once Kafka acknowledged it."""
        topic = TopicName(feed.topic)
        letters = [(dlq_topic(topic), _unparsed_letter(topic, item)) for item in unparsed]
        deliveries = self._producer.produce_many(letters) if letters else []
        return [
            _rejected(item.error, dead_lettered=True) if delivery.ok else _delivered(delivery, ())
            for item, delivery in zip(unparsed, deliveries, strict=True)
        ]

    def codecs(self, feed: Feed, schema_version: Version | None = None) -> Codecs:
        """How records of `feed` are encoded: its latest (or the pinned) value schema and its
        key schema. Reads the registry (cached), so it may wait on the database."""
        topic = TopicName(feed.topic)
        subject = Subject(value_subject(topic))
        value_version = (
            self._registry.current(subject=subject)
            if schema_version is None
            else self._registry.version(subject=subject, version=schema_version)
        )
        value_schema = self._registry.schema(schema_id=value_version.schema_id)
        values = _ValueCodec(feed, topic, compiled(value_schema), value_version.schema_id)
        keys, key_version = self._key_codec(feed)
        codecs = Codecs(values, keys, value_version.version, self._max_record_bytes)
        if schema_version is None:
            if len(self._latest_codecs) >= _MAX_REMEMBERED_FEEDS:
                self._latest_codecs.clear()
            self._latest_codecs[feed.topic] = _BuiltCodecs(
                feed, subject, value_version, keys.subject, key_version, codecs
            )
        return codecs

    def codecs_if_cached(self, feed: Feed) -> Codecs | None:
        """`codecs(feed)` without a database read, or None: the codecs last built for the
        feed's latest schemas, while the feed and those schemas are still the registry's
        cached answers (so a version registered in this process is used at once, as `codecs`
        would). For the event loop; on None, call `codecs` in a worker thread."""
        built = self._latest_codecs.get(feed.topic)
        if built is None or built.feed is not feed:
            return None
        registry = self._registry
        if registry.current_if_cached(subject=built.value_subject) is not built.value:
            return None
        if built.key is not None and (
            registry.current_if_cached(subject=built.key_subject) is not built.key
        ):
            return None
        return built.codecs

    def _key_codec(self, feed: Feed) -> tuple[_KeyCodec, RegisteredSchema | None]:
        subject = Subject(key_subject(TopicName(feed.topic)))
        if not feed.key_fields:
            return _KeyCodec(feed, None, SchemaId(0), subject), None
        latest = self._registry.current(subject=subject)
        schema = self._registry.schema(schema_id=latest.schema_id)
        return _KeyCodec(feed, compiled(schema), latest.schema_id, subject), latest

    def _publish_atomically(
        self, topic: TopicName, prepared: Sequence[_Prepared | HubError]
    ) -> list[PublishResult]:
        invalid = [i for i, item in enumerate(prepared) if isinstance(item, HubError)]
        if invalid:
            first = invalid[0]
            return [
                _rejected(item)
                if isinstance(item, HubError)
                else PublishResult(
                    error_code=ErrorCode.BATCH_REJECTED,
                    message=f"Not published: the batch is atomic and record {first} is invalid.",
                )
                for item in prepared
            ]
        if self._transactions is None:
            raise RuntimeError("atomic publishing needs TransactionalProducers")
        items = [
            (topic, OutgoingRecord(key=key, value=value, headers=headers or (),
                                   timestamp_ms=timestamp_ms))
            for (_topic, key, value, headers, timestamp_ms), _changes in cast(
                "Sequence[_Prepared]", prepared
            )
        ]  # fmt: skip
        deliveries = self._transactions.produce_atomically(items)
        return [
            _delivered(d, changes)
            for d, (_record, changes) in zip(
                deliveries, cast("Sequence[_Prepared]", prepared), strict=True
            )
        ]


@dataclass(frozen=True, slots=True)
class SentBatch:
    """A prepared batch handed to the producer; `outcome()` awaits Kafka's reports."""

    codecs: Codecs
    batch: "PreparedBatch"
    sending: Sending | None  # None: nothing of the batch goes to Kafka

    async def outcome(self) -> PublishOutcome:
        reports = await self.sending.reports() if self.sending is not None else []
        return self.codecs.outcome(self.batch.results(reports))


class PreparedBatch:
    """A request's records, checked, cleaned and encoded: what goes to Kafka, and how to answer
    each record once the producer reported on `items`.

    The step between the codecs and the producer, shared by `Publisher.publish` and
    `publish_async`: `FeedProducer.produce_encoded(batch.items)` sends it, and
    `codecs.outcome(batch.results(reports))` is the answer.
    """

    __slots__ = ("items", "on_error", "prepared")

    def __init__(
        self,
        records: Sequence[IncomingRecord],
        codecs: Codecs,
        *,
        on_error: OnError = OnError.REJECT,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> None:
        self.on_error = on_error
        self.prepared: list[_Prepared | HubError] = []
        # One list shared by the records of the request: the producer only reads it.
        request = [(REQUEST_ID_HEADER, request_id.encode())] if request_id is not None else None
        latest_ms = time.time() * 1000 + MAX_TIMESTAMP_AHEAD_MS
        for position, record in enumerate(records):
            marker = (
                [*(request or ()), (IDEMPOTENCY_HEADER, f"{idempotency_key}:{position}".encode())]
                if idempotency_key is not None
                else request
            )
            try:
                self.prepared.append(
                    _prepare(
                        record,
                        codecs.values,
                        codecs.keys,
                        marker,
                        codecs.max_record_bytes,
                        latest_ms,
                    )
                )
            except HubError as exc:
                self.prepared.append(exc)
        # What goes to Kafka, in order: the valid records, and with `dlq` the invalid ones'
        # dead letters in their places.
        self.items: list[EncodedRecord] = []
        topic = codecs.values.topic
        for record, item in zip(records, self.prepared, strict=True):
            if type(item) is tuple:
                self.items.append(item[0])
            elif on_error is OnError.DLQ:
                assert isinstance(item, HubError)
                letter = _dead_letter(topic, record, item)
                self.items.append((dlq_topic(topic), letter.key, letter.value,
                                   list(letter.headers), None))  # fmt: skip

    def results(self, reports: Sequence[Report]) -> list[PublishResult]:
        """Each record's answer, given the producer's reports for `items`."""
        reported = iter(reports)
        results = []
        for item in self.prepared:
            if type(item) is tuple:
                report = next(reported)
                if type(report) is tuple:
                    # Positional: the one result per record, made at the lowest cost.
                    results.append(PublishResult(report[0], report[1], None, None, None, False,
                                                 item[1]))  # fmt: skip
                else:
                    assert isinstance(report, Delivery)
                    results.append(_delivered(report, item[1]))
            elif self.on_error is OnError.DLQ:
                assert isinstance(item, HubError)
                report = next(reported)
                results.append(
                    _rejected(item, dead_lettered=True)
                    if type(report) is tuple
                    else _delivered(cast(Delivery, report), ())
                )
            else:
                assert isinstance(item, HubError)
                results.append(_rejected(item))
        return results


def _delivered(delivery: Delivery, cleaned: tuple[Change, ...]) -> PublishResult:
    if delivery.ok:
        return PublishResult(partition=delivery.partition, offset=delivery.offset, cleaned=cleaned)
    if not delivery.sent:
        return PublishResult(
            error_code=ErrorCode.PRODUCER_QUEUE_FULL,
            message="Not sent: the producer's queue stayed full (HUB_KAFKA_PRODUCER_QUEUE_"
            "MAX_KBYTES, HUB_KAFKA_PRODUCER_QUEUE_WAIT_MS), so nothing of this record was "
            "written. Send it again later, in a new request.",
        )
    if delivery.retriable:
        return PublishResult(
            error_code=ErrorCode.KAFKA_UNAVAILABLE,
            message=f"Kafka did not acknowledge the record: {delivery.error}. Retry it.",
        )
    return PublishResult(
        error_code=ErrorCode.KAFKA_REFUSED,
        message=f"Kafka refused the record: {delivery.error}. Sending it again will not help.",
    )


def _rejected(error: HubError, *, dead_lettered: bool = False) -> PublishResult:
    return PublishResult(
        error_code=error.code,
        message=error.message,
        path=getattr(error, "path", None) or None,
        dead_lettered=dead_lettered,
    )


def _dead_letter(topic: TopicName, record: IncomingRecord, error: HubError) -> OutgoingRecord:
    """The record as it was sent (JSON), with why it was refused in its headers."""
    body = {"key": record.key, "value": record.value, "headers": record.headers,
            "timestamp": record.timestamp}  # fmt: skip
    return OutgoingRecord(
        key=None
        if isinstance(record.key, Mapping) or record.key is NO_KEY
        else _plain_key(record.key),
        value=json.dumps(body, default=str).encode(),
        headers=_error_headers(topic, error),
    )


def _unparsed_letter(topic: TopicName, item: Unparsed) -> OutgoingRecord:
    """Unusable source data as JSON, with why and where it came from in headers."""
    body: dict[str, Any] = {"raw": item.raw}
    headers = _error_headers(topic, item.error)
    if item.source is not None:
        body["source"] = dict(item.source)
        source = json.dumps(dict(item.source), sort_keys=True).encode()
        headers.append(("hub.source.partition", source))
    return OutgoingRecord(key=None, value=json.dumps(body).encode(), headers=headers)


def _error_headers(topic: TopicName, error: HubError) -> list[tuple[str, bytes]]:
    """The headers every dead letter carries: the error's code, message and path, the feed."""
    return [
        ("hub.error.code", str(int(error.code)).encode()),
        ("hub.error.message", error.message.encode()),
        ("hub.error.path", (getattr(error, "path", "") or "").encode()),
        ("hub.feed", topic.encode()),
    ]


def _plain_key(key: Any) -> bytes | None:
    """Keys of feeds without key fields: strings as UTF-8, other JSON as compact text."""
    if key is None:
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    return json.dumps(key, separators=(",", ":"), sort_keys=True).encode("utf-8")
