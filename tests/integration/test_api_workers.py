"""`hub api serve` with HUB_API_WORKERS=2: two worker processes share the port, each takes
connections, each publishes atomically under transactional ids of its own, and they stop
together, on SIGTERM or when one of them dies."""

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from migrations import migrate
from tests.support.api_server import spawn_api
from tests.support.hub_client import bearer, create_feed, create_key, unique_topic
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "record",
    "name": "Tick",
    "fields": [{"name": "n", "type": "long"}],
}


@dataclass(frozen=True)
class Server:
    process: subprocess.Popen[bytes]
    url: str
    database: str
    log: Path

    def workers(self) -> list[int]:
        """The worker processes: children of the server running the API (not the resource
        tracker multiprocessing also starts)."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                command = (stat.parent / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == self.process.pid and b"resource_tracker" not in command:
                found.append(int(stat.parent.name))
        return sorted(found)


@pytest.fixture
def server(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Server]:
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    migrate.upgrade(database)
    log = tmp_path / "api.log"
    process, url = spawn_api(
        home=tmp_path / "home",
        database_url=database,
        bootstrap_servers=kafka_bootstrap,
        log=log,
        workers="2",
        # One name for the whole server: each worker must still get transactional ids of its own.
        instance_id="api-under-test",
    )
    running = Server(process, url, database, log)
    try:
        wait_until(
            lambda: process.poll() is not None or log.read_text().count("API ready") == 2,
            timeout_s=90,
            what="two API workers to start",
        )
        assert process.poll() is None, log.read_text()[-3000:]
        yield running
    finally:
        workers = running.workers()
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _connections(pid: int, port: int) -> int:
    """Established TCP connections process `pid` holds on its local `port` (from /proc)."""
    inodes = {
        os.readlink(fd)[len("socket:[") : -1]
        for fd in Path(f"/proc/{pid}/fd").iterdir()
        if os.readlink(fd).startswith("socket:[")
    }
    count = 0
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        established = fields[3] == "01"
        if local_port == port and established and fields[9] in inodes:
            count += 1
    return count


def test_both_workers_take_connections_publish_atomically_and_count_in_every_scrape(
    server: Server,
) -> None:
    workers = server.workers()
    assert len(workers) == 2
    key = create_key(server.database, team="ticks")
    topic = unique_topic("ticks")
    create_feed(server.url, key, topic=topic, schema=SCHEMA, owner="ticks")

    port = int(server.url.rsplit(":", 1)[1])
    clients = [
        httpx.Client(base_url=server.url, headers=bearer(key), timeout=60) for _ in range(16)
    ]
    try:
        for n, client in enumerate(clients):  # each keeps its connection open
            response = client.post(
                f"/v1/feeds/{topic}/records",
                params={"atomic": "true"},
                json={"records": [{"value": {"n": n}}, {"value": {"n": n + 100}}]},
            )
            assert response.status_code == 200, response.text
            assert response.json()["accepted"] == 2
        taken = {pid: _connections(pid, port) for pid in workers}
    finally:
        for client in clients:
            client.close()
    # The kernel spreads connections over the workers' sockets at random: with 16, one worker
    # taking none has a chance of 1 in 32,768.
    assert all(count > 0 for count in taken.values()), taken
    assert sum(taken.values()) == 16

    # Whichever worker answers a scrape, it counts what both workers did.
    for _ in range(8):  # a new connection each: the kernel picks the worker
        samples = _samples(httpx.get(f"{server.url}/metrics", timeout=30).text)
        assert samples[f'hub_records_accepted_total{{feed="{topic}"}}'] == 32
        route = '{method="POST",route="/v1/feeds/{topic}/records",status="200"}'
        assert samples[f"hub_http_requests_total{route}"] == 16
        assert samples[f'hub_publish_request_seconds_count{{feed="{topic}"}}'] == 16


def _samples(exposition: str) -> dict[str, float]:
    """{name{labels}: value} of a Prometheus text exposition."""
    found = {}
    for line in exposition.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def test_sigterm_stops_every_worker(server: Server) -> None:
    workers = server.workers()
    assert len(workers) == 2
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=60) == 0
    assert [pid for pid in workers if Path(f"/proc/{pid}").exists()] == []


def test_a_worker_that_dies_stops_the_server(server: Server) -> None:
    first, second = server.workers()
    os.kill(first, signal.SIGKILL)
    assert server.process.wait(timeout=60) == 1
    wait_until(
        lambda: not Path(f"/proc/{second}").exists(), timeout_s=10, what="the other worker to end"
    )
    assert "ended" in server.log.read_text()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{server.url}/healthz", timeout=2)


def test_workers_stop_when_the_server_process_is_killed_outright(server: Server) -> None:
    workers = server.workers()
    assert len(workers) == 2
    server.process.kill()
    server.process.wait()
    wait_until(
        lambda: not any(_running(pid) for pid in workers),
        timeout_s=40,
        what="the orphaned workers to stop",
    )


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit is collected by init in its own time)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
