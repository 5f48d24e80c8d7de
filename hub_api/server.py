"""Serving the API (`hub api serve`): one process, or one process per worker, each tuned.

Garbage collection. A publish request makes several objects per record, most of them alive
until it is answered. With CPython's default threshold (a collection of the youngest generation
every 700 net allocations) a batch of 1,000 records sets off dozens of collections that free
nothing and promote the request's objects, so that the older generations fill up and are
scanned over and over: as much CPU as the request's own work. A server process therefore raises
the threshold (`HUB_API_GC_THRESHOLD`) and freezes what it built at start-up (modules, routes,
settings), which full collections then leave alone. Cycles are still collected, less often.
Tests and other code that call `create_app` keep their interpreter as it is.

Workers. The app holds the GIL for a request's whole Python work, so one process uses at most
one core; `HUB_API_WORKERS` runs that many processes. Each binds its own listening socket with
`SO_REUSEPORT`, and the kernel spreads new connections over them. A shared socket (uvicorn's
own workers) lets whichever process wakes first accept a whole burst of connections, which left
one worker with every keep-alive client and the other idle (ADR 0017).
"""

import gc
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI

from hub_api.app import create_app
from hub_api.connections import bounded_heads
from hub_api.metrics import MULTIPROCESS_DIR_ENV
from hub_api.settings import ApiSettings
from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings

log = logging.getLogger(__name__)

STOP_GRACE_S = 30.0  # how long workers get to finish their requests after SIGTERM


def serve(settings: ApiSettings, *, setup_worker: Callable[[], None]) -> None:
    """Serve until SIGTERM or Ctrl-C: in this process, or in `settings.workers` processes,
    each of which calls `setup_worker` (a module-level function, such as the CLI's logging
    set-up) first."""
    if settings.workers == 1:
        _serve(settings, listening_socket(settings, reuse_port=False))
    else:
        _Supervisor(settings, setup_worker).run()


def create_server_app(
    settings: ApiSettings,
    registry: RegistrySettings | None = None,
    kafka: KafkaSettings | None = None,
) -> FastAPI:
    """The app of one server process, built after tuning the interpreter."""
    if settings.gc_threshold:
        _, older, oldest = gc.get_threshold()
        gc.set_threshold(settings.gc_threshold, older, oldest)
    app = create_app(settings, registry, kafka)
    gc.collect()
    gc.freeze()  # what exists now lives as long as the process: leave it out of collections
    return app


def _serve(settings: ApiSettings, sock: socket.socket) -> None:
    # uvicorn's httptools protocol, with request heads bounded in time and size; no
    # `limit_concurrency`: at its limit uvicorn answers every new request, whoever sends it,
    # with a bare 503, so whoever holds connections would hold every team's requests.
    config = uvicorn.Config(
        create_server_app(settings), log_config=None, http=bounded_heads(settings)
    )
    uvicorn.Server(config).run(sockets=[sock])


def listening_socket(settings: ApiSettings, *, reuse_port: bool) -> socket.socket:
    """A socket bound to `host:port`, as uvicorn would bind it, shared by port if asked."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError as exc:
        sock.close()
        raise SystemExit(f"cannot listen on {settings.host}:{settings.port}: {exc}") from exc
    sock.set_inheritable(True)
    return sock


def _worker(number: int, setup: Callable[[], None]) -> None:
    """One worker process: its own settings, socket and app; its own Kafka transactional ids."""
    setup()
    threading.Thread(
        target=_stop_with_supervisor, args=(os.getppid(),), name="supervisor-watch", daemon=True
    ).start()
    settings = ApiSettings()
    settings = settings.model_copy(update={"instance_id": f"{settings.instance_id}-w{number}"})
    _serve(settings, listening_socket(settings, reuse_port=True))


def _stop_with_supervisor(supervisor: int) -> None:
    """Stop this worker (as SIGTERM would) once its supervisor is gone, even killed outright:
    a worker must not serve on, unsupervised, after the server was stopped."""
    while os.getppid() == supervisor:
        time.sleep(1.0)
    log.warning("API supervisor %d is gone: stopping this worker", supervisor)
    os.kill(os.getpid(), signal.SIGTERM)


class _Supervisor:
    """Starts the workers, stops them all on SIGTERM or SIGINT, and stops them all (exit 1) when
    one of them ends on its own, so that a broken worker is noticed rather than limped past."""

    def __init__(self, settings: ApiSettings, setup_worker: Callable[[], None]) -> None:
        self._settings = settings
        self._stopping = False
        context = multiprocessing.get_context("spawn")
        self._workers = [
            context.Process(target=_worker, args=(n, setup_worker), name=f"hub-api-worker-{n}")
            for n in range(settings.workers)
        ]

    def run(self) -> None:
        # A socket of our own first: a port taken by another program fails here, at once.
        listening_socket(self._settings, reuse_port=True).close()
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        # The workers' metrics, in one empty directory for this run (`hub_api.metrics`).
        metrics_dir = tempfile.mkdtemp(prefix="hub-api-metrics-")
        os.environ[MULTIPROCESS_DIR_ENV] = metrics_dir
        try:
            self._run_workers()
        finally:
            shutil.rmtree(metrics_dir, ignore_errors=True)

    def _run_workers(self) -> None:
        for worker in self._workers:
            worker.start()
        log.info(
            "API on %s:%d in %d worker processes (pids %s)",
            self._settings.host,
            self._settings.port,
            len(self._workers),
            ", ".join(str(w.pid) for w in self._workers),
        )
        while not self._stopping and all(w.is_alive() for w in self._workers):
            time.sleep(0.5)
        failed = not self._stopping
        if failed:
            ended = next(w for w in self._workers if not w.is_alive())
            log.error("API worker %s ended (exit code %s): stopping", ended.pid, ended.exitcode)
        self._terminate()
        if failed:
            sys.exit(1)

    def _stop(self, signum: int, _frame: FrameType | None) -> None:
        log.info("%s: stopping the API workers", signal.Signals(signum).name)
        self._stopping = True

    def _terminate(self) -> None:
        for worker in self._workers:
            if worker.is_alive() and worker.pid is not None:
                worker.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
            if worker.is_alive():
                log.warning("API worker %s still running after %.0f s: killed", worker.pid,
                            STOP_GRACE_S)  # fmt: skip
                worker.kill()
                worker.join()
