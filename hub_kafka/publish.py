"""The one publish path: validate against the registry, encode as framed Avro, produce to Kafka.

The REST gateway and every connector publish through `Publisher`, so a record is checked and
encoded the same way whichever door it came in by.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hub_kafka.producer import FeedProducer, OutgoingRecord
from hub_kafka.topics import TopicName, value_subject
from registry.errors import ErrorCode, HubError
from registry.serde import encode
from registry.service import RegistryService
from registry.types import SchemaId, Subject


@dataclass(frozen=True, slots=True)
class IncomingRecord:
    """A record as a publisher gives it: natural JSON key and value."""

    key: Any
    value: Any


@dataclass(frozen=True, slots=True)
class PublishResult:
    """Per record: where Kafka stored it, or the error that kept it out."""

    partition: int | None = None
    offset: int | None = None
    error_code: ErrorCode | None = None
    message: str | None = None
    path: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_code is None


@dataclass(frozen=True, slots=True)
class PublishOutcome:
    schema_id: SchemaId
    results: list[PublishResult]


class Publisher:
    """Validates, encodes and produces records for a topic, answering per record."""

    def __init__(self, registry: RegistryService, producer: FeedProducer) -> None:
        self._registry = registry
        self._producer = producer

    def publish(self, topic: TopicName, records: Sequence[IncomingRecord]) -> PublishOutcome:
        """Publish `records` to `topic` under the latest value schema; never raises per record."""
        latest = self._registry.version(subject=Subject(value_subject(topic)), version=None)
        schema = self._registry.schema(schema_id=latest.schema_id)
        results: list[PublishResult | None] = []
        outgoing: list[OutgoingRecord] = []
        positions: list[int] = []
        for index, record in enumerate(records):
            try:
                value = encode(record.value, schema=schema, schema_id=latest.schema_id)
            except HubError as exc:
                results.append(
                    PublishResult(
                        error_code=exc.code,
                        message=exc.message,
                        path=getattr(exc, "path", None) or None,
                    )
                )
                continue
            results.append(None)
            positions.append(index)
            outgoing.append(OutgoingRecord(key=_key_bytes(record.key), value=value))
        if outgoing:
            self._producer.ensure_topic(topic)
            for index, delivery in zip(
                positions, self._producer.produce(topic, outgoing), strict=True
            ):
                results[index] = (
                    PublishResult(partition=delivery.partition, offset=delivery.offset)
                    if delivery.ok
                    else PublishResult(
                        error_code=ErrorCode.KAFKA_UNAVAILABLE,
                        message=f"Kafka did not acknowledge the record: {delivery.error}",
                    )
                )
        return PublishOutcome(
            schema_id=latest.schema_id, results=[r for r in results if r is not None]
        )


def _key_bytes(key: Any) -> bytes | None:
    """Keys without a registered key schema: strings as UTF-8, other JSON as compact text."""
    if key is None:
        return None
    if isinstance(key, str):
        return key.encode("utf-8")
    return json.dumps(key, separators=(",", ":"), sort_keys=True).encode("utf-8")
