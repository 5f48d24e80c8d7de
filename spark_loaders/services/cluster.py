"""A local Spark standalone cluster: one master and N workers, each a JVM of its own.

Used by `hub spark start|stop|status` and the test fixtures, so that the loader can be run
against `spark://` exactly as in production (see docs/adr/0026). The JVMs come from the pinned
PySpark distribution itself (`pyspark/bin/spark-class`): nothing else is installed or fetched.
PySpark's pip package has no `sbin/start-master.sh`, and those scripts daemonize in ways a pid
file cannot follow, so each daemon is started here with `spark-class` and kept like the hub's
other local services (`BackgroundProcess`: pid file, log, wait until ready, stop).

Everything the cluster writes (pid files, logs, the workers' work folders, where executors
unpack the jars a driver sends them) lives under `HUB_SPARK_HOME`.
"""

import importlib.util
import logging
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from hub_core.processes import BackgroundProcess, port_open
from spark_loaders.errors import SparkClusterError
from spark_loaders.services.cluster_settings import ClusterSettings

log = logging.getLogger(__name__)

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


@dataclass(frozen=True, slots=True)
class DaemonStatus:
    """One JVM of the cluster: whether it runs and whether it serves (a worker: registered)."""

    name: str
    running: bool
    pid: int | None
    address: str
    ready: bool

    def describe(self) -> str:
        if not self.running:
            return f"{self.name} is not running"
        state = "ready" if self.ready else "starting"
        return f"{self.name} is running (pid {self.pid}) on {self.address}: {state}"


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """The master's status and each configured worker's; `running`, `pid` and `ready` are
    the master's, so the status reads like the hub's other services."""

    master: DaemonStatus
    workers: list[DaemonStatus]

    @property
    def running(self) -> bool:
        return self.master.running

    @property
    def pid(self) -> int | None:
        return self.master.pid

    @property
    def ready(self) -> bool:
        return self.master.ready and all(w.ready for w in self.workers if w.running)


