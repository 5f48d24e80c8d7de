"""Running connectors in tests: a worker in a background thread or as `hub connect run`, and
its stored offsets."""

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from connectors.config import load
from connectors.control import ControlPlane
from connectors.settings import ConnectSettings
from connectors.worker import Worker, connect_services
from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings
from tests.support.kafka import read_avro
from tests.support.ports import free_port


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass(frozen=True, slots=True)
class Connector:
    name: str
    topic: str
    file: Path


def connector_file(
    folder: Path, *, kind: str, owner: str, source: dict[str, Any], prefixed: bool = False
) -> Connector:
    """A configuration file for a connector with a fresh name, writing to `<owner>.<name>`
    (with `prefixed`, to topics under that prefix, one per table)."""
    name = f"{kind}-{uuid.uuid4().hex[:8]}"
    topic = f"{owner}.{name.replace('-', '_')}"
    config = {
        "name": name,
        "type": kind,
        "owner": owner,
        "topic_prefix" if prefixed else "topic": topic,
        "source": source,
    }
    return Connector(name, topic, write_config(folder / f"{name}.yaml", config))


@dataclass(frozen=True, slots=True)
class ConnectHub:
    """The session's hub as a connector test uses it: its database, Kafka and registry."""

    api_url: str
    database_url: str
    bootstrap: str
    team_key: Callable[[str], str]

    def worker(self, *files: Path) -> AbstractContextManager[Worker]:
        """A worker running the connectors of `files` until the block ends."""
        return running_worker(list(files), database_url=self.database_url, bootstrap=self.bootstrap)

    def records(self, topic: str, *, expected: int) -> list[tuple[Any, Any]]:
        """(key, value) of `topic`'s records, Avro-decoded through the registry."""
        return read_avro(self.api_url, self.bootstrap, topic, expected=expected)

    def offsets(self, name: str) -> dict[str, Any]:
        """The committed positions of connector `name`, by source partition."""
        return stored_offsets(self.bootstrap, name)


@contextmanager
def running_worker(
    files: list[Path], *, database_url: str, bootstrap: str, kafka: KafkaSettings | None = None
) -> Iterator[Worker]:
    """A worker running `files` in this process until the block ends (a clean stop); `kafka`
    replaces the plain settings for `bootstrap` (a secured broker's, say)."""
    settings = ConnectSettings(heartbeat_seconds=1.0, retry_backoff_seconds=0.5)
    services = connect_services(
        RegistrySettings(database_url=database_url),
        kafka or KafkaSettings(bootstrap_servers=bootstrap, delivery_timeout_ms=15_000),
        settings,
    )
    worker = Worker([load(f) for f in files], services=services, settings=settings)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), name="test-worker")
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(timeout=60)
        services.close()
        assert not thread.is_alive(), "the worker did not stop"


@contextmanager
def serving_worker(hub: ConnectHub, files: list[Path], log: Path) -> Iterator[str]:
    """`hub connect run FILES` with its health endpoints on a free port; yields their URL."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update({
        "HUB_REGISTRY_DATABASE_URL": hub.database_url,
        "HUB_KAFKA_BOOTSTRAP_SERVERS": hub.bootstrap,
        "HUB_CONNECT_HEALTH_PORT": str(port),
        "HUB_CONNECT_HEARTBEAT_SECONDS": "0.5",
    })  # fmt: skip
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "hub_cli.main", "connect", "run", *map(str, files)],
            env=env, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text()[-3000:]


def stored_offsets(bootstrap: str, name: str) -> dict[str, Any]:
    """The committed positions of connector `name`, by source partition (as JSON text)."""
    kafka = KafkaSettings(bootstrap_servers=bootstrap)
    admin = TopicAdmin(kafka)
    try:
        control = ControlPlane(ConnectSettings(), kafka, admin=admin, producer=None)
        return {str(sorted(o.partition.items())): o.offset for o in control.offsets.load(name)}
    finally:
        admin.close()
