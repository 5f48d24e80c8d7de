"""The registry driven by confluent-kafka's own `SchemaRegistryClient`, serializer and deserializer.

Every call goes through the client exactly as applications make it, so these tests catch any
path, query parameter or response shape the client relies on and the hub answers differently.
The client caches schemas by id and subject; where a cached answer could hide what the server
does, a test asks through a fresh client.
"""

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest
from confluent_kafka import DeserializingConsumer, SerializingProducer
from confluent_kafka.admin import AdminClient, NewTopic
from confluent_kafka.schema_registry import (
    ConfigCompatibilityLevel,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
    ServerConfig,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import StringDeserializer, StringSerializer

from tests.support.api_server import serve_api
from tests.support.hub_client import create_key
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration


def _subject(kind: str = "value") -> str:
    return f"client.t{uuid.uuid4().hex[:10]}-{kind}"


@dataclass(frozen=True)
class Registry:
    """An API server and an admin key for it."""

    url: str
    key: str

    def client(self) -> SchemaRegistryClient:
        """A client with empty caches, so every answer below comes from the server."""
        return SchemaRegistryClient(
            {"url": self.url, "basic.auth.user.info": f"tests:{self.key}", "max.retries": 0}
        )


@pytest.fixture
def registry(api_url: str, admin_key: str) -> Registry:
    return Registry(api_url, admin_key)


def _record(name: str, *fields: tuple[str, Any], namespace: str | None = None) -> Schema:
    """A record schema; each field is (name, type) or (name, type, default)."""
    document: dict[str, Any] = {"type": "record", "name": name, "fields": []}
    if namespace:
        document["namespace"] = namespace
    for spec in fields:
        field: dict[str, Any] = {"name": spec[0], "type": spec[1]}
        if len(spec) > 2:
            field["default"] = spec[2]
        document["fields"].append(field)
    return Schema(json.dumps(document), "AVRO")


class Orders(NamedTuple):
    """Three versions of one record, in a namespace of their own (the server is shared)."""

    v1: Schema
    # Adds a field with a default: a BACKWARD-compatible step.
    v2: Schema
    # Changes a field's type: incompatible with both.
    broken: Schema


@pytest.fixture
def orders() -> Orders:
    space = f"orders.n{uuid.uuid4().hex[:10]}"
    return Orders(
        v1=_record("Order", ("id", "string"), namespace=space),
        v2=_record("Order", ("id", "string"), ("note", "string", ""), namespace=space),
        broken=_record("Order", ("id", "int"), namespace=space),
    )


@contextmanager
def _raises(code: int, status: int) -> Iterator[None]:
    """The block raises a SchemaRegistryError with this Confluent error code and HTTP status."""
    with pytest.raises(SchemaRegistryError) as caught:
        yield
    error = caught.value
    assert (error.error_code, error.http_status_code) == (code, status), error
    assert error.error_message


@pytest.fixture(scope="module")
def private_registry(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Registry]:
    """An API server of this module's own, for registry-wide settings that would leak."""
    database = f"sqlite:///{tmp_path_factory.mktemp('client-private') / 'hub.db'}"
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap) as url:
        yield Registry(url, create_key(database, team=None))


def test_register_then_read_back_every_way(registry: Registry, orders: Orders) -> None:
    subject = _subject()
    schema_id = registry.client().register_schema(subject, orders.v1)

    client = registry.client()
    # The server, not a cache, answers a second registration with the same id.
    assert client.register_schema(subject, orders.v1) == schema_id
    assert json.loads(client.get_schema(schema_id).schema_str) == json.loads(orders.v1.schema_str)

    found = registry.client().lookup_schema(subject, orders.v1)
    assert (found.subject, found.schema_id, found.version) == (subject, schema_id, 1)

    version = registry.client().get_version(subject, 1)
    assert (version.subject, version.schema_id, version.version) == (subject, schema_id, 1)
    assert json.loads(version.schema.schema_str) == json.loads(orders.v1.schema_str)
    assert version.schema.schema_type == "AVRO"

    latest = registry.client().get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert client.get_versions(subject) == [1]
    assert client.get_subjects(subject_prefix=subject) == [subject]
    assert subject in client.get_subjects()
    assert client.get_subjects_by_schema_id(schema_id) == [subject]
    assert [(v.subject, v.version) for v in client.get_schema_versions(schema_id)] == [(subject, 1)]
    assert "AVRO" in client.get_schema_types()


