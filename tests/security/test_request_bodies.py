"""Slow, large and unread requests against `hub api serve`: a head or a body that stalls or
trickles is answered 408 and its connection closed, a head without end 431; slow senders, with
or without a key, hold no write slot, so a team's publishes go on; and an answer given before
the body was read (401, 413) reaches clients that send their whole body before reading (urllib,
requests)."""

import json
import select
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import requests

from tests.security.conftest import ORDER, Hub, running_hub
from tests.support.hub_client import bearer
from tests.support.waiting import wait_until

pytestmark = pytest.mark.security

MIB = 1024 * 1024
MAX_BODY = 1 * MIB  # the quick hub's HUB_API_MAX_BODY_BYTES
REGISTER_BODY = json.dumps({"schema": json.dumps(ORDER), "pad": "x" * (4_500_000)}).encode()


@pytest.fixture(scope="module")
def stalled_loader() -> Iterator[socket.socket]:
    """A "loader" that takes connections and never answers: a replay waits on it, in its slot."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server


@pytest.fixture(scope="module")
def quick(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory, stalled_loader: socket.socket
) -> Iterator[Hub]:
    """A hub with short time limits, 8 KiB heads, 1 MiB bodies and a single write slot."""
    home = tmp_path_factory.mktemp("bodies_quick")
    with running_hub(
        database_url=f"sqlite:///{home / 'hub.db'}",
        bootstrap=kafka_bootstrap,
        teams=("bodies_a",),
        process_home=home,
        header_timeout_seconds=2,
        max_header_bytes=8192,
        body_idle_timeout_seconds=2,
        body_timeout_seconds=6,
        max_body_bytes=MAX_BODY,
        max_concurrent_requests=1,
        loader_url=f"http://127.0.0.1:{stalled_loader.getsockname()[1]}",
        loader_token="not-the-loaders-token",
        loader_replay_timeout_seconds=120,
    ) as hub:
        yield hub


@pytest.fixture(scope="module")
def patient(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """A hub with the default limits: 64 write slots, bodies may pause for 30 s."""
    home: Path = tmp_path_factory.mktemp("bodies_patient")
    with running_hub(
        database_url=f"sqlite:///{home / 'hub.db'}",
        bootstrap=kafka_bootstrap,
        teams=("bodies_b",),
        process_home=home,
    ) as hub:
        yield hub


def _connect(hub: Hub) -> socket.socket:
    parts = urlsplit(hub.url)
    assert parts.hostname is not None and parts.port is not None
    return socket.create_connection((parts.hostname, parts.port), timeout=60)


def _head(hub: Hub, path: str, length: int, **headers: str) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: {urlsplit(hub.url).netloc}",
        f"Content-Length: {length}",
        *(f"{name.replace('_', '-')}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _answer(sock: socket.socket) -> tuple[int, dict[str, str], dict[str, Any], bytes]:
    """Status, headers and JSON body of the answer; then what follows it until the server
    closes the connection (b"" for a clean close)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, "the server closed the connection without an answer"
        data += chunk
    head, _, content = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    while len(content) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk, "the answer was cut short"
        content += chunk
    length = int(headers["content-length"])
    rest = content[length:]
    while chunk := sock.recv(65536):
        rest += chunk
    return int(status_line.split()[1]), headers, json.loads(content[:length]), rest


def _unanswered(sock: socket.socket) -> bool:
    """Whether the connection is open with nothing to read: no answer yet."""
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


# Slow and large heads


def test_a_head_that_trickles_gets_408_and_its_connection_closed(quick: Hub) -> None:
    with closing(_connect(quick)) as sock:
        sock.sendall(f"POST /v1/feeds HTTP/1.1\r\nHost: {urlsplit(quick.url).netloc}\r\n".encode())
        for number in range(600):  # a header every 0.1 s: the head never ends
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                break
            sock.sendall(f"X-Slow-{number}: 1\r\n".encode())

        status, headers, body, rest = _answer(sock)

    assert status == 408
    assert body["error_code"] == 40801
    assert "HUB_API_HEADER_TIMEOUT_SECONDS" in body["message"]
    assert headers["connection"] == "close"
    assert rest == b""


