"""Every bad input gets a coded 4xx through the real API, never a 5xx (real Kafka, real server)."""

import json
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import pytest

from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.kafka import read_all

pytestmark = pytest.mark.integration

TEAM = "ledger"
REGISTRY = "application/vnd.schemaregistry.v1+json"
AVRO = "application/vnd.kafka.avro.v2+json"
SCHEMA = {
    "type": "record",
    "name": "Entry",
    "namespace": "ledger",
    "fields": [
        {"name": "account", "type": "string"},
        {"name": "count", "type": "int"},
        {
            "name": "amount",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 10},
        },
        {"name": "booked_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "seen_at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "note", "type": "string", "default": ""},
    ],
}
INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def key(team_key: Callable[[str], str]) -> str:
    return team_key(TEAM)


@pytest.fixture
def topic(api_url: str, key: str) -> str:
    name = unique_topic("ledger")
    create_feed(api_url, key, topic=name, schema=SCHEMA, owner=TEAM)
    return name


def _entry(**changes: Any) -> dict[str, Any]:
    return {
        "account": "a1",
        "count": 1,
        "amount": "12.50",
        "booked_at": "2024-05-01T12:00:00Z",
        "seen_at": "2024-05-01T12:00:00Z",
        **changes,
    }


def _assert_one_bad_among_good(
    response: httpx.Response, *, bad: int, code: int, path: str | None = None
) -> dict[str, Any]:
    """The batch got 207: record `bad` refused with `code` (at `path`), the others accepted."""
    assert response.status_code == 207, response.text
    results = response.json()["results"]
    for position, result in enumerate(results):
        if position == bad:
            assert result["error_code"] == code, result
            if path is not None:
                assert result["path"] == path, result
        else:
            assert result.get("error_code") is None and result["offset"] is not None, result
    refused: dict[str, Any] = results[bad]
    return refused


def test_a_deeply_nested_publish_body_is_a_coded_400_not_a_500(
    api_url: str, key: str, topic: str
) -> None:
    body = b'{"records": [{"value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}]}"
    response = httpx.post(
        f"{api_url}/v1/feeds/{topic}/records",
        headers={**bearer(key), "Content-Type": "application/json"},
        content=body,
        timeout=30,
    )
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == 40001
    assert "HUB_API_MAX_JSON_DEPTH" in response.json()["message"]


def test_a_deeply_nested_unbalanced_body_is_a_coded_400(api_url: str, key: str, topic: str) -> None:
    response = httpx.post(
        f"{api_url}/v1/feeds/{topic}/records",
        headers={**bearer(key), "Content-Type": "application/json"},
        content=b"[" * 100_000,
        timeout=30,
    )
    assert response.status_code == 400, response.text
    assert response.json()["error_code"] == 40001


def test_deeply_nested_registry_and_rest_proxy_bodies_are_coded_400s(
    api_url: str, admin_key: str, key: str, topic: str
) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    registry = httpx.post(
        f"{api_url}/subjects/ledger.deep-value/versions",
        headers={**bearer(admin_key), "Content-Type": REGISTRY},
        content=b'{"schema": "\\"string\\"", "references": ' + nested + b"}",
        timeout=30,
    )
    assert registry.status_code == 400, registry.text
    assert registry.json()["error_code"] == 40001

    proxy = httpx.post(
        f"{api_url}/topics/{topic}",
        headers={**bearer(key), "Content-Type": AVRO},
        content=b'{"records": [{"value": ' + nested + b"}]}",
        timeout=30,
    )
    assert proxy.status_code == 400, proxy.text
    assert proxy.json()["error_code"] == 40001


