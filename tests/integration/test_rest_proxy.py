"""REST Proxy v2 clients publish Avro to hub feeds unchanged, through the real broker."""

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer

from registry.wire import unframe
from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_feed, unique_topic
from tests.support.kafka import read_all, read_avro
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

TEAM = "fleet"
AVRO = "application/vnd.kafka.avro.v2+json"
KAFKA_V2 = "application/vnd.kafka.v2+json"
# What a REST Proxy client sends (Confluent's documented request headers).
ACCEPT = "application/vnd.kafka.v2+json, application/vnd.kafka+json, application/json"
SCHEMA = {
    "type": "record",
    "name": "Trip",
    "namespace": "fleet",
    "fields": [
        {"name": "vehicle", "type": "string"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CAR", "VAN"]}},
        {"name": "started_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {
            "name": "fare",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2},
        },
        {"name": "driver", "type": ["null", "string"], "default": None},
    ],
}
STARTED_AT = 1714564800000


@pytest.fixture(scope="module")
def key(team_key: Callable[[str], str]) -> str:
    return team_key(TEAM)


@pytest.fixture
def topic(api_url: str, key: str) -> str:
    name = unique_topic("fleet")
    create_feed(api_url, key, topic=name, schema=SCHEMA, owner=TEAM, partitions=2)
    return name


def _fare(cents: int) -> str:
    """A decimal in the Avro JSON encoding: its unscaled two's-complement bytes as code points."""
    return cents.to_bytes(4, "big", signed=True).lstrip(b"\x00").decode("latin-1") or "\x00"


def _trip(n: int, *, driver: str | None = None) -> dict[str, Any]:
    """A Trip value in the Avro JSON encoding, as a REST Proxy client sends it."""
    return {
        "vehicle": f"v{n}",
        "kind": "VAN" if n % 2 else "CAR",
        "started_at": STARTED_AT + n,
        "fare": _fare(1250 + n),
        "driver": None if driver is None else {"string": driver},
    }


def _decoded(n: int, *, driver: str | None = None) -> dict[str, Any]:
    """The same Trip as confluent-kafka's AvroDeserializer returns it."""
    return {
        "vehicle": f"v{n}",
        "kind": "VAN" if n % 2 else "CAR",
        "started_at": datetime.fromtimestamp((STARTED_AT + n) / 1000, UTC),
        "fare": Decimal(1250 + n) / 100,
        "driver": driver,
    }


def _produce(
    api_url: str,
    key: str | None,
    topic: str,
    body: Any,
    *,
    content_type: str = AVRO,
    request_id: str | None = None,
) -> httpx.Response:
    headers = {"Content-Type": content_type, "Accept": ACCEPT}
    if request_id is not None:
        headers["X-Request-Id"] = request_id
    if key is not None:
        headers.update(bearer(key))
    return httpx.post(
        f"{api_url}/topics/{topic}",
        content=body if isinstance(body, str) else json.dumps(body),
        headers=headers,
        timeout=60,
    )


def _latest_id(api_url: str, subject: str) -> int:
    response = httpx.get(f"{api_url}/subjects/{subject}/versions/latest")
    assert response.status_code == 200, response.text
    schema_id: int = response.json()["id"]
    return schema_id


