"""Health endpoints of a process that serves nothing else: `/healthz` and `/readyz`.

The loader and the connector worker are long-running processes without an HTTP server of their
own; Kubernetes probes (and operators with curl) ask them over this one, which a daemon thread
serves with the standard library's WSGI server.

- `GET /healthz`: the process is alive, its main loop having run within the last `stall_s`
  seconds (it calls `report()` on every turn). A driver stuck for minutes answers 503, so that a
  liveness probe restarts it.
- `GET /readyz`: the process does its work: 200 when the last `report(None)` said so, else 503
  with the reason last reported ("starting", a failed connector, a query waiting for the
  registry). Until the first report the reason is "starting".
- `GET /metrics`: the process's Prometheus metrics, when it was given a registry of them.
- Further paths a process `mount`s (the loader's `/status`, `/plan`, `/replay`: see
  spark_loaders/control/status.py), which answer for themselves, any method.

Requests are served each in a thread of its own, so a slow mounted route (a replay runs a
Spark job) never holds up a probe.

Bodies are JSON: `{"status": "ok"}` or `{"status": "unavailable", "reason": "..."}`.
"""

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from types import TracebackType
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    """Probes every few seconds would flood the log: requests are not logged."""

    def log_message(self, format: str, *args: Any) -> None:
        return


class HealthServer:
    """`/healthz` and `/readyz` on `host:port` while used as a context manager; with no port
    (the setting left unset) nothing is served, and `report` costs nothing."""

    def __init__(
        self,
        host: str,
        port: int | None,
        *,
        name: str,
        stall_s: float = 120.0,
        metrics: CollectorRegistry | None = None,
    ) -> None:
        self._host = host
        self._metrics = metrics
        self._port = port
        self._name = name
        self._stall_s = stall_s
        self._lock = threading.Lock()
        self._beat = time.monotonic()
        self._not_ready: str | None = "starting"
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self._mounted: dict[str, WsgiApp] = {}

    def mount(self, paths: Iterable[str], app: WsgiApp) -> None:
        """Serve `paths` (exact, any method) with `app`, from now on."""
        with self._lock:
            self._mounted.update(dict.fromkeys(paths, app))

    @property
    def port(self) -> int | None:
        """The port served (the one given, or the one chosen when 0 was given)."""
        return self._server.server_port if self._server is not None else self._port

    def report(self, not_ready: str | None) -> None:
        """The main loop ran (the process is alive), and: None when it does its work, else why
        it does not."""
        with self._lock:
            if not_ready != self._not_ready:
                state = "ready" if not_ready is None else f"not ready: {not_ready}"
                log.info("%s %s", self._name, state)
            self._not_ready = not_ready
            self._beat = time.monotonic()

    def __enter__(self) -> "HealthServer":
        if self._port is None:
            return self
        self._server = make_server(
            self._host,
            self._port,
            self._app,
            server_class=_ThreadingServer,
            handler_class=_QuietHandler,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=f"{self._name}-health", daemon=True
        )
        self._thread.start()
        log.info("%s health on http://%s:%d/healthz and /readyz", self._name, self._host, self.port)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        with self._lock:
            mounted = self._mounted.get(path)
        if mounted is not None:
            return mounted(environ, start_response)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", {"status": "unavailable",
                           "reason": "only GET"})  # fmt: skip
        with self._lock:
            stalled_s = time.monotonic() - self._beat
            not_ready = self._not_ready
        if path == "/healthz":
            if stalled_s > self._stall_s:
                reason = f"the main loop has not run for {stalled_s:.0f} s"
                return _answer(start_response, "503 Service Unavailable", _down(reason))
            return _answer(start_response, "200 OK", {"status": "ok"})
        if path == "/metrics" and self._metrics is not None:
            data = generate_latest(self._metrics)
            start_response(
                "200 OK",
                [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(data)))],
            )
            return [data]
        if path == "/readyz":
            if not_ready is not None:
                return _answer(start_response, "503 Service Unavailable", _down(not_ready))
            return _answer(start_response, "200 OK", {"status": "ok"})
        return _answer(start_response, "404 Not Found", _down(f"no such endpoint: {path}"))


def _down(reason: str) -> dict[str, str]:
    return {"status": "unavailable", "reason": reason}


def _answer(start_response: StartResponse, status: str, body: dict[str, str]) -> list[bytes]:
    data = json.dumps(body).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    start_response(status, headers)
    return [data]
