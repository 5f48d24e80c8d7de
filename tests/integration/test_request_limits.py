"""Every request costs bounded time and memory: keys are checked before bodies are read, write
requests and the producer queue are bounded (503 with Retry-After), and each API key and team
is held to its rate and quotas without touching the others."""

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_key, unique_topic

pytestmark = pytest.mark.integration

NOTE = {
    "type": "record",
    "name": "Note",
    "namespace": "limits",
    "fields": [{"name": "id", "type": "string"}, {"name": "text", "type": "string"}],
}
RATE_BURST = 5


class Hub:
    """An API server of this module's own, with small limits, and its database for keys."""

    def __init__(self, url: str, database: str) -> None:
        self.url = url
        self.database = database

    def key(self, team: str | None) -> str:
        return create_key(self.database, team=team)


@pytest.fixture(scope="module")
def hub(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database = f"sqlite:///{tmp_path_factory.mktemp('limits') / 'hub.db'}"
    with serve_api(
        database_url=database,
        bootstrap_servers=kafka_bootstrap,
        api={
            "max_concurrent_requests": 1,
            "rate_limit_per_second": 0.01,  # a key's burst is all it gets in this module
            "rate_limit_burst": RATE_BURST,
            "quota_feeds_per_team": 1,
            "quota_partitions_per_feed": 2,
        },
        # A record of more than 1 KiB never fits the producer's queue.
        kafka={"producer_queue_max_kbytes": 1, "producer_queue_wait_ms": 300},
    ) as url:
        yield Hub(url, database)


def _raw_post(
    url: str, path: str, *, headers: dict[str, str], declared_length: int, body: bytes
) -> tuple[int, dict[str, str], bytes]:
    """POST with a `Content-Length` of `declared_length` but only `body` sent, and read the
    answer. A server that waited for the rest of the body would never answer (the socket's
    timeout then fails the test)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: {parts.netloc}",
        "Content-Type: application/json",
        f"Content-Length: {declared_length}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        return _read_answer(sock)


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection without an answer"
        data += chunk
    head, _, content = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    answer_headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(content) < int(answer_headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        content += chunk
    return int(status_line.split()[1]), answer_headers, content


def _create_feed(hub: Hub, key: str, owner: str, **fields: Any) -> httpx.Response:
    return httpx.post(
        f"{hub.url}/v1/feeds",
        headers=bearer(key),
        json={
            "topic": unique_topic(owner),
            "owner": owner,
            "kind": "event",
            "value_schema": json.dumps(NOTE),
            **fields,
        },
        timeout=60,
    )


# Keys before bodies


def test_a_write_without_a_key_is_refused_before_its_body_is_read(hub: Hub) -> None:
    status, headers, content = _raw_post(
        hub.url, "/v1/feeds", headers={}, declared_length=100_000, body=b'{"topic": "sal'
    )

    assert status == 401
    assert json.loads(content)["error_code"] == 40101
    assert headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_key_with_an_oversize_body_gets_401_not_413(hub: Hub) -> None:
    status, _headers, content = _raw_post(
        hub.url,
        "/subjects/limits.notes-value/versions",
        headers=bearer("not-a-key"),
        declared_length=10**9,  # over HUB_API_MAX_BODY_BYTES: 413 if the key came second
        body=b"{",
    )

    assert status == 401
    assert json.loads(content)["error_code"] == 40101


def test_another_teams_key_on_a_subject_is_refused_before_the_body_is_read(hub: Hub) -> None:
    key = hub.key("limits_a")

    status, _headers, content = _raw_post(
        hub.url,
        "/subjects/limits_b.notes-value/versions",
        headers=bearer(key),
        declared_length=50_000,
        body=b'{"schema": "',
    )

    assert status == 403
    assert json.loads(content)["error_code"] == 40301


def test_public_reads_sent_as_post_still_need_no_key(hub: Hub) -> None:
    response = httpx.post(
        f"{hub.url}/subjects/limits.nothing-value", json={"schema": '"string"'}, timeout=30
    )

    assert response.status_code == 404, response.text
    assert response.json()["error_code"] == 40401


# Bounded concurrency: a write beyond the limit (503, 50304) is tested where a request whose
# body has arrived holds the slot, tests/security/test_request_bodies.py; a client that sends its
# body slowly holds none.


# Bounded producer queue


def test_records_the_full_producer_queue_could_not_take_are_answered_503_and_never_written(
    hub: Hub,
) -> None:
    key = hub.key("limits_queue")
    topic = _create_feed(hub, key, "limits_queue").json()["topic"]
    url = f"{hub.url}/v1/feeds/{topic}/records"
    big = {"value": {"id": "big", "text": "x" * 3000}}
    mixed_records = [
        {"value": {"id": "a", "text": "small"}},
        big,
        {"value": {"id": "c", "text": "c"}},
    ]

    only_big = httpx.post(url, headers=bearer(key), json={"records": [big, big]}, timeout=60)
    mixed = httpx.post(
        url,
        headers={**bearer(key), "Idempotency-Key": "queue-1"},
        json={"records": mixed_records},
        timeout=60,
    )
    again = httpx.post(
        url,
        headers={**bearer(key), "Idempotency-Key": "queue-1"},
        json={"records": mixed_records},
        timeout=60,
    )

    assert only_big.status_code == 503, only_big.text
    assert only_big.headers["Retry-After"]
    assert {r["error_code"] for r in only_big.json()["results"]} == {50305}
    assert mixed.status_code == 207, mixed.text
    assert mixed.headers["Retry-After"]
    first, *unsent = mixed.json()["results"]
    assert first["offset"] is not None
    assert [r["error_code"] for r in unsent] == [50305, 50305]  # order kept: none overtakes
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == mixed.json()
    described = httpx.get(f"{hub.url}/v1/feeds/{topic}", timeout=30).json()
    assert sum(described["end_offsets"].values()) == 1  # one record, written once


# Rate limits per key


def test_a_key_over_its_rate_gets_429_and_other_keys_are_unaffected(hub: Hub) -> None:
    hasty, calm, admin = hub.key("limits_rate_a"), hub.key("limits_rate_b"), hub.key(None)

    answers = [
        httpx.get(f"{hub.url}/v1/feeds", headers=bearer(hasty), timeout=30)
        for _ in range(RATE_BURST + 1)
    ]
    calm_answer = httpx.get(f"{hub.url}/v1/feeds", headers=bearer(calm), timeout=30)
    admin_answers = [
        httpx.get(f"{hub.url}/v1/feeds", headers=bearer(admin), timeout=30)
        for _ in range(RATE_BURST + 1)
    ]

    assert [a.status_code for a in answers] == [200] * RATE_BURST + [429]
    assert answers[-1].json()["error_code"] == 42901
    assert int(answers[-1].headers["Retry-After"]) >= 1
    assert calm_answer.status_code == 200
    assert [a.status_code for a in admin_answers] == [200] * (RATE_BURST + 1)  # admins exempt


# Quotas per team


def test_a_team_over_its_feed_quota_gets_422_and_another_team_still_creates(hub: Hub) -> None:
    full, other = hub.key("limits_quota_a"), hub.key("limits_quota_b")

    first = _create_feed(hub, full, "limits_quota_a")
    second = _create_feed(hub, full, "limits_quota_a")
    others = _create_feed(hub, other, "limits_quota_b")

    assert first.status_code == 201, first.text
    assert second.status_code == 422, second.text
    assert second.json()["error_code"] == 42229
    assert "HUB_API_QUOTA_FEEDS_PER_TEAM" in second.json()["message"]
    assert others.status_code == 201, others.text


def test_a_feed_over_the_partition_quota_gets_422_and_nothing_is_created(hub: Hub) -> None:
    key = hub.key("limits_parts")

    too_many = _create_feed(hub, key, "limits_parts", partitions=3)
    allowed = _create_feed(hub, key, "limits_parts", partitions=2)

    assert too_many.status_code == 422, too_many.text
    assert too_many.json()["error_code"] == 42230
    assert allowed.status_code == 201, allowed.text  # the refused one took no quota
