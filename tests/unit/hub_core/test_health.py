"""`/healthz` and `/readyz` of the loader and the connector worker, as probes see them."""

from types import SimpleNamespace

import httpx
import pytest

from hub_core import health
from hub_core.health import HealthServer

pytestmark = pytest.mark.unit


def _get(server: HealthServer, path: str) -> httpx.Response:
    return httpx.get(f"http://127.0.0.1:{server.port}{path}", timeout=5)


def test_ready_only_once_reported_ready_and_says_why_not_otherwise() -> None:
    with HealthServer("127.0.0.1", 0, name="loader") as server:
        starting = _get(server, "/readyz")
        server.report(None)
        ready = _get(server, "/readyz")
        server.report("query hub-bronze waits to restart: the registry is unavailable")
        waiting = _get(server, "/readyz")

    assert (starting.status_code, starting.json()) == (
        503, {"status": "unavailable", "reason": "starting"}
    )  # fmt: skip
    assert (ready.status_code, ready.json()) == (200, {"status": "ok"})
    assert waiting.status_code == 503
    assert waiting.json()["reason"].startswith("query hub-bronze waits to restart")


def test_alive_while_the_main_loop_beats_and_not_once_it_stalls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server's clock is stepped by hand, so a slow machine cannot make it stall early.
    clock = [1000.0]
    monkeypatch.setattr(health, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    with HealthServer("127.0.0.1", 0, name="loader", stall_s=30) as server:
        clock[0] += 29
        alive = _get(server, "/healthz")
        clock[0] += 2
        stalled = _get(server, "/healthz")
        server.report(None)
        again = _get(server, "/healthz")

    assert alive.status_code == 200
    assert stalled.status_code == 503
    assert stalled.json()["reason"].startswith("the main loop has not run for")
    assert again.status_code == 200


def test_other_paths_and_methods_are_refused() -> None:
    with HealthServer("127.0.0.1", 0, name="connectors") as server:
        missing = _get(server, "/metrics")
        posted = httpx.post(f"http://127.0.0.1:{server.port}/readyz", timeout=5)

    assert missing.status_code == 404
    assert posted.status_code == 405


def test_nothing_is_served_without_a_port() -> None:
    with HealthServer("127.0.0.1", None, name="loader") as server:
        server.report(None)
        assert server.port is None


def test_the_port_is_free_again_after_the_block() -> None:
    with HealthServer("127.0.0.1", 0, name="loader") as server:
        port = server.port
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_metrics_are_served_when_the_process_keeps_them_and_not_found_otherwise() -> None:
    from prometheus_client import CollectorRegistry, Counter

    registry = CollectorRegistry()
    Counter("hub_loader_records_landed", "Landed.", ["table"], registry=registry).labels(
        "bronze.shop_orders"
    ).inc(3)
    with HealthServer("127.0.0.1", 0, name="loader", metrics=registry) as server:
        served = _get(server, "/metrics")
    with HealthServer("127.0.0.1", 0, name="connectors") as server:
        absent = _get(server, "/metrics")

    assert served.status_code == 200
    assert served.headers["content-type"].startswith("text/plain")
    assert 'hub_loader_records_landed_total{table="bronze.shop_orders"} 3.0' in served.text
    assert absent.status_code == 404
