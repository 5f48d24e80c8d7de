"""Feed creation never writes over another team's feed, a reserved topic or a foreign topic."""

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from tests.support.hub_client import bearer, create_feed, unique_topic

pytestmark = pytest.mark.integration

OWNER = "ownership_a"
OTHER = "ownership_b"
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "sales",
    "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}],
}
# Compatible with ORDER (a new optional field), so only ownership can refuse it.
ORDER_V2 = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


@pytest.fixture(scope="module")
def owner_key(team_key: Callable[[str], str]) -> str:
    return team_key(OWNER)


@pytest.fixture(scope="module")
def other_key(team_key: Callable[[str], str]) -> str:
    return team_key(OTHER)


@pytest.fixture(scope="module")
def admin(kafka_bootstrap: str) -> TopicAdmin:
    return TopicAdmin(KafkaSettings(bootstrap_servers=kafka_bootstrap))


def _post_feed(api_url: str, key: str, topic: str, owner: str, schema: Any) -> httpx.Response:
    return httpx.post(
        f"{api_url}/v1/feeds",
        headers=bearer(key),
        json={"topic": topic, "owner": owner, "kind": "event", "value_schema": json.dumps(schema)},
        timeout=60,
    )


def _versions(api_url: str, subject: str) -> Any:
    return httpx.get(f"{api_url}/subjects/{subject}/versions").json()


def _shown(admin: TopicAdmin, topic: str, *, present: bool) -> bool:
    """Whether Kafka's metadata shows `topic` present (or absent), waiting for it to settle."""
    deadline = time.monotonic() + 30
    while admin.exists(topic) is not present:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_another_team_creating_a_feed_on_a_taken_topic_gets_409_and_registers_nothing(
    api_url: str, owner_key: str, other_key: str
) -> None:
    topic = unique_topic("sales")
    create_feed(api_url, owner_key, topic=topic, schema=ORDER, owner=OWNER)
    before = _versions(api_url, f"{topic}-value")

    response = _post_feed(api_url, other_key, topic, OTHER, ORDER_V2)

    assert response.status_code == 409, response.text
    assert response.json()["error_code"] == 40920
    assert OWNER in response.json()["message"]
    assert _versions(api_url, f"{topic}-value") == before == [1]
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").json()["owner"] == OWNER


@pytest.mark.parametrize("reserved", ["x.y.dlq", "_hub_state.orders", "__consumer_offsets"])
def test_a_reserved_topic_is_refused_as_a_feed_and_nothing_is_created(
    api_url: str, owner_key: str, admin: TopicAdmin, reserved: str
) -> None:
    response = _post_feed(api_url, owner_key, reserved, OWNER, ORDER)

    assert response.status_code == 422, response.text
    assert response.json()["error_code"] == 42227
    assert "reserved" in response.json()["message"]
    assert httpx.get(f"{api_url}/subjects/{reserved}-value/versions").status_code == 404
    assert httpx.get(f"{api_url}/v1/feeds/{reserved}").status_code == 404
    if reserved != "__consumer_offsets":  # Kafka's own; may exist on the broker
        assert not admin.exists(reserved)
        assert not admin.exists(f"{reserved}.dlq")


def test_another_feeds_dead_letter_topic_cannot_be_claimed_or_deleted_as_a_feed(
    api_url: str, owner_key: str, other_key: str, admin: TopicAdmin
) -> None:
    topic = unique_topic("sales")
    create_feed(api_url, owner_key, topic=topic, schema=ORDER, owner=OWNER)
    dlq = f"{topic}.dlq"
    assert _shown(admin, dlq, present=True)

    created = _post_feed(api_url, other_key, dlq, OTHER, ORDER)
    deleted = httpx.delete(
        f"{api_url}/v1/feeds/{dlq}", headers=bearer(other_key), params={"confirm": dlq}
    )

    assert created.status_code == 422 and created.json()["error_code"] == 42227, created.text
    assert deleted.status_code == 422 and deleted.json()["error_code"] == 42227, deleted.text
    assert "dead-letter" in deleted.json()["message"]
    assert admin.exists(dlq)
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").json()["owner"] == OWNER


def test_a_kafka_topic_created_outside_the_hub_is_not_adopted_as_a_feed(
    api_url: str, owner_key: str, admin: TopicAdmin
) -> None:
    topic = unique_topic("sales")
    assert admin.create(topic, partitions=1, config={})

    response = _post_feed(api_url, owner_key, topic, OWNER, ORDER)

    assert response.status_code == 409, response.text
    assert response.json()["error_code"] == 40923
    assert "outside the hub" in response.json()["message"]
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").status_code == 404
    assert httpx.get(f"{api_url}/subjects/{topic}-value/versions").status_code == 404
    assert not admin.exists(f"{topic}.dlq")
    assert admin.exists(topic)  # left as it was


def test_a_feed_whose_schema_is_refused_leaves_no_topics_behind_and_can_be_retried(
    api_url: str, owner_key: str, admin: TopicAdmin
) -> None:
    topic = unique_topic("sales")
    subject = f"{topic}-value"
    # A subject left from an earlier feed of that topic, which the new schema breaks.
    registered = httpx.post(
        f"{api_url}/subjects/{subject}/versions",
        headers=bearer(owner_key),
        json={"schema": json.dumps(ORDER)},
        timeout=30,
    )
    assert registered.status_code == 200, registered.text
    breaking = {**ORDER, "fields": [{"name": "id", "type": "long"}]}

    refused = _post_feed(api_url, owner_key, topic, OWNER, breaking)

    assert refused.status_code == 409 and refused.json()["error_code"] == 40901, refused.text
    assert _shown(admin, topic, present=False) and _shown(admin, f"{topic}.dlq", present=False)
    assert _versions(api_url, subject) == [1]
    assert _post_feed(api_url, owner_key, topic, OWNER, ORDER_V2).status_code == 201
    assert _versions(api_url, subject) == [1, 2]
