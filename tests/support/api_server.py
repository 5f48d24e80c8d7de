"""The hub's API app served by uvicorn in a background thread, for tests."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from hub_api import ApiSettings, create_app
from hub_kafka.settings import KafkaSettings
from registry import migrate
from registry.settings import RegistrySettings
from tests.support.ports import free_port
from tests.support.waiting import wait_until


@contextmanager
def serve_api(
    *, database_url: str, bootstrap_servers: str, delivery_timeout_ms: int = 15_000
) -> Iterator[str]:
    """Migrate `database_url`, serve the API on a free port, and yield its base URL."""
    migrate.upgrade(database_url)
    port = free_port()
    app = create_app(
        ApiSettings(port=port),
        RegistrySettings(database_url=database_url),
        KafkaSettings(bootstrap_servers=bootstrap_servers, delivery_timeout_ms=delivery_timeout_ms),
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