def test_one_schema_under_two_subjects_has_one_id(registry: Registry, orders: Orders) -> None:
    first, second = _subject(), _subject("key")
    client = registry.client()
    schema_id = client.register_schema(first, orders.v1)
    assert registry.client().register_schema(second, orders.v1) == schema_id
    assert sorted(registry.client().get_subjects_by_schema_id(schema_id)) == sorted([first, second])
    assert registry.client().get_version(second, 1).version == 1


def test_evolution_adds_versions_and_incompatible_schemas_are_refused(
    registry: Registry, orders: Orders
) -> None:
    subject = _subject()
    client = registry.client()
    first = client.register_schema(subject, orders.v1)
    second = client.register_schema(subject, orders.v2)
    assert second != first
    assert registry.client().get_versions(subject) == [1, 2]
    latest = registry.client().get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (second, 2)

    assert client.test_compatibility(subject, orders.v2, version=1) is True
    assert client.test_compatibility(subject, orders.broken) is False
    assert client.test_compatibility(subject, orders.broken, version=1, verbose=True) is False
    assert client.test_compatibility_all_versions(subject, orders.v2) is True
    assert client.test_compatibility_all_versions(subject, orders.broken, verbose=True) is False

    with _raises(40901, 409):
        registry.client().register_schema(subject, orders.broken)
    assert registry.client().get_versions(subject) == [1, 2]


def test_missing_things_raise_schema_registry_errors_with_their_codes(
    registry: Registry, orders: Orders
) -> None:
    subject = _subject()
    client = registry.client()
    client.register_schema(subject, orders.v1)

    with _raises(40401, 404):
        registry.client().get_latest_version(_subject())
    with _raises(40401, 404):
        registry.client().get_versions(_subject())
    with _raises(40401, 404):
        registry.client().lookup_schema(_subject(), orders.v1)
    with _raises(40402, 404):
        registry.client().get_version(subject, 99)
    with _raises(40403, 404):
        registry.client().get_schema(2_000_000_000)
    with _raises(40403, 404):
        registry.client().lookup_schema(subject, orders.v2)
    with _raises(40408, 404):
        registry.client().get_compatibility(subject)
    with _raises(40409, 404):
        registry.client().get_mode(subject)
    with _raises(42201, 422):
        registry.client().register_schema(subject, Schema('{"type": "record"}', "AVRO"))
    with _raises(42203, 422):
        registry.client().set_compatibility(subject, "SIDEWAYS")
    with _raises(42204, 422):
        registry.client().update_mode(subject, "SOMETIMES")


def test_soft_then_permanent_delete_of_a_version(registry: Registry, orders: Orders) -> None:
    subject = _subject()
    client = registry.client()
    client.register_schema(subject, orders.v1)
    second = client.register_schema(subject, orders.v2)

    with _raises(40407, 404):
        registry.client().delete_version(subject, 2, permanent=True)
    assert client.delete_version(subject, 2) == 2
    assert registry.client().get_versions(subject) == [1]
    assert registry.client().get_versions(subject, deleted=True) == [1, 2]
    assert registry.client().get_latest_version(subject).version == 1
    with _raises(40402, 404):
        registry.client().get_version(subject, 2)
    assert registry.client().get_version(subject, 2, deleted=True).schema_id == second
    # Consumers of old records still resolve a soft-deleted schema by id.
    assert json.loads(registry.client().get_schema(second).schema_str) == json.loads(
        orders.v2.schema_str
    )
    with _raises(40406, 404):
        registry.client().delete_version(subject, 2)

    assert client.delete_version(subject, 2, permanent=True) == 2
    assert registry.client().get_versions(subject, deleted=True) == [1]
    with _raises(40403, 404):
        registry.client().get_schema(second)


def test_soft_then_permanent_delete_of_a_subject(registry: Registry, orders: Orders) -> None:
    subject = _subject()
    client = registry.client()
    first = client.register_schema(subject, orders.v1)
    client.register_schema(subject, orders.v2)
    # A subject-level setting is removed with the subject.
    client.set_compatibility(subject, "FULL")

    with _raises(40405, 404):
        registry.client().delete_subject(subject, permanent=True)
    assert client.delete_subject(subject) == [1, 2]
    assert subject not in registry.client().get_subjects()
    assert subject in registry.client().get_subjects(deleted=True)
    with _raises(40401, 404):
        registry.client().get_latest_version(subject)
    assert registry.client().lookup_schema(subject, orders.v1, deleted=True).version == 1
    assert json.loads(registry.client().get_schema(first).schema_str) == json.loads(
        orders.v1.schema_str
    )
    with _raises(40404, 404):
        registry.client().delete_subject(subject)

    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in registry.client().get_subjects(deleted=True)
    with _raises(40403, 404):
        registry.client().get_schema(first)
    with _raises(40408, 404):
        registry.client().get_compatibility(subject)