def test_a_rest_proxy_client_produces_with_value_schema_then_with_its_id(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    first = _produce(
        api_url,
        key,
        topic,
        {
            "value_schema": json.dumps(SCHEMA),
            "records": [{"key": "v0", "value": _trip(0)}, {"value": _trip(1, driver="ann")}],
        },
        request_id="trips-import-7",
    )
    assert first.status_code == 200, first.text
    assert first.headers["content-type"] == KAFKA_V2
    assert first.headers["X-Request-Id"] == "trips-import-7"
    answer = first.json()
    assert set(answer) == {"key_schema_id", "value_schema_id", "offsets"}
    assert answer["key_schema_id"] is None
    assert answer["value_schema_id"] == _latest_id(api_url, f"{topic}-value")
    for offset in answer["offsets"]:
        assert set(offset) == {"partition", "offset", "error_code", "error"}
        assert isinstance(offset["partition"], int) and isinstance(offset["offset"], int)
        assert offset["error_code"] is None and offset["error"] is None

    again = _produce(
        api_url,
        key,
        topic,
        {"value_schema_id": answer["value_schema_id"], "records": [{"value": _trip(2)}]},
        content_type=f"{AVRO}; charset=utf-8",
    )
    assert again.status_code == 200, again.text
    assert again.json()["value_schema_id"] == answer["value_schema_id"]
    made = again.headers["X-Request-Id"]  # none given: the API made one
    assert made and made != "trips-import-7"

    received = read_avro(api_url, kafka_bootstrap, topic, expected=3)
    assert sorted(received, key=lambda kv: kv[1]["vehicle"]) == [
        ("v0", _decoded(0)),
        (None, _decoded(1, driver="ann")),
        (None, _decoded(2)),
    ]
    # Each record carries its request's id, as records of the feed route do (lineage).
    stored = read_all(kafka_bootstrap, topic, expected=3)
    ids = {(m.partition(), m.offset()): dict(m.headers() or [])["hub.request-id"] for m in stored}
    first_positions = {(o["partition"], o["offset"]) for o in answer["offsets"]}
    assert {ids[p] for p in first_positions} == {b"trips-import-7"}
    assert {ids[p] for p in set(ids) - first_positions} == {made.encode()}


def test_a_new_value_schema_is_registered_and_each_request_uses_the_version_it_names(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    v1 = _latest_id(api_url, f"{topic}-value")
    evolved = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "km", "type": "int", "default": 0}]}
    registered = _produce(
        api_url,
        key,
        topic,
        {"value_schema": json.dumps(evolved), "records": [{"value": {**_trip(0), "km": 12}}]},
    )
    assert registered.status_code == 200, registered.text
    v2 = registered.json()["value_schema_id"]
    assert v2 != v1
    assert httpx.get(f"{api_url}/subjects/{topic}-value/versions").json() == [1, 2]

    pinned = _produce(
        api_url, key, topic, {"value_schema_id": v1, "records": [{"value": _trip(1)}]}
    )
    assert pinned.status_code == 200, pinned.text
    assert pinned.json()["value_schema_id"] == v1

    written = [unframe(m.value())[0] for m in read_all(kafka_bootstrap, topic, expected=2)]
    assert sorted(written) == sorted([v1, v2])


def test_an_incompatible_value_schema_is_refused_and_not_registered(
    api_url: str, key: str, topic: str
) -> None:
    breaking = {**SCHEMA, "fields": [*SCHEMA["fields"], {"name": "km", "type": "int"}]}
    response = _produce(
        api_url, key, topic, {"value_schema": json.dumps(breaking), "records": [{"value": {}}]}
    )
    assert response.status_code == 422
    assert response.headers["content-type"] == KAFKA_V2
    body = response.json()
    assert body["error_code"] == 42207
    assert "incompatible" in body["message"] and "40901" in body["message"]
    assert httpx.get(f"{api_url}/subjects/{topic}-value/versions").json() == [1]


