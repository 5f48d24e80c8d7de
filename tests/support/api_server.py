"""The hub's API for tests: the app served by uvicorn in a background thread, or `hub api serve`
as a process of its own."""

import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from hub_api import ApiSettings, create_app
from hub_kafka.settings import KafkaSettings
from migrations import migrate
from registry.settings import RegistrySettings
from tests.conftest import REPO
from tests.support.ports import free_port
from tests.support.waiting import wait_until


@contextmanager
def serve_api(
    *,
    database_url: str,
    bootstrap_servers: str,
    delivery_timeout_ms: int = 15_000,
    api: Mapping[str, Any] | None = None,
    kafka: Mapping[str, Any] | None = None,
) -> Iterator[str]:
    """Migrate `database_url`, serve the API on a free port, and yield its base URL; `api` and
    `kafka` are more `ApiSettings` and `KafkaSettings` fields (limits, quotas, queue bounds)."""
    migrate.upgrade(database_url)
    port = free_port()
    app = create_app(
        ApiSettings(port=port, **(api or {})),
        RegistrySettings(database_url=database_url),
        KafkaSettings(
            bootstrap_servers=bootstrap_servers,
            delivery_timeout_ms=delivery_timeout_ms,
            **(kafka or {}),
        ),
    )
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", log_config=None)
    )
    thread = threading.Thread(target=server.run, name=f"api-{port}", daemon=True)
    thread.start()
    wait_until(lambda: server.started or not thread.is_alive(), timeout_s=30, what="API start")
    if not server.started:
        raise RuntimeError("the API server failed to start; see the log above")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def spawn_api(
    *, home: Path, database_url: str, bootstrap_servers: str, log: Path, **settings: str
) -> tuple[subprocess.Popen[bytes], str]:
    """Start `hub api serve` as a process of its own on a free port, its output in `log`;
    `settings` are more `HUB_API_*` variables (`workers="2"` for HUB_API_WORKERS). Returns the
    process and its base URL; the caller waits for it and stops it."""
    port = free_port()
    env = {
        **os.environ,
        "HUB_HOME": str(home),
        "HUB_API_HOST": "127.0.0.1",
        "HUB_API_PORT": str(port),
        "HUB_REGISTRY_DATABASE_URL": database_url,
        "HUB_KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers,
        **{f"HUB_API_{name.upper()}": value for name, value in settings.items()},
    }
    with log.open("wb") as out:
        # A file, not a pipe: nobody reads the log while the server runs, and a full pipe blocks.
        process = subprocess.Popen(
            [sys.executable, "-m", "hub_cli.main", "api", "serve"],
            cwd=REPO,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, f"http://127.0.0.1:{port}"