def test_normalized_registration_finds_an_equivalent_schema(registry: Registry) -> None:
    subject = _subject()
    namespaced = _record("Visit", ("page", "string"), namespace=f"n{uuid.uuid4().hex[:6]}")
    space = json.loads(namespaced.schema_str)["namespace"]
    full_name = Schema(
        json.dumps(
            {
                "name": f"{space}.Visit",
                "type": "record",
                "fields": [{"type": "string", "name": "page"}],
            }
        ),
        "AVRO",
    )
    schema_id = registry.client().register_schema(subject, namespaced, normalize_schemas=True)

    found = registry.client().lookup_schema(subject, full_name, normalize_schemas=True)
    assert (found.schema_id, found.version) == (schema_id, 1)
    assert (
        registry.client().register_schema(subject, full_name, normalize_schemas=True) == schema_id
    )
    assert registry.client().get_versions(subject) == [1]


def test_subject_compatibility_and_config(registry: Registry, orders: Orders) -> None:
    subject = _subject()
    client = registry.client()
    client.register_schema(subject, orders.v1)
    assert client.get_compatibility() in {level.value for level in ConfigCompatibilityLevel}

    assert client.set_compatibility(subject, "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility(subject) == "NONE"
    # NONE lets an incompatible schema in.
    assert client.register_schema(subject, orders.broken) > 0

    client.set_config(subject, ServerConfig(compatibility=ConfigCompatibilityLevel.FULL))
    config = registry.client().get_config(subject)
    assert config.compatibility_level is ConfigCompatibilityLevel.FULL
    assert client.test_compatibility(subject, orders.v1) is False

    deleted = client.delete_config(subject)
    assert deleted.compatibility_level is ConfigCompatibilityLevel.FULL
    with _raises(40408, 404):
        registry.client().get_config(subject)


def test_subject_modes(registry: Registry, orders: Orders) -> None:
    subject, empty = _subject(), _subject()
    client = registry.client()
    client.register_schema(subject, orders.v1)

    assert client.update_mode(subject, "READONLY") == "READONLY"
    assert registry.client().get_mode(subject) == "READONLY"
    with _raises(42205, 422):
        registry.client().register_schema(subject, orders.v2)
    with _raises(42205, 422):
        registry.client().delete_version(subject, 1)
    with _raises(42205, 422):
        registry.client().delete_subject(subject)
    # Reads still work in READONLY.
    assert registry.client().get_latest_version(subject).version == 1

    assert client.delete_mode(subject) == "READONLY"
    with _raises(40409, 404):
        registry.client().get_mode(subject)
    assert registry.client().register_schema(subject, orders.v2) > 0

    with _raises(42205, 422):
        client.update_mode(subject, "IMPORT")
    assert client.update_mode(subject, "IMPORT", force=True) == "IMPORT"
    assert client.update_mode(empty, "IMPORT") == "IMPORT"
    assert client.delete_mode(empty) == "IMPORT"
    assert client.delete_mode(subject) == "IMPORT"
    assert client.get_global_mode() == "READWRITE"


def test_registry_wide_compatibility_and_mode(private_registry: Registry, orders: Orders) -> None:
    subject, exempt = _subject(), _subject()
    client = private_registry.client()
    client.register_schema(subject, orders.v1)
    client.register_schema(exempt, orders.v1)

    assert client.get_compatibility() == "BACKWARD"
    assert client.set_compatibility(level="NONE") == {"compatibility": "NONE"}
    assert (
        private_registry.client().get_config().compatibility_level is ConfigCompatibilityLevel.NONE
    )
    assert client.register_schema(subject, orders.broken) > 0
    client.set_config(config=ServerConfig(compatibility=ConfigCompatibilityLevel.BACKWARD))
    assert private_registry.client().get_compatibility() == "BACKWARD"
    with _raises(40901, 409):
        private_registry.client().register_schema(subject, orders.v2)

    assert client.update_global_mode("READONLY") == "READONLY"
    try:
        assert private_registry.client().get_global_mode() == "READONLY"
        with _raises(42205, 422):
            private_registry.client().register_schema(subject, orders.v2)
        # A subject's own mode overrides the registry-wide one.
        client.update_mode(exempt, "READWRITE")
        assert private_registry.client().register_schema(exempt, orders.v2) > 0
        with _raises(42205, 422):
            client.update_global_mode("IMPORT")
    finally:
        client.update_global_mode("READWRITE")
    assert private_registry.client().get_global_mode() == "READWRITE"


ADDRESS = json.dumps(
    {
        "type": "record",
        "name": "Address",
        "namespace": "crm.types",
        "fields": [{"name": "street", "type": "string"}, {"name": "city", "type": "string"}],
    }
)
PERSON = json.dumps(
    {
        "type": "record",
        "name": "Person",
        "namespace": "crm",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "home", "type": "crm.types.Address"},
            {"name": "work", "type": ["null", "crm.types.Address"], "default": None},
        ],
    }
)