def test_a_decimal_38_10_with_20_integer_digits_publishes_and_one_past_precision_is_a_422(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    records = [
        {"value": _entry(amount="12345678901234567890.0123456789")},
        {"value": _entry(amount="1" * 29 + ".5")},  # 29 integer digits: 38 - 10 allows 28
        {"value": _entry(amount="-" + "9" * 28 + ".9999999999")},
    ]
    refused = _assert_one_bad_among_good(
        publish(api_url, key, topic, records), bad=1, code=42220, path="$.amount"
    )
    assert "28" in refused["message"]
    assert len(read_all(kafka_bootstrap, topic, expected=2, timeout_s=10)) == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("booked_at", 2**63),
        ("seen_at", 2**64 + 5),
        ("booked_at", -(2**63) - 1),
        ("count", 2**31),
        ("count", -(2**31) - 1),
        ("booked_at", 10**400),
    ],
)
def test_numbers_beyond_their_avro_range_are_422_at_the_field(
    api_url: str, key: str, topic: str, field: str, value: int
) -> None:
    records = [{"value": _entry()}, {"value": _entry(**{field: value})}]
    _assert_one_bad_among_good(
        publish(api_url, key, topic, records), bad=1, code=42220, path=f"$.{field}"
    )


@pytest.mark.parametrize("timestamp", [2**63, 2**64, -5, "1969-12-31T23:59:59Z"])
def test_a_record_timestamp_kafka_cannot_hold_is_a_422(
    api_url: str, kafka_bootstrap: str, key: str, topic: str, timestamp: Any
) -> None:
    records = [
        {"value": _entry(), "timestamp": 1714564800000},
        {"value": _entry(), "timestamp": timestamp},
    ]
    response = publish(api_url, key, topic, records)
    _assert_one_bad_among_good(response, bad=1, code=42220, path="$.timestamp")


def test_a_record_larger_than_kafka_accepts_is_refused_before_producing(
    api_url: str, kafka_bootstrap: str, key: str, topic: str
) -> None:
    records = [
        {"value": _entry(note="small")},
        {"value": _entry(note="x" * 1_100_000)},
        {"value": _entry(note="small too")},
    ]
    refused = _assert_one_bad_among_good(publish(api_url, key, topic, records), bad=1, code=41302)
    assert "HUB_KAFKA_MAX_RECORD_BYTES" in refused["message"]
    stored = read_all(kafka_bootstrap, topic, expected=3, timeout_s=10)
    assert len(stored) == 2
    assert all(len(m.value()) < 1000 for m in stored)


def test_a_record_with_large_headers_and_key_counts_them_in_its_size(
    api_url: str, key: str, topic: str
) -> None:
    records = [
        {"value": _entry()},
        {"value": _entry(), "key": "k" * 600_000, "headers": {"h": "v" * 600_000}},
    ]
    _assert_one_bad_among_good(publish(api_url, key, topic, records), bad=1, code=41302)


@pytest.mark.parametrize(
    "path",
    [
        "/schemas/ids/99999999999",
        "/schemas/ids/99999999999/schema",
        "/schemas/ids/99999999999/subjects",
        "/schemas/ids/99999999999/versions",
        "/schemas/ids/-1",
    ],
)
def test_a_schema_id_beyond_int32_is_not_found(api_url: str, path: str) -> None:
    response = httpx.get(f"{api_url}{path}", timeout=30)
    assert response.status_code == 404, response.text
    assert response.json()["error_code"] == 40403


def test_a_rest_proxy_value_schema_id_beyond_int32_is_a_coded_4xx(
    api_url: str, key: str, topic: str
) -> None:
    response = httpx.post(
        f"{api_url}/topics/{topic}",
        headers={**bearer(key), "Content-Type": AVRO},
        json={"value_schema_id": 99999999999, "records": [{"value": {"account": "a"}}]},
        timeout=30,
    )
    assert 400 <= response.status_code < 500, response.text
    # The REST Proxy's "schema not usable" (42207): no version of `<topic>-value` has that id.
    assert response.json()["error_code"] == 42207


def test_a_registration_id_beyond_int32_is_a_422_whatever_the_mode(
    api_url: str, admin_key: str
) -> None:
    def register(**explicit: int) -> httpx.Response:
        return httpx.post(
            f"{api_url}/subjects/ledger.import-value/versions",
            headers={**bearer(admin_key), "Content-Type": REGISTRY},
            json={"schema": '"string"', **explicit},
            timeout=30,
        )

    beyond = register(id=99999999999, version=2**63)
    assert beyond.status_code == 422, beyond.text
    assert beyond.json()["error_code"] == 42228  # outside the ids a client can hold
    in_range = register(id=5)
    assert in_range.status_code == 422, in_range.text
    assert in_range.json()["error_code"] == 42205  # explicit ids only in IMPORT mode