def test_invalid_records_are_answered_per_record_and_valid_ones_still_publish(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    records = [
        {"value": _trip(0)},
        {"value": {**_trip(1), "fare": 12.51}},  # a decimal must come as bytes
        {"value": {**_trip(2), "driver": "bob"}},  # a union value must name its branch
        {"value": {**_trip(3), "kind": "BUS"}},  # refused by the hub's own validation
        {"value": _trip(4)},
    ]
    response = _produce(
        api_url, key, topic, {"value_schema": json.dumps(SCHEMA), "records": records}
    )
    assert response.status_code == 200, response.text
    offsets = response.json()["offsets"]
    assert [o["error_code"] for o in offsets] == [None, 42220, 42220, 42220, None]
    assert offsets[1]["error"].startswith("$.fare:")
    assert offsets[2]["error"].startswith("$.driver:")
    assert "valid symbols: CAR, VAN" in offsets[3]["error"]
    assert all(o["partition"] is None and o["offset"] is None for o in offsets[1:4])
    assert len(read_all(kafka_bootstrap, topic, expected=2, timeout_s=5)) == 2


def test_a_request_whose_records_are_all_invalid_is_a_422_with_each_reason(
    api_url: str, key: str, topic: str
) -> None:
    response = _produce(
        api_url,
        key,
        topic,
        {"value_schema": json.dumps(SCHEMA), "records": [{"value": {"vehicle": 1}}]},
    )
    assert response.status_code == 422
    body = response.json()
    assert body["error_code"] == 42203
    assert "$.vehicle" in body["message"]
    assert body["offsets"][0]["error_code"] == 42220


def test_keyed_feeds_take_avro_json_keys_and_tombstones(
    api_url: str, kafka_bootstrap: str, key: str
) -> None:
    topic = unique_topic("fleet")
    create_feed(
        api_url, key, topic=topic, schema=SCHEMA, owner=TEAM, kind="changelog",
        key_fields=["vehicle"],
    )  # fmt: skip
    key_id = _latest_id(api_url, f"{topic}-key")
    response = _produce(
        api_url,
        key,
        topic,
        {
            "value_schema": json.dumps(SCHEMA),
            "records": [{"key": {"vehicle": "v0"}, "value": _trip(0)}, {"value": _trip(1)}],
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["key_schema_id"] == key_id

    tombstone = _produce(
        api_url,
        key,
        topic,
        {"key_schema_id": key_id, "records": [{"key": {"vehicle": "v0"}, "value": None}]},
    )
    assert tombstone.status_code == 200, tombstone.text
    assert tombstone.json()["value_schema_id"] is None

    registry = SchemaRegistryClient({"url": api_url})
    received = read_avro(
        api_url, kafka_bootstrap, topic, expected=3, key_deserializer=AvroDeserializer(registry)
    )
    assert sorted(received, key=lambda kv: (kv[0]["vehicle"], kv[1] is None)) == [
        ({"vehicle": "v0"}, _decoded(0)),
        ({"vehicle": "v0"}, None),
        ({"vehicle": "v1"}, _decoded(1)),
    ]

    wrong_key = _produce(
        api_url,
        key,
        topic,
        {
            "key_schema_id": key_id + 1000,
            "value_schema_id": response.json()["value_schema_id"],
            "records": [{"value": _trip(0)}],
        },
    )
    assert wrong_key.status_code == 422
    assert wrong_key.json()["error_code"] == 42207
    assert f"key_schema_id {key_id}" in wrong_key.json()["message"]


def test_a_topic_that_is_no_feed_is_a_40401(api_url: str, key: str) -> None:
    response = _produce(
        api_url, key, "fleet.no_such_feed", {"value_schema_id": 1, "records": [{"value": {}}]}
    )
    assert response.status_code == 404
    assert response.headers["content-type"] == KAFKA_V2
    assert response.json()["error_code"] == 40401
    assert "fleet.no_such_feed" in response.json()["message"]


def test_only_the_owning_team_or_an_admin_may_produce(
    api_url: str, key: str, team_key: Callable[[str], str], admin_key: str, topic: str
) -> None:
    body = {"value_schema": json.dumps(SCHEMA), "records": [{"value": _trip(0)}]}
    anonymous = _produce(api_url, None, topic, body)
    assert anonymous.status_code == 401
    assert anonymous.json()["error_code"] == 40101
    assert anonymous.headers["WWW-Authenticate"].startswith("Bearer")
    assert _produce(api_url, "hub_0000_not-a-key", topic, body).status_code == 401

    other = _produce(api_url, team_key("someone_else"), topic, body)
    assert other.status_code == 403
    assert other.json()["error_code"] == 40301
    assert _produce(api_url, admin_key, topic, body).status_code == 200


@pytest.mark.parametrize(
    "content_type",
    [
        "application/vnd.kafka.json.v2+json",
        "application/vnd.kafka.binary.v2+json",
        "application/vnd.kafka.avro.v1+json",
        "application/json",
        f"{AVRO}; charset=iso-8859-1",
    ],
)
def test_other_content_types_are_a_415(
    api_url: str, key: str, topic: str, content_type: str
) -> None:
    body = {"value_schema": json.dumps(SCHEMA), "records": [{"value": _trip(0)}]}
    response = _produce(api_url, key, topic, body, content_type=content_type)
    assert response.status_code == 415
    assert response.json()["error_code"] == 41501
    assert AVRO in response.json()["message"]


ID = "<the feed's value schema id>"


@pytest.mark.parametrize(
    ("body", "status", "code", "fragment"),
    [
        ({"value_schema_id": ID, "records": [{"value": {}, "partition": 0}]}, 422, 42200, "key"),
        ({"records": [{"value": {}}]}, 422, 42202, "value_schema_id"),
        ({"value_schema": "{not json", "records": [{"value": {}}]}, 422, 42205, "Invalid schema"),
        ({"value_schema_id": 999_999, "records": [{"value": {}}]}, 422, 42207, "not a version"),
        ({"key_schema_id": ID, "value_schema_id": ID, "records": [{"value": {}}]}, 422, 42207,
         "no key fields"),
        ({"value_schema": "\"int\"", "value_schema_id": ID, "records": [{"value": 1}]}, 400, 40001,
         "not both"),
        ({"value_schema_id": ID, "records": []}, 400, 40001, "records"),
        ("not json", 400, 40001, "Malformed JSON"),
    ],
)  # fmt: skip
def test_bad_requests_get_a_rest_proxy_style_error(
    api_url: str, key: str, topic: str, body: Any, status: int, code: int, fragment: str
) -> None:
    if isinstance(body, dict):
        value_id = _latest_id(api_url, f"{topic}-value")
        body = {k: value_id if v == ID else v for k, v in body.items()}
    response = _produce(api_url, key, topic, body)
    assert response.status_code == status, response.text
    assert response.json()["error_code"] == code
    assert fragment in response.json()["message"]


@pytest.fixture(scope="module")
def api_without_kafka(api_url: str, api_database: str) -> Iterator[str]:
    """A second API server on the session's database whose Kafka cannot be reached."""
    with serve_api(
        database_url=api_database,
        bootstrap_servers=f"127.0.0.1:{free_port()}",
        delivery_timeout_ms=1_500,
    ) as url:
        yield url


def test_records_kafka_did_not_take_are_answered_with_the_retriable_code(
    api_url: str, api_without_kafka: str, key: str, topic: str
) -> None:
    value_id = _latest_id(api_url, f"{topic}-value")
    response = _produce(
        api_without_kafka,
        key,
        topic,
        {"value_schema_id": value_id, "records": [{"value": _trip(0)}]},
    )
    assert response.status_code == 200, response.text
    (offset,) = response.json()["offsets"]
    assert offset["partition"] is None and offset["offset"] is None
    assert offset["error_code"] == 2
    assert "Kafka did not acknowledge" in offset["error"]


# -- v3: records streamed in one request, delivery reports streamed back --------------------


def _v3_url(api_url: str, topic: str) -> str:
    return f"{api_url}/v3/clusters/hub-cluster/topics/{topic}/records"


def _v3_record(n: int, **value: Any) -> dict[str, Any]:
    """A v3 ProduceRequest: the value in natural JSON, as the feed route takes it."""
    trip = {"vehicle": f"v{n}", "kind": "CAR", "started_at": STARTED_AT + n,
            "fare": f"{12 + n}.50", "driver": None, **value}  # fmt: skip
    return {"key": {"type": "JSON", "data": "trip"}, "value": {"type": "JSON", "data": trip}}


def test_a_v3_stream_is_answered_per_record_in_order_and_a_bad_record_is_dead_lettered(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    records = [_v3_record(n) for n in range(5)]
    records[2] = _v3_record(2, kind="BUS")  # refused by the schema, mid-stream
    text = "".join(json.dumps(r) + ("\n" if n % 2 else "") for n, r in enumerate(records))
    # Chunks cut across records, then text that is not JSON: it ends the stream.
    chunks = [text[:30], text[30:170], text[170:], '{"value": {"data": nope}}']

    response = httpx.post(
        _v3_url(api_url, topic),
        content=(chunk.encode() for chunk in chunks),  # chunked transfer encoding
        headers={**bearer(key), "Content-Type": "application/json"},
        timeout=60,
    )

    assert response.status_code == 200, response.text
    reports = [json.loads(line) for line in response.text.splitlines()]
    assert [r["error_code"] for r in reports] == [200, 200, 42220, 200, 200, 40001]
    assert "valid symbols: CAR, VAN" in reports[2]["message"]
    assert f"'{topic}.dlq'" in reports[2]["message"]
    assert "Malformed JSON stream" in reports[5]["message"]
    published = [reports[n] for n in (0, 1, 3, 4)]
    assert {(r["cluster_id"], r["topic_name"]) for r in published} == {("hub-cluster", topic)}
    assert len({r["partition_id"] for r in published}) == 1  # one key: one partition
    offsets = [r["offset"] for r in published]
    assert offsets == sorted(offsets)
    assert published[0]["value"]["subject"] == f"{topic}-value"
    assert published[0]["value"]["schema_version"] == 1
    assert published[0]["timestamp"].endswith("Z")

    stored = read_all(kafka_bootstrap, topic, expected=4)
    stored.sort(key=lambda m: m.offset())
    assert [m.offset() for m in stored] == offsets
    assert [unframe(m.value())[1][1:3] for m in stored] == [b"v0", b"v1", b"v3", b"v4"]
    # The stream is one HTTP request: its records share the id the answer names.
    request_id = response.headers["X-Request-Id"].encode()
    assert {dict(m.headers() or [])["hub.request-id"] for m in stored} == {request_id}
    (letter,) = read_all(kafka_bootstrap, f"{topic}.dlq", expected=1)
    assert json.loads(letter.value())["value"]["kind"] == "BUS"
    assert dict(letter.headers())["hub.error.code"] == b"42220"


def test_v3_produce_needs_the_owning_teams_key_and_a_feed(
    api_url: str, key: str, team_key: Callable[[str], str], topic: str
) -> None:
    body = json.dumps(_v3_record(0))
    json_type = {"Content-Type": "application/json"}

    anonymous = httpx.post(_v3_url(api_url, topic), content=body, headers=json_type)
    assert anonymous.status_code == 401
    assert anonymous.json()["error_code"] == 40101

    other = httpx.post(
        _v3_url(api_url, topic), content=body, headers={**bearer(team_key("other")), **json_type}
    )
    assert other.status_code == 403
    assert other.json()["error_code"] == 40301

    missing = httpx.post(
        _v3_url(api_url, "fleet.no_such_feed"), content=body, headers={**bearer(key), **json_type}
    )
    assert missing.status_code == 404
    assert missing.json()["error_code"] == 40403
    assert "fleet.no_such_feed" in missing.json()["message"]

    one = httpx.post(_v3_url(api_url, topic), content=body, headers={**bearer(key), **json_type})
    assert one.status_code == 200
    assert one.json()["error_code"] == 200  # one record, one report
