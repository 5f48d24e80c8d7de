"""Records the gateway publishes are read by confluent-kafka's own Avro deserializer."""

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.kafka import read_avro

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

    received = read_avro(api_url, kafka_bootstrap, topic, expected=len(values))

    expected = [
        (v["email"], {**v, "signed_up_at": datetime.fromtimestamp(v["signed_up_at"] / 1000, UTC)})
        for v in values
    ]
    assert received == expected