def test_a_connection_that_sends_nothing_is_closed(quick: Hub) -> None:
    with closing(_connect(quick)) as sock:
        assert sock.recv(1) == b""  # closed by the server, without an answer


def test_a_head_over_the_header_bytes_gets_431_and_its_connection_closed(quick: Hub) -> None:
    with closing(_connect(quick)) as sock:
        head = f"GET /v1/feeds HTTP/1.1\r\nHost: {urlsplit(quick.url).netloc}\r\nX-Big: "
        sock.sendall(head.encode() + b"a" * 16384)  # and no end to it

        status, headers, body, rest = _answer(sock)

    assert status == 431
    assert body["error_code"] == 43101
    assert "HUB_API_MAX_HEADER_BYTES" in body["message"]
    assert headers["connection"] == "close"
    assert rest == b""


# Slow bodies


def test_a_body_that_stalls_gets_408_and_its_connection_closed(quick: Hub) -> None:
    with closing(_connect(quick)) as sock:
        sock.sendall(_head(quick, "/subjects/bodies_a.slow-value", 1000) + b'{"schema": "')

        status, headers, body, rest = _answer(sock)

    assert status == 408
    assert body["error_code"] == 40801
    assert "HUB_API_BODY_IDLE_TIMEOUT_SECONDS" in body["message"]
    assert headers["connection"] == "close"
    assert rest == b""  # closed by the server


def test_a_body_that_trickles_past_the_whole_body_limit_gets_408_naming_it(quick: Hub) -> None:
    with closing(_connect(quick)) as sock:
        sock.sendall(_head(quick, "/subjects/bodies_a.slow-value", 100_000) + b'{"schema": "')
        for _ in range(600):  # a byte every 0.1 s, well within the 2 s idle limit
            readable, _, _ = select.select([sock], [], [], 0.1)
            if readable:
                break
            sock.sendall(b" ")

        status, headers, body, rest = _answer(sock)

    assert status == 408
    assert body["error_code"] == 40801
    assert "HUB_API_BODY_TIMEOUT_SECONDS" in body["message"]
    assert headers["connection"] == "close"
    assert rest == b""


