"""The publish path over a real registry (SQLite) and a fake producer: two feeds to publish to."""

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from sqlalchemy import Engine

from catalog.types import Feed, FeedKind, TeamName
from hub_kafka.producer import FeedProducer, TransactionalProducers
from publish.feeds import key_schema
from publish.publisher import Publisher
from registry.serde import decode
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import Subject
from tests.unit.publish.fake_producer import FakeProducer

READING = {
    "type": "record",
    "name": "Reading",
    "namespace": "plant",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "celsius", "type": "double"},
    ],
}
SENSOR = {
    "type": "record",
    "name": "Sensor",
    "namespace": "plant",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "location", "type": "string"},
    ],
}


def _feed(topic: str, kind: FeedKind, key_fields: tuple[str, ...] = ()) -> Feed:
    return Feed(
        topic=topic,
        owner=TeamName("plant"),
        kind=kind,
        partitions=1,
        key_fields=key_fields,
        retention_ms=None,
        description="",
        created_at=datetime.now(UTC),
    )


@pytest.fixture
def registry(hub_engine: Engine) -> RegistryService:
    return RegistryService(SchemaStore(hub_engine))


@pytest.fixture
def readings(registry: RegistryService) -> Feed:
    """An event feed of sensor readings, without key fields."""
    registry.register(subject=Subject("plant.readings-value"), schema_text=json.dumps(READING))
    return _feed("plant.readings", FeedKind.EVENT)


@pytest.fixture
def sensors(registry: RegistryService) -> Feed:
    """A changelog feed of sensors, keyed by `sensor`."""
    registry.register(subject=Subject("plant.sensors-value"), schema_text=json.dumps(SENSOR))
    registry.register(
        subject=Subject("plant.sensors-key"),
        schema_text=json.dumps(key_schema(SENSOR, ("sensor",))),
    )
    return _feed("plant.sensors", FeedKind.CHANGELOG, ("sensor",))


@pytest.fixture
def producer() -> FakeProducer:
    return FakeProducer()


@pytest.fixture
def publisher(registry: RegistryService, producer: FakeProducer) -> Publisher:
    # The fake stands in for the shared producer and the transactional pool alike.
    return Publisher(registry, cast(FeedProducer, producer), cast(TransactionalProducers, producer))


@pytest.fixture
def read(registry: RegistryService) -> Callable[[bytes | None], Any]:
    """Decodes a framed Avro message as the hub's readers do, by its schema id."""

    def decoded(message: bytes | None) -> Any:
        assert message is not None
        return decode(message, writer_schema=lambda schema_id: registry.schema(schema_id=schema_id))

    return decoded