@pytest.mark.parametrize("version", [2**63, 2**31, 10**30])
def test_a_reference_version_beyond_range_in_a_compatibility_check_is_a_422(
    api_url: str, admin_key: str, version: int
) -> None:
    response = httpx.post(
        f"{api_url}/compatibility/subjects/ledger.refs-value/versions/latest",
        headers={**bearer(admin_key), "Content-Type": REGISTRY},
        json={
            "schema": '"string"',
            "references": [{"name": "x.Y", "subject": "x-value", "version": version}],
        },
        timeout=30,
    )
    assert response.status_code == 422, response.text
    assert response.json()["error_code"] == 42202


def test_a_chunked_body_over_the_limit_is_413_with_the_payload_code(
    api_url: str, key: str, topic: str
) -> None:
    chunk = b" " * 1024 * 1024

    def body() -> Any:
        yield b'{"records": ['
        for _ in range(17):  # 17 MiB, past the 16 MiB default
            yield chunk
        yield b"]}"

    response = httpx.post(
        f"{api_url}/v1/feeds/{topic}/records",
        headers={**bearer(key), "Content-Type": "application/json"},
        content=body(),
        timeout=60,
    )
    assert "content-length" not in {k.lower() for k in response.request.headers}
    assert response.status_code == 413, response.text
    assert response.json()["error_code"] == 41301


def test_a_chunked_registry_body_over_the_limit_is_413(api_url: str, admin_key: str) -> None:
    url = urlsplit(api_url)
    with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80)) as conn:
        conn.sendall(
            b"POST /subjects/ledger.chunked-value/versions HTTP/1.1\r\n"
            + f"Host: {url.netloc}\r\n".encode()
            + f"Authorization: Bearer {admin_key}\r\n".encode()
            + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        piece = b" " * (1024 * 1024)
        try:
            for _ in range(17):
                conn.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may answer and close before the whole body is sent
        conn.settimeout(30)
        answer = b""
        while b"}" not in answer:
            piece = conn.recv(65536)
            if not piece:
                break
            answer += piece
    text = answer.decode("latin-1")
    status_line, _, rest = text.partition("\r\n")
    assert " 413 " in status_line, text[:500]
    assert '"error_code":41301' in rest.replace(" ", "")


@pytest.mark.parametrize(
    "topic_name",
    ["ledger.nul\x00name", "ledger." + "n" * 300, "ledger.bad\x01name", "ledger.x%00y"],
)
def test_nul_and_over_long_topic_names_are_coded_4xx(
    api_url: str, key: str, topic_name: str
) -> None:
    created = httpx.post(
        f"{api_url}/v1/feeds",
        headers=bearer(key),
        json={"topic": topic_name, "owner": TEAM, "kind": "event",
              "value_schema": json.dumps(SCHEMA)},
        timeout=30,
    )  # fmt: skip
    assert 400 <= created.status_code < 500, created.text
    assert created.json()["error_code"] in (40001, 42222)

    published = httpx.post(
        f"{api_url}/v1/feeds/{quote(topic_name, safe='')}/records",
        headers=bearer(key),
        json={"records": [{"value": _entry()}]},
        timeout=30,
    )
    assert 400 <= published.status_code < 500, published.text
    assert published.json()["error_code"] in (40001, 40420, 42222)


@pytest.mark.parametrize(
    "headers",
    [{"bad\x00name": "v"}, {"h": "nul\x00value"}, {"h" * 300: "v"}],
)
def test_nul_and_over_long_record_headers_are_422_and_the_batch_goes_on(
    api_url: str, key: str, topic: str, headers: dict[str, str]
) -> None:
    records = [{"value": _entry()}, {"value": _entry(), "headers": headers}]
    _assert_one_bad_among_good(
        publish(api_url, key, topic, records), bad=1, code=42220, path="$.headers"
    )
