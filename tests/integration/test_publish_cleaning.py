"""Cleaning rules declared in a feed's schema, applied by the gateway and reported per record."""

import io
from collections.abc import Callable
from datetime import UTC, datetime

import fastavro
import httpx
import pytest

from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration

CUSTOMER = {
    "type": "record",
    "name": "Customer",
    "fields": [
        {"name": "email", "type": "string", "hub.clean": ["trim", "lowercase"]},
        {"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["FREE", "GOLD"]},
         "hub.clean": ["enum_case_insensitive"]},
        {"name": "visits", "type": "long", "hub.clean": ["parse_number"]},
        {"name": "seen_at", "type": {"type": "long", "logicalType": "timestamp-millis"},
         "hub.clean": ["utc_timestamp"]},
    ],
}  # fmt: skip


def test_the_gateway_cleans_as_the_schema_says_and_reports_each_change(
    api_url: str, kafka_bootstrap: str, team_key: Callable[[str], str]
) -> None:
    key = team_key("crm")
    topic = unique_topic("crm")
    create_feed(api_url, key, topic=topic, schema=CUSTOMER, owner="crm")
    messy = {"email": "  Ada@Example.COM ", "tier": "gold", "visits": "42",
             "seen_at": "2024-05-01T14:00:00+02:00"}  # fmt: skip

    response = publish(api_url, key, topic, [{"value": messy}])

    assert response.status_code == 200, response.text
    changes = {(c["path"], c["rule"]): c["after"] for c in response.json()["results"][0]["cleaned"]}
    assert changes[("$.email", "trim")] == "Ada@Example.COM"
    assert changes[("$.email", "lowercase")] == "ada@example.com"
    assert changes[("$.tier", "enum_case_insensitive")] == "GOLD"
    assert changes[("$.visits", "parse_number")] == 42
    assert changes[("$.seen_at", "utc_timestamp")] == "2024-05-01T12:00:00Z"

    (message,) = read_all(kafka_bootstrap, topic, expected=1)
    stored = fastavro.schemaless_reader(
        io.BytesIO(message.value()[5:]), fastavro.parse_schema(CUSTOMER), None
    )
    assert stored == {"email": "ada@example.com", "tier": "GOLD", "visits": 42,
                      "seen_at": datetime(2024, 5, 1, 12, tzinfo=UTC)}  # fmt: skip


def test_a_schema_with_an_unknown_cleaning_rule_is_refused(
    api_url: str, team_key: Callable[[str], str]
) -> None:
    schema = {"type": "record", "name": "X",
              "fields": [{"name": "a", "type": "string", "hub.clean": ["shout"]}]}  # fmt: skip
    response = httpx.post(
        f"{api_url}/v1/feeds", headers=bearer(team_key("crm")),
        json={"topic": unique_topic("crm"), "owner": "crm", "kind": "event",
              "value_schema": schema},
    )  # fmt: skip
    assert response.status_code == 422
    assert response.json()["error_code"] == 42201
    assert "shout" in response.json()["message"]
