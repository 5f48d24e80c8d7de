"""Tombstones through the gateway against the real broker: delete markers for compacted feeds."""

from typing import Any

import pytest

from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Account",
    "namespace": "bank",
    "fields": [
        {"name": "region", "type": "string"},
        {"name": "account_id", "type": "long"},
        {"name": "balance", "type": "double"},
    ],
}
TEAM = "bank"


@pytest.fixture(scope="module")
def key(team_key: Any) -> str:
    return str(team_key(TEAM))


def _account(n: int) -> dict[str, Any]:
    return {"region": "eu", "account_id": n, "balance": 10.0 * n}


def test_a_null_value_in_a_changelog_feed_is_a_tombstone_keyed_like_its_record(
    api_url: str, kafka_bootstrap: str, key: str
) -> None:
    topic = unique_topic("bank")
    create_feed(
        api_url, key, topic=topic, schema=SCHEMA, owner=TEAM, kind="changelog",
        key_fields=["region", "account_id"],
    )  # fmt: skip
    records = [
        {"value": _account(1)},
        {"value": _account(2)},
        {"key": {"region": "eu", "account_id": 1}, "value": None},
    ]
    response = publish(api_url, key, topic, records)
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 3
    written, other, deleted = response.json()["results"]

    stored = {(m.partition(), m.offset()): m for m in read_all(kafka_bootstrap, topic, expected=3)}
    record = stored[(written["partition"], written["offset"])]
    tombstone = stored[(deleted["partition"], deleted["offset"])]
    assert tombstone.value() is None
    assert tombstone.key() == record.key()
    assert tombstone.key() != stored[(other["partition"], other["offset"])].key()


def test_a_tombstone_in_a_keyed_feed_needs_its_key(api_url: str, key: str) -> None:
    topic = unique_topic("bank")
    create_feed(
        api_url, key, topic=topic, schema=SCHEMA, owner=TEAM, kind="changelog",
        key_fields=["region", "account_id"],
    )  # fmt: skip
    response = publish(api_url, key, topic, [{"value": None}])
    assert response.status_code == 422
    (result,) = response.json()["results"]
    assert result["error_code"] == 42220
    assert result["path"] == "$.key"
    assert "tombstone" in result["message"]


def test_a_null_value_in_an_event_feed_is_refused_and_the_others_still_publish(
    api_url: str, kafka_bootstrap: str, key: str
) -> None:
    topic = unique_topic("bank")
    create_feed(api_url, key, topic=topic, schema=SCHEMA, owner=TEAM, kind="event")
    response = publish(api_url, key, topic, [{"value": _account(1)}, {"key": "a-1", "value": None}])
    assert response.status_code == 207, response.text
    published, refused = response.json()["results"]
    assert "offset" in published
    assert refused["error_code"] == 42226
    assert refused["path"] == "$.value"
    assert "changelog" in refused["message"] and topic in refused["message"]
    assert "partition" not in refused
    assert len(read_all(kafka_bootstrap, topic, expected=1, timeout_s=5)) == 1
