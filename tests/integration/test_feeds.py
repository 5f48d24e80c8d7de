"""Feeds: team-owned topics whose Kafka settings follow their kind."""

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from registry.wire import unframe
from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration

TEAM = "catalogue"
PRODUCT = {
    "type": "record",
    "name": "Product",
    "namespace": "shop",
    "fields": [
        {"name": "sku", "type": "string", "doc": "Stock-keeping unit."},
        {"name": "title", "type": "string"},
        {"name": "price_cents", "type": "long"},
    ],
}


@pytest.fixture(scope="module")
def key(team_key: Callable[[str], str]) -> str:
    return team_key(TEAM)


def _topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in entries.items()}


def test_an_event_feed_is_a_retention_topic_with_a_dead_letter_topic(
    api_url: str, kafka_bootstrap: str, key: str
) -> None:
    topic = unique_topic(TEAM)
    created = create_feed(
        api_url, key, topic=topic, schema=PRODUCT, owner=TEAM, partitions=3,
        retention_ms=3_600_000, description="Products on sale.",
    )  # fmt: skip
    assert created["kind"] == "event" and created["partitions"] == 3

    config = _topic_config(kafka_bootstrap, topic)
    assert config["cleanup.policy"] == "delete"
    assert config["retention.ms"] == "3600000"
    assert _topic_config(kafka_bootstrap, f"{topic}.dlq")["cleanup.policy"] == "delete"
    latest = httpx.get(f"{api_url}/subjects/{topic}-value/versions/latest").json()
    assert json.loads(latest["schema"])["name"] == "Product"


def test_a_changelog_feed_is_compacted_keyed_and_takes_tombstones(
    api_url: str, kafka_bootstrap: str, key: str
) -> None:
    topic = unique_topic(TEAM)
    create_feed(api_url, key, topic=topic, schema=PRODUCT, owner=TEAM, kind="changelog",
                key_fields=["sku"])  # fmt: skip
    assert _topic_config(kafka_bootstrap, topic)["cleanup.policy"] == "compact"
    key_schema = json.loads(
        httpx.get(f"{api_url}/subjects/{topic}-key/versions/latest").json()["schema"]
    )
    assert [f["name"] for f in key_schema["fields"]] == ["sku"]

    answer = publish(api_url, key, topic, [
        {"value": {"sku": "A-1", "title": "Mug", "price_cents": 990}},
        {"key": {"sku": "A-1"}, "value": None},
    ])  # fmt: skip
    assert answer.status_code == 200, answer.text
    upsert, tombstone = read_all(kafka_bootstrap, topic, expected=2)
    assert upsert.key() == tombstone.key()  # same Avro-encoded key: compaction pairs them
    assert (
        unframe(upsert.key())[0]
        == httpx.get(f"{api_url}/subjects/{topic}-key/versions/latest").json()["id"]
    )
    assert tombstone.value() is None


def test_tombstones_are_refused_in_event_feeds(api_url: str, key: str) -> None:
    topic = unique_topic(TEAM)
    create_feed(api_url, key, topic=topic, schema=PRODUCT, owner=TEAM)
    answer = publish(api_url, key, topic, [{"key": "A-1", "value": None}])
    assert answer.status_code == 422
    assert answer.json()["results"][0]["path"] == "$.value"


def test_listing_describing_changing_and_deleting_a_feed(
    api_url: str, kafka_bootstrap: str, key: str
) -> None:
    topic = unique_topic(TEAM)
    create_feed(api_url, key, topic=topic, schema=PRODUCT, owner=TEAM, partitions=2)
    publish(api_url, key, topic, [
        {"key": "A-1", "value": {"sku": "A-1", "title": "Mug", "price_cents": 990}},
    ]).raise_for_status()  # fmt: skip

    assert topic in [
        f["topic"] for f in httpx.get(f"{api_url}/v1/feeds", params={"owner": TEAM}).json()
    ]
    detail = httpx.get(f"{api_url}/v1/feeds/{topic}").json()
    assert detail["owner"] == TEAM
    assert [v["version"] for v in detail["schema_versions"]] == [1]
    assert sum(detail["end_offsets"].values()) == 1
    assert sorted(detail["end_offsets"]) == ["0", "1"]

    patched = httpx.patch(
        f"{api_url}/v1/feeds/{topic}", headers=bearer(key),
        json={"description": "Renamed.", "retention_ms": 86_400_000},
    )  # fmt: skip
    assert patched.status_code == 200 and patched.json()["description"] == "Renamed."
    assert _topic_config(kafka_bootstrap, topic)["retention.ms"] == "86400000"

    unconfirmed = httpx.delete(f"{api_url}/v1/feeds/{topic}", headers=bearer(key))
    assert unconfirmed.status_code == 400 and f"confirm={topic}" in unconfirmed.json()["message"]
    deleted = httpx.delete(
        f"{api_url}/v1/feeds/{topic}", headers=bearer(key), params={"confirm": topic}
    )
    assert deleted.status_code == 200
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").json()["error_code"] == 40420
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert topic not in topics and f"{topic}.dlq" not in topics


@pytest.mark.parametrize(
    ("change", "code", "words"),
    [
        ({"kind": "changelog"}, 42222, "needs key_fields"),
        ({"key_fields": ["nope"]}, 42222, "not fields of the value schema"),
        ({"value_schema": '"string"'}, 42222, "must be an Avro record"),
        ({"partitions": 0}, 42222, "partitions must be between"),
        ({"value_schema": '{"type": "record"}'}, 42201, "needs a 'name'"),
        ({"topic": "NoDomain"}, 40001, "Invalid topic name"),
        ({"kind": "stream"}, 40001, "kind"),
        ({"colour": "blue"}, 40001, "colour"),
    ],
)
def test_invalid_feeds_are_refused_with_the_reason(
    api_url: str, key: str, change: dict[str, Any], code: int, words: str
) -> None:
    body = {"topic": unique_topic(TEAM), "owner": TEAM, "kind": "event",
            "value_schema": json.dumps(PRODUCT), **change}  # fmt: skip
    response = httpx.post(f"{api_url}/v1/feeds", headers=bearer(key), json=body)
    assert response.json()["error_code"] == code, response.text
    assert words in response.json()["message"]


def test_teams_administer_only_their_own_feeds(
    api_url: str, key: str, team_key: Callable[[str], str]
) -> None:
    topic = unique_topic(TEAM)
    other = team_key("intruders")
    refused = httpx.post(
        f"{api_url}/v1/feeds", headers=bearer(other),
        json={"topic": topic, "owner": TEAM, "kind": "event", "value_schema": json.dumps(PRODUCT)},
    )  # fmt: skip
    assert refused.status_code == 403
    create_feed(api_url, key, topic=topic, schema=PRODUCT, owner=TEAM)
    assert httpx.patch(f"{api_url}/v1/feeds/{topic}", headers=bearer(other),
                       json={"description": "mine now"}).status_code == 403  # fmt: skip
    assert httpx.delete(f"{api_url}/v1/feeds/{topic}", headers=bearer(other),
                        params={"confirm": topic}).status_code == 403  # fmt: skip
