"""Running connectors in tests: a worker in a background thread, and its stored offsets."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager
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


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def running_worker(files: list[Path], *, database_url: str, bootstrap: str) -> Iterator[Worker]:
    """A worker running `files` in this process until the block ends (a clean stop)."""
    settings = ConnectSettings(heartbeat_seconds=1.0, retry_backoff_seconds=0.5)
    services = connect_services(
        RegistrySettings(database_url=database_url),
        KafkaSettings(bootstrap_servers=bootstrap, delivery_timeout_ms=15_000),
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


def stored_offsets(bootstrap: str, name: str) -> dict[str, Any]:
    """The committed positions of connector `name`, by source partition (as JSON text)."""
    kafka = KafkaSettings(bootstrap_servers=bootstrap)
    control = ControlPlane(ConnectSettings(), kafka, admin=TopicAdmin(kafka), producer=None)
    return {str(sorted(o.partition.items())): o.offset for o in control.offsets.load(name)}
