"""The publish benchmark's stack: a broker and the API server, each its own process, and the
feed, records and CPU accounting every part of the benchmark shares."""

import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.servers import (
    api_server,
    host_cpu_ticks,
    process_cpu_seconds,
    process_tree_cpu_seconds,
)
from catalog.errors import TeamExists
from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_core.database import create_database_engine
from hub_kafka.local_broker import LocalBroker
from hub_kafka.settings import KafkaSettings
from migrations import migrate

REPO = Path(__file__).resolve().parents[1]
TOPIC = "bench.readings"
TEAM = "bench"
PARTITIONS = 3
SCHEMA = {
    "type": "record",
    "name": "Reading",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "celsius", "type": "double"},
        {"name": "taken_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def reading(n: int) -> dict[str, Any]:
    """Record `n`: as natural JSON for the gateway, and as the datum fastavro writes."""
    return {
        "id": n,
        "sensor": f"sensor-{n % 64:02d}",
        "celsius": 15.0 + (n % 400) / 20,
        "taken_at": 1_714_564_800_000 + n,
    }


def say(text: str) -> None:
    """Print a progress line at once."""
    print(text, flush=True)


# -- the stack: a broker and the API server, each its own process --------------------------


@dataclass(frozen=True, slots=True)
class Stack:
    base_url: str
    port: int
    bootstrap: str
    kafka: KafkaSettings  # the client settings the server runs with
    database: str
    server_pid: int
    broker_pid: int
    server_log: Path


@contextmanager
def running_stack(*, workers: int = 1) -> Iterator[Stack]:
    """A dedicated broker and `hub api serve` (`workers` processes) on free ports, in a
    temporary home."""
    from tests.support.ports import free_port

    home = Path(tempfile.mkdtemp(prefix="hub-bench-publish-"))
    jars = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "jars" / "kafka"
    broker = LocalBroker(
        KafkaSettings(
            broker_home=home / "kafka",
            broker_jars_dir=jars,
            broker_port=free_port(),
            controller_port=free_port(),
        )
    )
    try:
        say(f"starting a Kafka broker ({jars})")
        status = broker.start()
        assert status.pid is not None
        database = f"sqlite:///{home / 'registry.db'}"
        migrate.upgrade(database)
        _register_team(database)
        with api_server(
            database, bootstrap_servers=broker.bootstrap_servers, workers=workers
        ) as server:
            yield Stack(
                base_url=server.base_url,
                port=server.port,
                bootstrap=broker.bootstrap_servers,
                kafka=KafkaSettings(bootstrap_servers=broker.bootstrap_servers),
                database=database,
                server_pid=server.pid,
                broker_pid=status.pid,
                server_log=server.log,
            )
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)


def _register_team(database: str) -> None:
    engine = create_database_engine(database)
    try:
        with suppress(TeamExists):
            TeamStore(engine).register(name=TeamName(TEAM))
    finally:
        engine.dispose()


def create_feed(stack: Stack) -> int:
    """Create the benchmark's feed through the API; return its value schema id."""
    with httpx.Client(base_url=stack.base_url, timeout=60, trust_env=False) as client:
        response = client.post(
            "/v1/feeds",
            json={
                "topic": TOPIC,
                "owner": TEAM,
                "kind": "event",
                "value_schema": json.dumps(SCHEMA),
                "partitions": PARTITIONS,
            },
        )
        if response.status_code != 201:
            raise RuntimeError(f"creating the feed failed: {response.status_code} {response.text}")
        latest = client.get(f"/subjects/{TOPIC}-value/versions/latest")
        latest.raise_for_status()
        return int(latest.json()["id"])


# -- CPU accounting ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds so far of the API server, the broker, this process and the whole machine."""

    server: float
    broker: float
    bench: float  # the load generator, or the ceiling's producer
    host: float  # every process of the machine

    @classmethod
    def read(cls, stack: Stack) -> "Cpu":
        return cls(
            process_tree_cpu_seconds(stack.server_pid),
            process_cpu_seconds(stack.broker_pid),
            time.process_time(),
            host_cpu_ticks()[0] / _CLOCK_TICKS,
        )

    def __sub__(self, other: "Cpu") -> "Cpu":
        return Cpu(
            self.server - other.server,
            self.broker - other.broker,
            self.bench - other.bench,
            self.host - other.host,
        )

    @property
    def others(self) -> float:
        """CPU seconds of processes outside the benchmark: other work on a shared machine."""
        return max(0.0, self.host - self.server - self.broker - self.bench)
