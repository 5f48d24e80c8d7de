"""The publish gateway against the real broker: per-record answers after Kafka's acknowledgement."""

import json
import uuid

import httpx
import pytest

from registry.wire import unframe
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "sensor", "type": "string"},
        {"name": "celsius", "type": "double"},
        {"name": "taken_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


@pytest.fixture
def topic(api_url: str) -> str:
    name = f"plant.readings_{uuid.uuid4().hex[:8]}"
    httpx.post(
        f"{api_url}/subjects/{name}-value/versions", json={"schema": json.dumps(SCHEMA)}
    ).raise_for_status()
    return name


def _reading(n: int) -> dict:
    return {"sensor": f"s{n}", "celsius": 20.5 + n, "taken_at": "2024-05-01T12:00:00Z"}


def test_every_record_is_answered_with_the_offset_kafka_stored_it_at(
    api_url: str, kafka_bootstrap: str, topic: str
) -> None:
    records = [{"key": f"s{n}", "value": _reading(n)} for n in range(20)]
    response = httpx.post(f"{api_url}/v1/feeds/{topic}/records", json={"records": records})
    assert response.status_code == 200
    answer = response.json()
    assert (answer["accepted"], answer["rejected"]) == (20, 0)

    stored = {(m.partition(), m.offset()): m for m in read_all(kafka_bootstrap, topic, expected=20)}
    for sent, result in zip(records, answer["results"], strict=True):
        message = stored[(result["partition"], result["offset"])]
        schema_id, _payload = unframe(message.value())
        assert schema_id == answer["schema_id"]
        assert message.key() == sent["key"].encode()


def test_invalid_records_are_rejected_with_a_path_and_valid_ones_still_publish(
    api_url: str, kafka_bootstrap: str, topic: str
) -> None:
    records = [
        {"value": _reading(1)},
        {"value": {**_reading(2), "celsius": "warm"}},
        {"value": _reading(3)},
    ]
    response = httpx.post(f"{api_url}/v1/feeds/{topic}/records", json={"records": records})
    assert response.status_code == 207
    first, bad, third = response.json()["results"]
    assert bad["error_code"] == 42220
    assert bad["path"] == "$.celsius"
    assert "partition" not in bad
    assert first["offset"] is not None and third["offset"] is not None
    assert len(read_all(kafka_bootstrap, topic, expected=2)) == 2


def test_a_batch_with_no_valid_record_is_a_422(api_url: str, topic: str) -> None:
    response = httpx.post(
        f"{api_url}/v1/feeds/{topic}/records", json={"records": [{"value": {"sensor": "x"}}]}
    )
    assert response.status_code == 422
    assert response.json()["results"][0]["path"] == "$.celsius"


@pytest.mark.parametrize(
    ("path", "body", "status", "code"),
    [
        ("/v1/feeds/no.schema_here/records", {"records": [{"value": {}}]}, 404, 40401),
        ("/v1/feeds/NotATopic/records", {"records": [{"value": {}}]}, 400, 40001),
        ("/v1/feeds/{topic}/records", {"records": []}, 400, 40001),
        ("/v1/feeds/{topic}/records", {"rows": []}, 400, 40001),
        ("/v1/feeds/{topic}/records", "not json at all", 400, 40001),
    ],
)
def test_bad_requests_get_a_4xx_with_a_code(
    api_url: str, topic: str, path: str, body: object, status: int, code: int
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    response = httpx.post(
        api_url + path.format(topic=topic),
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == status
    assert response.json()["error_code"] == code