def test_a_schema_uses_a_named_type_from_another_subject(registry: Registry) -> None:
    address_subject, person_subject = _subject("address"), _subject()
    client = registry.client()
    client.register_schema(address_subject, Schema(ADDRESS, "AVRO"))
    reference = SchemaReference("crm.types.Address", address_subject, 1)
    person = Schema(PERSON, "AVRO", [reference])
    person_id = client.register_schema(person_subject, person)

    fetched = registry.client().get_schema(person_id)
    assert fetched.references == [reference]
    assert json.loads(fetched.schema_str) == json.loads(PERSON)
    version = registry.client().get_version(person_subject, 1)
    assert version.schema.references == [reference]
    assert registry.client().lookup_schema(person_subject, person).schema_id == person_id
    # Without the reference the named type is unknown.
    with _raises(42201, 422):
        registry.client().register_schema(_subject(), Schema(PERSON, "AVRO"))

    assert client.get_referenced_by(address_subject, 1) == [person_id]
    with _raises(42206, 422):
        registry.client().delete_version(address_subject, 1)
    with _raises(42206, 422):
        registry.client().delete_subject(address_subject)

    client.delete_subject(person_subject)
    assert client.get_referenced_by(address_subject, 1) == []
    assert client.delete_subject(address_subject) == [1]


def test_avro_serializer_and_deserializer_round_trip_through_kafka(
    registry: Registry, kafka_bootstrap: str
) -> None:
    topic = f"client.people_{uuid.uuid4().hex[:8]}"
    address_subject = f"{topic}-address"
    registry.client().register_schema(address_subject, Schema(ADDRESS, "AVRO"))
    person = Schema(PERSON, "AVRO", [SchemaReference("crm.types.Address", address_subject, 1)])
    values = [
        {
            "name": f"person {n}",
            "home": {"street": f"{n} Main St", "city": "Springfield"},
            "work": None if n % 2 else {"street": "1 Plant Rd", "city": "Shelbyville"},
        }
        for n in range(8)
    ]

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(30)
    failures: list[object] = []
    producer = SerializingProducer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "key.serializer": StringSerializer("utf_8"),
            # auto.register.schemas is on by default: the serializer registers `person`.
            "value.serializer": AvroSerializer(registry.client(), person),
        }
    )
    for value in values:
        producer.produce(
            topic,
            key=value["name"],
            value=value,
            on_delivery=lambda error, _message: failures.append(error) if error else None,
        )
    assert producer.flush(30) == 0
    assert failures == []

    registered = registry.client().get_latest_version(f"{topic}-value")
    assert registered.version == 1
    raw = read_all(kafka_bootstrap, topic, expected=len(values))
    # Confluent's wire format: magic byte 0, then the schema id the hub assigned.
    assert {m.value()[:5] for m in raw} == {b"\x00" + registered.schema_id.to_bytes(4, "big")}

    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"client-{topic}",
            "auto.offset.reset": "earliest",
            "key.deserializer": StringDeserializer("utf_8"),
            "value.deserializer": AvroDeserializer(registry.client()),
        }
    )
    consumer.subscribe([topic])
    received: list[Any] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received.append(message.value())
            if len(received) == len(values):
                break
    finally:
        consumer.close()
    assert received == values
