"""The publish gateway against the real broker: per-record answers after Kafka's acknowledgement."""

import json
import uuid
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from registry.wire import unframe
from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "namespace": "plant",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "celsius", "type": "double"},
        {"name": "taken_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
TEAM = "plant"


@pytest.fixture(scope="module")
def key(team_key: Any) -> str:
    return str(team_key(TEAM))


@pytest.fixture
def topic(api_url: str, key: str) -> str:
    name = unique_topic("plant")
    create_feed(api_url, key, topic=name, schema=SCHEMA, owner=TEAM, partitions=2)
    return name


def _reading(n: int) -> dict[str, Any]:
    return {"sensor": f"s{n}", "celsius": 20.5 + n, "taken_at": "2024-05-01T12:00:00Z"}


def test_every_record_is_answered_with_the_offset_kafka_stored_it_at(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    records = [
        {"key": f"s{n}", "value": _reading(n), "headers": {"source": "test"},
         "timestamp": 1714564800000 + n}
        for n in range(20)
    ]  # fmt: skip
    response = publish(api_url, key, topic, records)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["accepted"], answer["rejected"], answer["schema_version"]) == (20, 0, 1)

    stored = {(m.partition(), m.offset()): m for m in read_all(kafka_bootstrap, topic, expected=20)}
    for sent, result in zip(records, answer["results"], strict=True):
        message = stored[(result["partition"], result["offset"])]
        schema_id, _payload = unframe(message.value())
        assert schema_id == answer["schema_id"]
        assert message.key() == sent["key"].encode()
        # The record's own headers, then the request's id (lineage).
        request_id = response.headers["X-Request-Id"].encode()
        assert message.headers() == [("source", b"test"), ("hub.request-id", request_id)]
        assert message.timestamp()[1] == sent["timestamp"]


def test_invalid_records_are_rejected_with_a_path_and_valid_ones_still_publish(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    records = [
        {"value": _reading(1)},
        {"value": {**_reading(2), "celsius": "warm"}},
        {"value": _reading(3)},
    ]
    response = publish(api_url, key, topic, records)
    assert response.status_code == 207
    first, bad, third = response.json()["results"]
    assert bad["error_code"] == 42220
    assert bad["path"] == "$.celsius"
    assert "partition" not in bad
    assert first["offset"] is not None and third["offset"] is not None
    assert len(read_all(kafka_bootstrap, topic, expected=2)) == 2


def test_a_batch_with_no_valid_record_is_a_422(api_url: str, key: str, topic: str) -> None:
    response = publish(api_url, key, topic, [{"value": {"sensor": "x"}}])
    assert response.status_code == 422
    assert response.json()["results"][0]["path"] == "$.celsius"


def test_dlq_routing_keeps_the_record_and_the_reason(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    bad_value = {**_reading(2), "celsius": "warm"}
    response = publish(
        api_url, key, topic, [{"value": _reading(1)}, {"value": bad_value}], on_error="dlq"
    )
    assert response.status_code == 200, response.text
    good, bad = response.json()["results"]
    assert "offset" in good
    assert bad["dead_lettered"] is True and bad["error_code"] == 42220

    (letter,) = read_all(kafka_bootstrap, f"{topic}.dlq", expected=1)
    headers = dict(letter.headers())
    assert headers["hub.error.code"] == b"42220"
    assert headers["hub.error.path"] == b"$.celsius"
    assert json.loads(letter.value())["value"] == bad_value
    assert len(read_all(kafka_bootstrap, topic, expected=1)) == 1


def test_atomic_batches_publish_all_or_nothing(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    refused = publish(
        api_url, key, topic,
        [{"value": _reading(1)}, {"value": {**_reading(2), "celsius": "warm"}}],
        atomic="true", on_error="dlq",
    )  # fmt: skip
    assert refused.status_code == 422
    first, second = refused.json()["results"]
    assert first["error_code"] == 42225 and "atomic" in first["message"]
    assert second["error_code"] == 42220 and not second.get("dead_lettered")
    ends = _end_offsets(kafka_bootstrap, topic) + _end_offsets(kafka_bootstrap, f"{topic}.dlq")
    assert set(ends) == {0}  # neither the records nor a dead letter were written

    accepted = publish(
        api_url, key, topic, [{"value": _reading(n)} for n in range(5)], atomic="true"
    )
    assert accepted.status_code == 200, accepted.text
    assert all("offset" in r for r in accepted.json()["results"])
    committed = _read_committed(kafka_bootstrap, topic)
    assert sorted(json.loads(json.dumps(c)) for c in committed) == sorted(
        [r["partition"], r["offset"]] for r in accepted.json()["results"]
    )


def _end_offsets(bootstrap: str, topic: str) -> list[int]:
    """The end offset of each of `topic`'s partitions: 0 where nothing was ever written."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"end-{uuid.uuid4()}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in sorted(partitions)
        ]
    finally:
        consumer.close()


def _read_committed(bootstrap: str, topic: str) -> list[list[int]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4()}",
         "isolation.level": "read_committed", "enable.auto.commit": False}
    )  # fmt: skip
    metadata = consumer.list_topics(topic, timeout=10).topics[topic]
    consumer.assign([TopicPartition(topic, p, 0) for p in metadata.partitions])
    seen: list[list[int]] = []
    for _ in range(10):
        for m in consumer.consume(100, timeout=1.0):
            if m.error() is None:
                seen.append([m.partition(), m.offset()])
    consumer.close()
    return seen


def test_a_retry_with_the_same_idempotency_key_publishes_nothing_twice(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    body = {"records": [{"value": _reading(n)} for n in range(3)]}
    headers = {**bearer(key), "Idempotency-Key": "batch-0001"}
    url = f"{api_url}/v1/feeds/{topic}/records"
    first = httpx.post(url, json=body, headers=headers)
    again = httpx.post(url, json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    stored = read_all(kafka_bootstrap, topic, expected=3, timeout_s=5)
    assert len(stored) == 3
    # Each record names its request and position, so a duplicate is recognisable downstream.
    assert sorted(dict(m.headers())["hub.idempotency-key"] for m in stored) == [
        b"batch-0001:0",
        b"batch-0001:1",
        b"batch-0001:2",
    ]

    changed = httpx.post(url, json={"records": body["records"][:1]}, headers=headers)
    assert changed.status_code == 422
    assert changed.json()["error_code"] == 42223


def test_only_the_owning_team_or_an_admin_may_publish(
    api_url: str, key: str, team_key: Any, admin_key: str, topic: str
) -> None:
    other = team_key("someone_else")
    denied = publish(api_url, other, topic, [{"value": _reading(1)}])
    assert denied.status_code == 403
    assert denied.json()["error_code"] == 40301
    assert "plant" in denied.json()["message"]

    anonymous = httpx.post(
        f"{api_url}/v1/feeds/{topic}/records", json={"records": [{"value": _reading(1)}]}
    )
    assert anonymous.status_code == 401
    assert anonymous.json()["error_code"] == 40101
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")

    wrong = publish(api_url, "hub_0000_not-a-key", topic, [{"value": _reading(1)}])
    assert wrong.status_code == 401
    assert publish(api_url, admin_key, topic, [{"value": _reading(1)}]).status_code == 200


@pytest.mark.parametrize(
    ("path", "content", "content_type", "status", "code"),
    [
        ("/v1/feeds/no.such_feed/records", '{"records": [{"value": {}}]}', "application/json", 404, 40420),  # noqa: E501
        ("/v1/feeds/{topic}/records", '{"records": []}', "application/json", 400, 40001),
        ("/v1/feeds/{topic}/records?on_error=bogus", '{"records": [{"value": {}}]}',
         "application/json", 400, 40001),
        ("/v1/feeds/{topic}/records", '{"rows": []}', "application/json", 400, 40001),
        ("/v1/feeds/{topic}/records", "not json at all", "application/json", 400, 40001),
        ("/v1/feeds/{topic}/records", '{"records": [{"value": {}}]}', "text/csv", 415, 41501),
        ("/v1/feeds/{topic}/records", json.dumps({"records": [{"value": {}}] * 10_001}),
         "application/json", 422, 42224),
        ("/v1/feeds/{topic}/records", '{"records": [{"value": "' + "x" * 17_000_000 + '"}]}',
         "application/json", 413, 41301),
    ],
)  # fmt: skip
def test_bad_requests_get_a_4xx_with_a_code(
    api_url: str, key: str, topic: str, path: str, content: str, content_type: str,
    status: int, code: int,
) -> None:  # fmt: skip
    response = httpx.post(
        api_url + path.format(topic=topic),
        content=content,
        headers={**bearer(key), "Content-Type": content_type},
        timeout=60,
    )
    assert response.status_code == status, response.text
    assert response.json()["error_code"] == code