class LocalCluster:
    """Start, stop and inspect the local standalone master and its workers."""

    def __init__(self, settings: ClusterSettings) -> None:
        self._settings = settings
        self.home = settings.home
        self.master_url = settings.master_url
        self.master_webui_port = settings.master_webui_port
        self._master = BackgroundProcess("Spark master", self.home / "master.pid")

    def start(self, *, workers: int | None = None, timeout_s: float = 120.0) -> ClusterStatus:
        """Start the master and `workers` workers (default: the setting), those not running
        yet, and wait until each worker has registered with the master."""
        count = self._settings.workers if workers is None else workers
        if count < 1:
            raise SparkClusterError(f"A cluster needs at least one worker, not {count}.")
        self.home.mkdir(parents=True, exist_ok=True)
        self._start_master(timeout_s)
        for index in range(count):
            self._start_worker(index, timeout_s)
        return self.status(workers=count)

    def stop(self, *, timeout_s: float = 30.0) -> bool:
        """Stop every worker (each stops its executors), then the master. True if any ran."""
        stopped = [
            self._worker(index).stop(timeout_s=timeout_s) for index in self._worker_indexes()
        ]
        return self._master.stop(timeout_s=timeout_s) or any(stopped)

    def status(self, *, workers: int | None = None) -> ClusterStatus:
        """The master's state and each worker's: the configured ones and any other running."""
        count = self._settings.workers if workers is None else workers
        indexes = sorted(set(range(count)) | set(self._worker_indexes()))
        pid = self._master.pid()
        master = DaemonStatus(
            name="Spark master",
            running=pid is not None,
            pid=pid,
            address=self.master_url,
            ready=pid is not None and self._master_answers(),
        )
        return ClusterStatus(master, [self._worker_status(i) for i in indexes])

    def worker_pid(self, index: int) -> int | None:
        """The pid of worker `index` (0-based), or None when it does not run."""
        return self._worker(index).pid()

    def _start_master(self, timeout_s: float) -> None:
        if self._master.pid() is not None:
            self._wait(self._master, self._master_answers, self.master_url, timeout_s)
            return
        port = self._settings.master_port
        for taken in (port, self._settings.master_webui_port):
            if port_open(taken):
                raise SparkClusterError(
                    f"Port {taken} is taken by another process, not by the Spark master of "
                    f"{self.home}. Set HUB_SPARK_MASTER_PORT / HUB_SPARK_MASTER_WEBUI_PORT to "
                    "free ports."
                )
        log_file = self.home / "master.log"
        log.info("starting the Spark master on %s (log: %s)", self.master_url, log_file)
        command = [
            *self._spark_class(MASTER_CLASS),
            "--host", "127.0.0.1",
            "--port", str(port),
            "--webui-port", str(self._settings.master_webui_port),
        ]  # fmt: skip
        process = self._master.start(command, output=log_file, extra_env=self._env(self.home))
        self._wait(self._master, self._master_answers, self.master_url, timeout_s, process)
        log.info("Spark master ready (pid %s)", process.pid)

    def _start_worker(self, index: int, timeout_s: float) -> None:
        worker = self._worker(index)
        ui_port = self._settings.worker_webui_port + index

        def registered() -> bool:
            return self._worker_registered(ui_port)

        address = f"127.0.0.1:{ui_port}"
        if worker.pid() is not None:
            self._wait(worker, registered, address, timeout_s)
            return
        if port_open(ui_port):
            raise SparkClusterError(
                f"Port {ui_port} (web UI of Spark worker {index + 1}) is taken by another "
                "process. Set HUB_SPARK_WORKER_WEBUI_PORT to a free range of ports."
            )
        work_dir = self.home / f"worker-{index}"
        (work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        log_file = self.home / f"worker-{index}.log"
        log.info("starting Spark worker %d (log: %s)", index + 1, log_file)
        command = [
            *self._spark_class(WORKER_CLASS),
            self.master_url,
            "--host", "127.0.0.1",
            "--webui-port", str(ui_port),
            "--cores", str(self._settings.worker_cores),
            "--memory", self._settings.worker_memory,
            "--work-dir", str(work_dir / "work"),
        ]  # fmt: skip
        process = worker.start(command, output=log_file, extra_env=self._env(work_dir / "tmp"))
        self._wait(worker, registered, address, timeout_s, process)
        log.info("Spark worker %d ready (pid %s)", index + 1, process.pid)

    def _worker(self, index: int) -> BackgroundProcess:
        return BackgroundProcess(f"Spark worker {index + 1}", self.home / f"worker-{index}.pid")

    def _worker_indexes(self) -> list[int]:
        """Workers with a pid file, whatever the setting says now."""
        found = (p.stem.removeprefix("worker-") for p in self.home.glob("worker-*.pid"))
        return sorted(int(i) for i in found if i.isdigit())

    def _worker_status(self, index: int) -> DaemonStatus:
        pid = self._worker(index).pid()
        ui_port = self._settings.worker_webui_port + index
        return DaemonStatus(
            name=f"Spark worker {index + 1}",
            running=pid is not None,
            pid=pid,
            address=f"127.0.0.1:{ui_port}",
            ready=pid is not None and self._worker_registered(ui_port),
        )

    def _master_answers(self) -> bool:
        return _json(self._settings.master_webui_port) is not None

    @staticmethod
    def _worker_registered(ui_port: int) -> bool:
        # A worker's own state names its master only once the master accepted it; the
        # master's list may still show a killed worker at the same address until it times out.
        state = _json(ui_port)
        return state is not None and str(state.get("masterurl", "")).startswith("spark://")

    def _spark_class(self, main_class: str) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), main_class]

    def _env(self, local_dir: Path) -> dict[str, str]:
        """Spark's daemons read these; executors inherit them from their worker."""
        return {
            "SPARK_HOME": str(spark_home()),
            "SPARK_DAEMON_MEMORY": self._settings.daemon_heap,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(local_dir),
            "SPARK_LOG_DIR": str(self.home),
        }

    @staticmethod
    def _wait(
        daemon: BackgroundProcess,
        ready: Callable[[], bool],
        address: str,
        timeout_s: float,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        logs = str(daemon.pid_file.with_suffix(".log"))
        try:
            daemon.wait_ready(
                ready,
                address=address,
                logs=logs,
                error=SparkClusterError,
                timeout_s=timeout_s,
                interval_s=0.5,
                process=process,
            )
        except SparkClusterError:
            daemon.stop(timeout_s=10.0)
            raise


def spark_home() -> Path:
    """The pinned PySpark's distribution folder (its `bin/spark-class`, `jars/`)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise SparkClusterError("PySpark is not installed in this environment; run `make setup`.")
    return Path(spec.origin).parent


def _json(ui_port: int) -> dict[str, object] | None:
    """A Spark web UI's `/json/` state, or None when it does not answer."""
    try:
        response = httpx.get(f"http://127.0.0.1:{ui_port}/json/", timeout=2.0)
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    body = response.json()
    return body if isinstance(body, dict) else None
