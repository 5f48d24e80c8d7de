"""Records the gateway publishes are read by confluent-kafka's own Avro deserializer."""

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from confluent_kafka import DeserializingConsumer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import StringDeserializer

from tests.support.hub_client import create_feed, publish, unique_topic

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Signup",
    "namespace": "crm",
    "fields": [
        {"name": "email", "type": "string"},
        {"name": "plan", "type": {"type": "enum", "name": "Plan", "symbols": ["FREE", "PRO"]}},
        {"name": "referrer", "type": ["null", "string"], "default": None},
        {"name": "signed_up_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def test_confluent_avro_deserializer_decodes_gateway_records_unchanged(
    api_url: str, kafka_bootstrap: str, team_key: Callable[[str], str]
) -> None:
    key = team_key("crm")
    topic = unique_topic("crm")
    create_feed(api_url, key, topic=topic, schema=SCHEMA, owner="crm")
    values = [
        {
            "email": f"user{n}@example.com",
            "plan": "PRO" if n % 2 else "FREE",
            "referrer": None if n % 3 else "ads",
            "signed_up_at": 1714564800000 + n,
        }
        for n in range(10)
    ]
    response = publish(api_url, key, topic, [{"key": v["email"], "value": v} for v in values])
    assert response.status_code == 200

    registry = SchemaRegistryClient({"url": api_url})
    consumer = DeserializingConsumer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "group.id": f"interop-{topic}",
            "auto.offset.reset": "earliest",
            "key.deserializer": StringDeserializer("utf_8"),
            "value.deserializer": AvroDeserializer(registry),
        }
    )
    consumer.subscribe([topic])
    received = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                received.append((message.key(), message.value()))
            if len(received) == len(values):
                break
    finally:
        consumer.close()

    expected = [
        (v["email"], {**v, "signed_up_at": datetime.fromtimestamp(v["signed_up_at"] / 1000, UTC)})
        for v in values
    ]
    assert received == expected
