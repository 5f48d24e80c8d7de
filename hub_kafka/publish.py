"""The one publish path: clean, validate, encode as framed Avro, produce to Kafka.

The REST gateway and every connector publish through `Publisher`, so a record is checked and
encoded the same way whichever door it came in by, and answered only after Kafka acknowledged it.
"""

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum, unique
from typing import Any

from catalog.types import Feed, FeedKind
from hub_kafka.producer import Delivery, FeedProducer, OutgoingRecord, TransactionalProducers
from hub_kafka.topics import TopicName, dlq_topic, key_subject, value_subject
from registry.avro import AvroSchema
from registry.cleaning import Change, clean, has_rules
from registry.errors import ErrorCode, HubError, InvalidRecord
from registry.serde import encode
from registry.service import RegistryService
from registry.types import SchemaId, Subject, Version

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
IDEMPOTENCY_HEADER = "hub.idempotency-key"


@unique
class OnError(StrEnum):
    """What happens to records that fail validation."""

    REJECT = "reject"  # answered with their error; nothing is written for them
    DLQ = "dlq"  # written to `<topic>.dlq` with the error in headers


@dataclass(frozen=True, slots=True)
class IncomingRecord:
    """A record as a publisher gives it, in natural JSON."""

    value: Any
    key: Any = None
    headers: Mapping[str, str] | None = None
    timestamp: Any = None  # ISO-8601 text or epoch milliseconds; default: when Kafka gets it


@dataclass(frozen=True, slots=True)
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
class PublishOutcome:
    schema_id: SchemaId
    schema_version: Version
    results: list[PublishResult]

    @property
    def accepted(self) -> int:
        return sum(1 for r in self.results if r.ok)


@dataclass(frozen=True, slots=True)
class _Prepared:
    record: OutgoingRecord
    cleaned: tuple[Change, ...]


