"""The processes a benchmark runs against: the API server and its registry database."""

import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from hub_kafka.local_broker import LocalBroker
from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[1]
# Nothing listens there: the producer connects lazily, and registry routes never use it.
NO_KAFKA = "127.0.0.1:1"
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ApiProcess:
    """A running `hub api serve` process."""

    base_url: str
    pid: int
    log: Path

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def peak_rss_mb(self) -> dict[int, float]:
        """Peak resident memory so far of the server and of each worker process, by pid."""
        return process_tree_peak_rss_mb(self.pid)


@dataclass(frozen=True, slots=True)
class Database:
    """A registry database; `pids` lists its server processes (none for SQLite)."""

    name: str
    url: str
    pids: Callable[[], list[int]] = list


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the parenthesised command name (the first is the
    state, field 3); None once the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (all its threads), from /proc; 0 once gone."""
    fields = _stat_fields(pid)  # utime and stime are fields 14 and 15
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def process_tree_cpu_seconds(pid: int) -> float:
    """As `process_cpu_seconds`, for `pid` and its child processes (`HUB_API_WORKERS` > 1 runs
    the API in worker processes under a supervising one), those running and those that ended
    and were waited for (a CDC snapshot's helper processes)."""
    running = sum(process_cpu_seconds(c) for c in _children(pid))
    return process_cpu_seconds(pid) + _reaped_children_cpu_seconds(pid) + running


def _reaped_children_cpu_seconds(pid: int) -> float:
    fields = _stat_fields(pid)  # cutime and cstime are fields 16 and 17
    return 0.0 if fields is None else (int(fields[13]) + int(fields[14])) / _CLOCK_TICKS


def spawned_children(parent: int) -> list[int]:
    """The child processes of `parent` that Python's multiprocessing spawned to do its work
    (not its resource tracker)."""
    found = []
    for pid in _children(parent):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if b"spawn_main" in command:
            found.append(pid)
    return found


def spark_driver_pid(spark: Any) -> int:
    """The process id of a local Spark session's driver JVM (its executors' too, in local mode)."""
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


def peak_rss_mb(pid: int) -> float:
    """Peak resident memory of process `pid` so far (VmHWM), in MB; 0 once gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def process_tree_peak_rss_mb(pid: int) -> dict[int, float]:
    """`peak_rss_mb` of `pid` and of each of its child processes (API workers), by pid."""
    return {p: peak_rss_mb(p) for p in [pid, *_children(pid)]}


def self_peak_rss_mb() -> float:
    """Peak resident memory of this process (the benchmark's own Python), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def print_peak_rss(processes: Mapping[str, int | None]) -> None:
    """Print the peak resident memory of each named process (call it before they stop) and of
    this benchmark's own Python process."""
    figures = [f"{name} {peak_rss_mb(pid):,.0f} MB" for name, pid in processes.items() if pid]
    figures.append(f"benchmark (Python) {self_peak_rss_mb():,.0f} MB")
    print("peak RSS: " + ", ".join(figures), flush=True)


def host_cpu_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine since boot, from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # guest time is already counted in user
    return total - idle, total


@dataclass(frozen=True, slots=True)
class CpuUse:
    """CPU seconds used over an interval, by whom; `host` counts every process of the machine."""

    server: float
    database: dict[int, float]  # by process: PostgreSQL starts and ends backends
    generator: float
    host: float
    host_capacity: float  # seconds of CPU the machine had: cores x wall time

    @property
    def database_total(self) -> float:
        return sum(self.database.values())

    def __sub__(self, earlier: "CpuUse") -> "CpuUse":
        return CpuUse(
            server=self.server - earlier.server,
            # A process that ended in between is left out: its last figures are gone.
            database={
                pid: seconds - earlier.database.get(pid, 0.0)
                for pid, seconds in self.database.items()
            },
            generator=self.generator - earlier.generator,
            host=self.host - earlier.host,
            host_capacity=self.host_capacity - earlier.host_capacity,
        )

    @property
    def others(self) -> float:
        """CPU seconds of processes outside the benchmark: other work on a shared machine."""
        return max(0.0, self.host - self.server - self.database_total - self.generator)


@dataclass(frozen=True, slots=True)
class PeakRss:
    """Peak resident memory so far, in MB, of each process a benchmark started, and its own."""

    api: dict[int, float]  # the server, then its worker processes (HUB_API_WORKERS > 1)
    database: dict[int, float]  # PostgreSQL's server and backends; none for SQLite
    generator: float  # the benchmark's own process: the load generator and the set-up

    @property
    def api_workers(self) -> list[float]:
        """The processes that serve requests: the workers, or the server when it has none."""
        values = list(self.api.values())
        return values[1:] if len(values) > 1 else values

    def describe(self) -> str:
        api = list(self.api.values())
        text = f"peak RSS MB: api {api[0]:.0f}" if api else "peak RSS MB: api gone"
        if len(api) > 1:
            text += " workers " + ",".join(f"{v:.0f}" for v in api[1:])
        text += f" bench {self.generator:.0f}"
        if self.database:
            db = list(self.database.values())
            text += f" postgres {db[0]:.0f} (+{len(db) - 1} backends, max {max(db[1:] or [0]):.0f})"
        return text


@dataclass(frozen=True, slots=True)
class CpuMeter:
    """Reads the CPU time of the API server, the database, this process and the machine."""

    server_pid: int
    database: Database

    def peak_rss(self) -> PeakRss:
        """Peak resident memory of the API processes, the database's and this process."""
        return PeakRss(
            api=process_tree_peak_rss_mb(self.server_pid),
            database={pid: peak_rss_mb(pid) for pid in self.database.pids()},
            generator=self_peak_rss_mb(),
        )

    def read(self) -> CpuUse:
        busy, total = host_cpu_ticks()
        return CpuUse(
            server=process_tree_cpu_seconds(self.server_pid),
            database={pid: process_cpu_seconds(pid) for pid in self.database.pids()},
            generator=time.process_time(),
            host=busy / _CLOCK_TICKS,
            host_capacity=total / _CLOCK_TICKS,
        )


@contextmanager
def sqlite_database() -> Iterator[Database]:
    """A registry database in a temporary SQLite file."""
    root = Path(tempfile.mkdtemp(prefix="hub-bench-sqlite-"))
    try:
        yield Database("sqlite", f"sqlite:///{root / 'registry.db'}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_database() -> Iterator[Database]:
    """A registry database in a throw-away PostgreSQL cluster on a free loopback port."""
    from tests.support.postgres import TempPostgres

    # Traversable by the `postgres` user, which runs the server when we are root.
    root = Path(tempfile.mkdtemp(prefix="hub-bench-postgres-"))
    root.chmod(0o755)
    cluster = TempPostgres(root=root / "cluster")
    try:
        cluster.start()
        url = cluster.create_database("bench_registry")
        postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
        yield Database("postgresql", url, lambda: [postmaster, *_children(postmaster)])
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def _children(parent: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the process ended while we looked
        if ppid == parent:
            found.append(int(stat.parent.name))
    return found


@contextmanager
def api_server(
    database_url: str,
    *,
    bootstrap_servers: str = NO_KAFKA,
    workers: int = 1,
    start_timeout_s: float = 60,
    auth: str = "disabled",
) -> Iterator[ApiProcess]:
    """Migrate `database_url`, run `hub api serve` on it in its own process (with `workers`
    worker processes), stop it after.

    Auth is off unless `auth` says `required`: most benchmarks measure the registry and the
    gateway, not key checks (which are cached per key anyway).
    """
    from migrations import migrate
    from tests.support.api_server import spawn_api

    migrate.upgrade(database_url)
    home = Path(tempfile.mkdtemp(prefix="hub-bench-api-"))
    log = home / "api.log"
    process, url = spawn_api(
        home=home,
        database_url=database_url,
        bootstrap_servers=bootstrap_servers,
        log=log,
        auth=auth,
        workers=str(workers),
    )
    server = ApiProcess(base_url=url, pid=process.pid, log=log)
    try:
        _wait_ready(process, server, timeout_s=start_timeout_s)
        yield server
    finally:
        stop_process(process)
        shutil.rmtree(home, ignore_errors=True)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 30 s; wait for the process to end."""
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _wait_ready(process: subprocess.Popen[bytes], server: ApiProcess, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=server.base_url, timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(
                    f"the API server exited with code {process.returncode} before answering:\n"
                    + _tail(server.log)
                )
            try:
                if client.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
    raise RuntimeError(
        f"the API server did not answer GET /healthz within {timeout_s:.0f}s:\n" + _tail(server.log)
    )


def _tail(log: Path, chars: int = 3000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else "(no log)"


@contextmanager
def kafka_and_api(home: Path, *, teams: Sequence[str] = ()) -> Iterator[tuple[str, str]]:
    """A local Kafka broker under `home` and an API server on a fresh SQLite database, both
    stopped on exit: yields (bootstrap servers, API URL). `teams` are created in the database
    first (each with a key), for servers whose callers create feeds owned by them."""
    broker = LocalBroker(
        KafkaSettings(
            broker_home=home / "kafka",
            broker_jars_dir=REPO / ".hub" / "jars" / "kafka",
            broker_port=free_port(),
            controller_port=free_port(),
        )
    )
    broker.start()
    try:
        with (
            sqlite_database() as database,
            _with_teams(database, teams),
            api_server(database.url, bootstrap_servers=broker.bootstrap_servers) as api,
        ):
            yield broker.bootstrap_servers, api.base_url
            print_peak_rss({"Kafka broker": broker.status().pid, "API server": api.pid})
    finally:
        broker.stop()


@contextmanager
def _with_teams(database: Database, teams: Sequence[str]) -> Iterator[None]:
    if teams:
        from migrations import migrate
        from tests.support.hub_client import create_key

        migrate.upgrade(database.url)
        for team in teams:
            create_key(database.url, team=team)
    yield


def local_loader_settings(home: Path, **fields: object) -> LoaderSettings:
    """Loader settings of a benchmark's own Spark: `local[2]`, its warehouse, checkpoints and an
    embedded Derby metastore under `home`, the jars `make jars` fetched; `fields` override."""
    jars = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "jars"
    defaults: dict[str, object] = {
        "master": "local[2]",
        "driver_memory": "1g",
        "shuffle_partitions": 2,
        "warehouse_dir": home / "warehouse",
        "metastore_dir": home / "metastore",
        "metastore_url": f"jdbc:derby:;databaseName={home / 'metastore' / 'db'};create=true",
        "metastore_jars_dir": jars / "metastore",
        "checkpoint_dir": home / "checkpoints",
        "jars_dir": jars / "spark",
    }
    return LoaderSettings(**{**defaults, **fields})  # type: ignore[arg-type]