def test_a_rest_proxy_stream_that_stalls_ends_with_a_408_report(quick: Hub) -> None:
    team = quick.teams["bodies_a"]
    record = json.dumps({"value": {"type": "JSON", "data": {"id": "5", "cents": 5}}}).encode()
    with closing(_connect(quick)) as sock:
        head = [
            f"POST /v3/clusters/hub/topics/{team.topic}/records HTTP/1.1",
            f"Host: {urlsplit(quick.url).netloc}",
            f"Authorization: Bearer {team.key}",
            "Content-Type: application/json",
            "Transfer-Encoding: chunked",
        ]
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sock.sendall(b"%x\r\n%s\r\n" % (len(record), record))  # one record, then nothing

        answer = b""
        while not answer.endswith(b"\r\n0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, "the stream was cut short"
            answer += chunk

    reports = [json.loads(line) for line in answer.splitlines() if line.startswith(b"{")]
    assert reports[0]["error_code"] == 200  # the record sent was published and answered
    assert reports[-1]["error_code"] == 40801
    assert "HUB_API_BODY_IDLE_TIMEOUT_SECONDS" in reports[-1]["message"]


def test_a_team_publishes_while_more_slow_senders_than_write_slots_are_connected(
    patient: Hub,
) -> None:
    team = patient.teams["bodies_b"]
    # The console's sign-in form and a registry lookup: both are read without a key.
    paths = ("/console/sign-in", f"/subjects/{team.value_subject}")
    with ExitStack() as stack:
        slow = [stack.enter_context(closing(_connect(patient))) for _ in range(70)]
        for number, sock in enumerate(slow):
            head = _head(patient, paths[number % 2], 10_000, Origin=patient.url)
            sock.sendall(head + b"api_key=")

        published = httpx.post(
            f"{patient.url}/v1/feeds/{team.topic}/records",
            headers=bearer(team.key),
            json={"records": [{"value": {"id": "9", "cents": 1}}]},
            timeout=60,
        )

        assert published.status_code == 200, published.text
        assert all(_unanswered(sock) for sock in slow)  # still sending, none answered or cut


def test_a_write_beyond_the_write_slots_gets_503_with_retry_after(
    quick: Hub, stalled_loader: socket.socket
) -> None:
    team = quick.teams["bodies_a"]

    def publish() -> httpx.Response:
        return httpx.post(
            f"{quick.url}/v1/feeds/{team.topic}/records",
            headers=bearer(team.key),
            json={"records": [{"value": {"id": "3", "cents": 3}}]},
            timeout=60,
        )

    replay = threading.Thread(
        target=lambda: httpx.post(
            f"{quick.url}/v1/feeds/{team.topic}/replay", headers=bearer(team.key), timeout=180
        )
    )
    replay.start()  # waits on the stalled loader in the only slot
    try:
        wait_until(lambda: publish().status_code == 503, timeout_s=60, what="the slot taken")
        refused = publish()

        assert refused.status_code == 503
        assert refused.json()["error_code"] == 50304
        assert int(refused.headers["Retry-After"]) > 0
        assert httpx.get(f"{quick.url}/v1/feeds", timeout=60).status_code == 200  # reads go on
    finally:
        connection, _ = stalled_loader.accept()
        connection.close()  # the replay ends (503, loader unreachable) and frees the slot
        replay.join(timeout=60)
    assert publish().status_code == 200


# Answers before the body


def test_requests_reads_the_401_of_a_large_anonymous_register(quick: Hub) -> None:
    answer = requests.post(
        f"{quick.url}/subjects/bodies_a.big-value/versions",
        data=REGISTER_BODY,
        headers={"Content-Type": "application/json"},
        timeout=60,
    )

    assert answer.status_code == 401
    assert answer.json()["error_code"] == 40101


def test_urllib_reads_the_401_of_a_large_anonymous_register(quick: Hub) -> None:
    request = urllib.request.Request(
        f"{quick.url}/subjects/bodies_a.big-value/versions",
        data=REGISTER_BODY,
        headers={"Content-Type": "application/json"},
    )

    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)

    assert refused.value.code == 401
    assert json.loads(refused.value.read())["error_code"] == 40101


def test_requests_and_urllib_read_the_413_of_a_body_over_the_limit(quick: Hub) -> None:
    url = f"{quick.url}/subjects/bodies_a.big-value/versions"
    headers = {"Content-Type": "application/json", **bearer(quick.admin_key)}
    body = b"x" * (2 * MAX_BODY)

    with_requests = requests.post(url, data=body, headers=headers, timeout=60)
    with pytest.raises(urllib.error.HTTPError) as with_urllib:
        urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers), timeout=60)

    assert with_requests.status_code == 413
    assert with_requests.json()["error_code"] == 41301
    assert with_urllib.value.code == 413
    assert json.loads(with_urllib.value.read())["error_code"] == 41301


def test_a_body_far_beyond_the_drain_bound_is_cut_off_and_the_hub_serves_on(quick: Hub) -> None:
    declared = 1024 * MIB
    sent = 0
    with closing(_connect(quick)) as sock:
        sock.sendall(_head(quick, "/subjects/bodies_a.big-value/versions", declared))
        with pytest.raises(OSError):  # reset or broken pipe: the server closed the connection
            while sent < 64 * MIB:
                sock.sendall(b"x" * 65536)
                sent += 65536

    team = quick.teams["bodies_a"]
    published = httpx.post(
        f"{quick.url}/v1/feeds/{team.topic}/records",
        headers=bearer(team.key),
        json={"records": [{"value": {"id": "4", "cents": 4}}]},
        timeout=60,
    )
    assert sent < 64 * MIB  # far less than declared was ever accepted
    assert published.status_code == 200, published.text