class Publisher:
    """Publishes records to a feed under its latest (or a pinned) schema version."""

    def __init__(
        self,
        registry: RegistryService,
        producer: FeedProducer,
        transactions: TransactionalProducers | None = None,
    ) -> None:
        self._registry = registry
        self._producer = producer
        self._transactions = transactions

    def publish(
        self,
        feed: Feed,
        records: Sequence[IncomingRecord],
        *,
        schema_version: Version | None = None,
        on_error: OnError = OnError.REJECT,
        atomic: bool = False,
        idempotency_key: str | None = None,
    ) -> PublishOutcome:
        """Publish `records`; never raises for a record, answers each one instead.

        With an `idempotency_key`, each record carries the header `hub.idempotency-key`
        (`<key>:<position>`), so a record written twice (a retry after an acknowledgement was
        lost) is recognisable downstream.
        """
        topic = TopicName(feed.topic)
        subject = Subject(value_subject(topic))
        value_version = (
            self._registry.current(subject=subject)
            if schema_version is None
            else self._registry.version(subject=subject, version=schema_version)
        )
        value_schema = self._registry.schema(schema_id=value_version.schema_id)
        key_schema = self._key_schema(feed)
        prepared: list[_Prepared | HubError] = []
        for position, record in enumerate(records):
            marker = (
                [(IDEMPOTENCY_HEADER, f"{idempotency_key}:{position}".encode())]
                if idempotency_key is not None
                else []
            )
            try:
                prepared.append(
                    self._prepare(
                        feed, record, value_schema, value_version.schema_id, key_schema, marker
                    )
                )
            except HubError as exc:
                prepared.append(exc)
        if atomic:
            results = self._publish_atomically(topic, prepared)
        else:
            results = self._publish_each(topic, records, prepared, on_error)
        return PublishOutcome(
            schema_id=value_version.schema_id,
            schema_version=value_version.version,
            results=results,
        )

    def _key_schema(self, feed: Feed) -> tuple[SchemaId, AvroSchema] | None:
        if not feed.key_fields:
            return None
        latest = self._registry.current(subject=Subject(key_subject(TopicName(feed.topic))))
        return latest.schema_id, self._registry.schema(schema_id=latest.schema_id)

    def _prepare(
        self,
        feed: Feed,
        record: IncomingRecord,
        schema: AvroSchema,
        schema_id: SchemaId,
        key_schema: tuple[SchemaId, AvroSchema] | None,
        marker: list[tuple[str, bytes]],
    ) -> _Prepared:
        changes: tuple[Change, ...] = ()
        if record.value is None:
            if feed.kind is not FeedKind.CHANGELOG:
                raise InvalidRecord(
                    "$.value: a null value (a tombstone) is only allowed in changelog feeds.",
                    path="$.value",
                )
            value = None
        else:
            raw = record.value
            if has_rules(schema.resolved):
                cleaned = clean(raw, schema.resolved)
                raw, changes = cleaned.value, cleaned.changes
            value = encode(raw, schema=schema, schema_id=schema_id)
        key = self._encode_key(feed, record, key_schema)
        return _Prepared(
            record=OutgoingRecord(
                key=key,
                value=value,
                headers=_headers(record.headers) + marker,
                timestamp_ms=_timestamp_ms(record.timestamp),
            ),
            cleaned=changes,
        )

    def _encode_key(
        self,
        feed: Feed,
        record: IncomingRecord,
        key_schema: tuple[SchemaId, AvroSchema] | None,
    ) -> bytes | None:
        if key_schema is None:
            return _plain_key(record.key)
        key = record.key
        if key is None:
            if not isinstance(record.value, Mapping):
                raise InvalidRecord(
                    f"$.key: feed '{feed.topic}' is keyed by {', '.join(feed.key_fields)}; "
                    "give the key when the value is null (a tombstone).",
                    path="$.key",
                )
            key = {name: record.value.get(name) for name in feed.key_fields}
        schema_id, schema = key_schema
        try:
            return encode(key, schema=schema, schema_id=schema_id)
        except InvalidRecord as exc:
            path = exc.path.replace("$", "$.key", 1)
            raise InvalidRecord(exc.message.replace("$", "$.key", 1), path=path) from exc

    def _publish_each(
        self,
        topic: TopicName,
        records: Sequence[IncomingRecord],
        prepared: Sequence[_Prepared | HubError],
        on_error: OnError,
    ) -> list[PublishResult]:
        items: list[tuple[str, OutgoingRecord]] = []
        for record, item in zip(records, prepared, strict=True):
            if isinstance(item, _Prepared):
                items.append((topic, item.record))
            elif on_error is OnError.DLQ:
                items.append((dlq_topic(topic), _dead_letter(topic, record, item)))
        deliveries = iter(self._producer.produce_many(items)) if items else iter(())
        results = []
        for item in prepared:
            if isinstance(item, _Prepared):
                results.append(_delivered(next(deliveries), item.cleaned))
            elif on_error is OnError.DLQ:
                delivery = next(deliveries)
                results.append(
                    _rejected(item, dead_lettered=True) if delivery.ok else _delivered(delivery, ())
                )
            else:
                results.append(_rejected(item))
        return results

    def _publish_atomically(
        self, topic: TopicName, prepared: Sequence[_Prepared | HubError]
    ) -> list[PublishResult]:
        invalid = [i for i, item in enumerate(prepared) if not isinstance(item, _Prepared)]
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
        items = [(topic, item.record) for item in prepared if isinstance(item, _Prepared)]
        deliveries = self._transactions.produce_atomically(items)
        return [
            _delivered(d, item.cleaned)
            for d, item in zip(deliveries, prepared, strict=True)
            if isinstance(item, _Prepared)
        ]


def _delivered(delivery: Delivery, cleaned: tuple[Change, ...]) -> PublishResult:
    if delivery.ok:
        return PublishResult(partition=delivery.partition, offset=delivery.offset, cleaned=cleaned)
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
    headers = [
        ("hub.error.code", str(int(error.code)).encode()),
        ("hub.error.message", error.message.encode()),
        ("hub.error.path", (getattr(error, "path", "") or "").encode()),
        ("hub.feed", topic.encode()),
    ]
    return OutgoingRecord(
        key=_plain_key(record.key) if not isinstance(record.key, Mapping) else None,
        value=json.dumps(body, default=str).encode(),
        headers=headers,
    )


def _plain_key(key: Any) -> bytes | None:
    """Keys of feeds without key fields: strings as UTF-8, other JSON as compact text."""
    if key is None:
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    return json.dumps(key, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _headers(headers: Mapping[str, str] | None) -> list[tuple[str, bytes]]:
    if headers is None:
        return []
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidRecord("$.headers: expected an object of string values.", path="$.headers")
    return [(name, value.encode("utf-8")) for name, value in headers.items()]


def _timestamp_ms(timestamp: Any) -> int | None:
    if timestamp is None:
        return None
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | str):
        raise InvalidRecord(
            "$.timestamp: expected ISO-8601 text or epoch milliseconds.", path="$.timestamp"
        )
    if isinstance(timestamp, int):
        return timestamp
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError as exc:
        raise InvalidRecord(
            f"$.timestamp: {timestamp!r} is not an ISO-8601 timestamp.", path="$.timestamp"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(milliseconds=1)
