"""PostgreSQL into Kafka: the hub's CDC connector against Debezium, streaming and snapshot.

Both connectors read the same workload from the same PostgreSQL server into the same broker,
one after the other (interleaved, so both see the same machine), after a warm-up run each that
is not counted; the report gives each one's median, their ratio and each process's peak RSS.

    make bench-jars                       # once: Debezium + Kafka Connect jars into .hub/jars
    .venv/bin/python bench/cdc.py         # 200,000 changes and a 1,000,000-row snapshot, 3 runs
    .venv/bin/python bench/cdc.py --changes 50000 --runs 1 --parts streaming --only hub

Debezium runs in Kafka Connect standalone mode (`ConnectStandalone`), tuned for throughput as
its documentation and Kafka Connect's advise (`DEBEZIUM_CONNECTOR`, `CONNECT_WORKER`), with the
JsonConverter without embedded schemas, because Confluent's Avro converter is not on Maven
Central. The hub's connector writes Confluent-framed Avro after validating every record against
its registered schema, with its throughput settings (`HUB_SOURCE`).
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import (  # noqa: E402
    peak_rss_mb,
    process_tree_cpu_seconds,
    spawned_children,
)
from catalog.teams import TeamStore  # noqa: E402
from catalog.types import TeamName  # noqa: E402
from hub_core.database import create_database_engine  # noqa: E402
from hub_kafka.admin import TopicAdmin  # noqa: E402
from hub_kafka.local_broker import LocalBroker  # noqa: E402
from hub_kafka.security import client_config  # noqa: E402
from hub_kafka.settings import KafkaSettings  # noqa: E402
from migrations import migrate  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.postgres import TempPostgres  # noqa: E402

HUB_HOME = Path(os.environ.get("HUB_HOME", REPO / ".hub"))
JARS = HUB_HOME / "jars"
PER_TRANSACTION = 500
TABLE_SQL = (
    "CREATE TABLE orders (id bigint PRIMARY KEY, customer int NOT NULL, "
    "amount numeric(12,2) NOT NULL, status text NOT NULL, updated_at timestamptz NOT NULL)"
)
ROWS_SQL = (
    "INSERT INTO orders SELECT g, g %% 1000, g * 1.25, 'new', now() "
    "FROM generate_series(%s::bigint, %s::bigint) g"
)

# Debezium's PostgreSQL connector, tuned for throughput as its documentation advises: larger
# batches and queue between the streaming thread and Kafka Connect, a short poll interval, and
# a larger fetch size for snapshot reads (one table: more snapshot threads do not help).
DEBEZIUM_CONNECTOR = {
    "max.batch.size": "20480",
    "max.queue.size": "81920",
    "poll.interval.ms": "50",
    "snapshot.fetch.size": "20480",
    "snapshot.max.threads": "1",
}
# The Kafka Connect worker: its producer tuned as Kafka Connect's throughput advice says (larger
# batches, a linger, lz4 as the hub uses), JSON without embedded schemas, offsets flushed every
# 10 s (standalone mode writes them to a local file).
CONNECT_WORKER = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "false",
    "value.converter.schemas.enable": "false",
    "offset.flush.interval.ms": "10000",
    "producer.linger.ms": "10",
    "producer.batch.size": "1048576",
    "producer.compression.type": "lz4",
}
# The hub's connector, with its documented throughput settings (connector file and environment).
# One snapshot process and one stream process per core of the 2-core machine (Debezium's
# `snapshot.max.threads` splits by table only, so one table is one thread there).
HUB_SOURCE = {
    "max_batch_events": "20000",
    "snapshot_batch_rows": "10000",
    "snapshot_processes": "2",
    "stream_processes": "2",
}
HUB_ENVIRONMENT = {"HUB_KAFKA_LINGER_MS": "10"}  # the hub's producer always compresses with lz4


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def workload(dsn: str, changes: int, *, first_id: int = 1) -> None:
    """Half inserts of new rows from `first_id` on, half updates of them, in transactions of
    PER_TRANSACTION."""
    inserts = changes // 2
    last = first_id + inserts - 1
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(first_id, last + 1, PER_TRANSACTION):
            conn.execute(ROWS_SQL, (start, min(start + PER_TRANSACTION - 1, last)))
        updates_last = first_id + changes - inserts - 1
        for start in range(first_id, updates_last + 1, PER_TRANSACTION):
            conn.execute(
                "UPDATE orders SET status = 'paid', amount = amount + 1, updated_at = now() "
                "WHERE id BETWEEN %s AND %s",
                (start, min(start + PER_TRANSACTION - 1, updates_last)),
            )


def fill(dsn: str, rows: int) -> None:
    """`rows` rows in the table before a connector starts, for the snapshot."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(1, rows + 1, 100_000):
            conn.execute(ROWS_SQL, (start, min(start + 99_999, rows)))
        conn.execute("VACUUM ANALYZE orders")


def end_offset(bootstrap: str, topic: str) -> int:
    kafka = KafkaSettings(bootstrap_servers=bootstrap)
    consumer = Consumer({**client_config(kafka), "group.id": "bench-cdc-watch"})
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            return 0
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in metadata.topics[topic].partitions
        )
    finally:
        consumer.close()


def wait(condition: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what} after {timeout_s:.0f}s")
        time.sleep(0.1)


def _streams(dsn: str, slot: str) -> bool:
    return bool(slot_state(dsn, slot))


def slot_state(dsn: str, slot: str) -> bool | None:
    """None while the slot does not exist, then whether a connection streams from it."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    return None if row is None else bool(row[0])


class Stack:
    """The broker, the PostgreSQL server and the hub's registry database of one benchmark."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.postgres = TempPostgres(root=root / "postgres")
        settings = KafkaSettings(
            broker_home=root / "kafka",
            broker_jars_dir=JARS / "kafka",
            broker_port=free_port(),
            controller_port=free_port(),
        )
        self.broker = LocalBroker(settings)
        self.kafka = settings
        self.registry_url = f"sqlite:///{root / 'registry.db'}"

    @contextmanager
    def running(self) -> Iterator["Stack"]:
        progress("starting PostgreSQL and Kafka")
        self.postgres.start()
        try:
            self.broker.start()
            try:
                migrate.upgrade(self.registry_url)
                engine = create_database_engine(self.registry_url)
                TeamStore(engine).register(name=TeamName("bench"))
                engine.dispose()
                yield self
            finally:
                self.broker.stop()
        finally:
            self.postgres.stop()

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap_servers

    def database(self, name: str) -> str:
        url = self.postgres.create_database(name).replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(TABLE_SQL)
        return url


@dataclass(frozen=True, slots=True)
class Run:
    """One measured run of one connector."""

    events: int
    seconds: float
    cpu_seconds: float  # of the connector's process (all its threads, its helpers) in the run
    peak_rss_mb: float  # of the connector's process, read just before it was stopped
    load: str  # the load average when the run ended
    helper_peak_rss_mb: float = 0.0  # the largest of the hub's helper processes

    @property
    def rate(self) -> float:
        return self.events / self.seconds

    @property
    def cpu_us(self) -> float:
        """CPU time per event: steadier than the rate on a busy machine."""
        return self.cpu_seconds / self.events * 1e6


@dataclass(frozen=True, slots=True)
class Connector:
    """How to start one connector on one database: its command, environment and topic."""

    command: list[str]
    env: dict[str, str]
    slot: str
    topic: str


# Runs `hub connect run FILE` with the connector's threads under cProfile (`--profile`): the
# reading thread to FILE, the publishing thread to FILE.publish.
_PROFILED = """
import cProfile, sys, threading, time
from connectors.postgres import publishing, source
from hub_cli.main import run
target = sys.argv[2]
def profiled(original, path):
    def wrapper(*args):
        profile = cProfile.Profile()
        def dump():
            while True:
                time.sleep(2)
                profile.dump_stats(path)
        threading.Thread(target=dump, daemon=True).start()
        profile.enable()
        return original(*args)
    return wrapper
source.PostgresCdc.run = profiled(source.PostgresCdc.run, target)
publishing.BatchPublisher._run = profiled(publishing.BatchPublisher._run, target + ".publish")
sys.argv = ["hub", "connect", "run", sys.argv[1]]
run()
"""


def hub_connector(
    stack: Stack, name: str, dsn: str, *, snapshot: bool, profile: Path | None
) -> Connector:
    config = stack.root / f"{name}.yaml"
    # A snapshot run measures the snapshot alone: the stream after it stays in one process,
    # whose helper would start (and be counted) as the snapshot ends.
    source = {**HUB_SOURCE, "stream_processes": "1"} if snapshot else HUB_SOURCE
    tuned = "".join(f"  {key}: {value}\n" for key, value in source.items())
    config.write_text(
        f"name: {name}\ntype: postgres-cdc\nowner: bench\ntopic_prefix: cdc.{name}\n"
        "source:\n  dsn: ${BENCH_DSN}\n  tables: [public.orders]\n"
        f"  slot: {name}_slot\n  publication: {name}_pub\n"
        f"  snapshot_mode: {'initial' if snapshot else 'never'}\n{tuned}"
    )
    env = {
        **os.environ,
        **HUB_ENVIRONMENT,
        "BENCH_DSN": dsn,
        "HUB_REGISTRY_DATABASE_URL": stack.registry_url,
        "HUB_KAFKA_BOOTSTRAP_SERVERS": stack.bootstrap,
        "HUB_CONNECT_OFFSETS_TOPIC": f"_bench_offsets_{name}",
        "HUB_CONNECT_CONFIGS_TOPIC": f"_bench_configs_{name}",
        "HUB_CONNECT_STATUS_TOPIC": f"_bench_status_{name}",
    }
    command = [str(Path(sys.executable).parent / "hub"), "connect", "run", str(config)]
    if profile is not None:
        command = [sys.executable, "-c", _PROFILED, str(config), str(profile)]
    return Connector(command, env, f"{name}_slot", f"cdc.{name}.public.orders")


def debezium_connector(stack: Stack, name: str, *, snapshot: bool) -> Connector:
    topic = f"{name}.public.orders"
    TopicAdmin(KafkaSettings(bootstrap_servers=stack.bootstrap)).create(
        topic, partitions=1, config={}
    )
    worker = stack.root / f"{name}-worker.properties"
    worker_settings = {
        "bootstrap.servers": stack.bootstrap,
        "offset.storage.file.filename": str(stack.root / f"{name}.offsets"),
        "listeners": f"http://127.0.0.1:{free_port()}",
        **CONNECT_WORKER,
    }
    worker.write_text("".join(f"{k}={v}\n" for k, v in worker_settings.items()))
    connector = stack.root / f"{name}.properties"
    connector_settings = {
        "name": name,
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": str(stack.postgres.port),
        "database.user": stack.postgres.user,
        "database.password": "",
        "database.dbname": f"bench_{name}",
        "topic.prefix": name,
        "table.include.list": "public.orders",
        "slot.name": f"{name}_slot",
        "publication.name": f"{name}_pub",
        "publication.autocreate.mode": "filtered",
        "snapshot.mode": "initial" if snapshot else "no_data",
        **DEBEZIUM_CONNECTOR,
    }
    connector.write_text("".join(f"{k}={v}\n" for k, v in connector_settings.items()))
    logging_config = stack.root / "log4j2.properties"
    logging_config.write_text(
        "rootLogger.level = WARN\nrootLogger.appenderRef.console.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %-5p %c{1}: %m%n\n"
        "logger.debezium.name = io.debezium\nlogger.debezium.level = INFO\n"
    )
    command = [
        shutil.which("java") or "java",
        "-Xmx1g",
        f"-Dlog4j2.configurationFile={logging_config}",
        "-cp",
        f"{JARS / 'debezium'}/*",
        "org.apache.kafka.connect.cli.ConnectStandalone",
        str(worker),
        str(connector),
    ]
    return Connector(command, dict(os.environ), f"{name}_slot", topic)


def connector_for(
    stack: Stack, side: str, name: str, dsn: str, *, snapshot: bool, profile: Path | None
) -> Connector:
    if side == "hub":
        return hub_connector(stack, name, dsn, snapshot=snapshot, profile=profile)
    return debezium_connector(stack, name, snapshot=snapshot)


def streaming_runs(
    stack: Stack, sides: list[str], *, runs: int, changes: int, warmup: int, profile: Path | None
) -> dict[str, list[Run]]:
    """Changes made while the connectors stream, each connector one process for all its runs
    (so the warm-up warms its JIT or caches too): from a workload's start until all its changes
    are in Kafka. The runs alternate between the connectors."""
    results: dict[str, list[Run]] = {side: [] for side in sides}
    started: dict[str, tuple[Connector, str, subprocess.Popen[bytes]]] = {}
    written = dict.fromkeys(sides, 0)
    try:
        for side in sides:
            name = f"{side[:3]}s"
            dsn = stack.database(f"bench_{name}")
            connector = connector_for(stack, side, name, dsn, snapshot=False, profile=profile)
            started[side] = (connector, dsn, _start(stack, connector))
            wait(partial(_streams, dsn, connector.slot), timeout_s=180, what=connector.slot)
        time.sleep(1.0)  # let the connectors settle into their streaming loops

        def measured(side: str, count: int) -> Run:
            connector, dsn, process = started[side]
            cpu = process_tree_cpu_seconds(process.pid)
            start = time.monotonic()
            workload(dsn, count, first_id=written[side] // 2 + 1)
            took = time.monotonic() - start
            written[side] += count
            wait(lambda: end_offset(stack.bootstrap, connector.topic) >= written[side],
                 timeout_s=1800, what=connector.topic)  # fmt: skip
            elapsed = time.monotonic() - start
            cpu = process_tree_cpu_seconds(process.pid) - cpu
            helpers = [peak_rss_mb(helper) for helper in spawned_children(process.pid)]
            run = Run(count, elapsed, cpu, peak_rss_mb(process.pid), load_average(),
                      max(helpers, default=0.0))  # fmt: skip
            progress(f"  {connector.topic}: {count} changes in {elapsed:.1f}s (workload "
                     f"{took:.1f}s), {run.rate:,.0f}/s, CPU {run.cpu_us:.0f} us/change, peak RSS "
                     f"{run.peak_rss_mb:,.0f} MB{_helpers_text(run)}, load {run.load}")  # fmt: skip
            return run

        for side in sides:
            if warmup:
                progress(f"warm-up: {side} streaming, {warmup} changes (not counted)")
                measured(side, warmup)
        for number in range(1, runs + 1):
            for side in sides:
                progress(f"run {number}: {side} streaming, {changes} changes")
                results[side].append(measured(side, changes))
    except RuntimeError:
        for connector, _, _ in started.values():
            _show_log(stack, connector)
        raise
    finally:
        for _, _, process in started.values():
            _stop(process)
    return results


def snapshot_run(stack: Stack, side: str, name: str, rows: int, profile: Path | None) -> Run:
    """A table of `rows` rows read by a new connector: from the moment its slot exists (both
    create it first, then read the table) until every row is in Kafka."""
    dsn = stack.database(f"bench_{name}")
    fill(dsn, rows)
    connector = connector_for(stack, side, name, dsn, snapshot=True, profile=profile)

    def measure(pid: int) -> tuple[float, float, float, str]:
        launched = time.monotonic()
        wait(lambda: slot_state(dsn, connector.slot) is not None, timeout_s=180, what="the slot")
        cpu = process_tree_cpu_seconds(pid)
        start = time.monotonic()
        helpers: dict[int, float] = {}  # the hub's snapshot helpers: peak RSS, seen while alive

        def done() -> bool:
            for helper in spawned_children(pid):
                helpers[helper] = peak_rss_mb(helper) or helpers.get(helper, 0.0)
            return end_offset(stack.bootstrap, connector.topic) >= rows

        wait(done, timeout_s=3600, what=connector.topic)
        elapsed = time.monotonic() - start
        # Helpers end as the snapshot does; their CPU counts once the connector waited for them.
        wait(lambda: not spawned_children(pid), timeout_s=60, what="the snapshot's helpers")
        cpu = process_tree_cpu_seconds(pid) - cpu
        note = f"({time.monotonic() - launched:.1f}s from the process's start)"
        return elapsed, cpu, max(helpers.values(), default=0.0), note

    return _run(stack, connector, rows, measure)


def _start(stack: Stack, connector: Connector) -> subprocess.Popen[bytes]:
    with (stack.root / f"{connector.slot}.log").open("ab") as log:
        return subprocess.Popen(
            connector.command, env=connector.env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _show_log(stack: Stack, connector: Connector) -> None:
    tail = (stack.root / f"{connector.slot}.log").read_text(errors="replace").splitlines()[-30:]
    progress(f"{connector.slot} log (last lines):\n" + "\n".join(tail))


def _run(
    stack: Stack,
    connector: Connector,
    events: int,
    measure: Callable[[int], tuple[float, float, float, str]],
) -> Run:
    process = _start(stack, connector)
    try:
        elapsed, cpu, helper_rss, note = measure(process.pid)
        rss = peak_rss_mb(process.pid)  # the connector is still running: its high-water mark
        run = Run(events, elapsed, cpu, rss, load_average(), helper_rss)
        progress(f"  {connector.topic}: {events} in {elapsed:.1f}s {note}, {run.rate:,.0f}/s, "
                 f"CPU {run.cpu_us:.0f} us/row{' (its helpers included)' if helper_rss else ''}, "
                 f"peak RSS {rss:,.0f} MB"
                 f"{_helpers_text(run)}, load {run.load}")  # fmt: skip
        return run
    except RuntimeError:
        _show_log(stack, connector)
        raise
    finally:
        _stop(process)


def _helpers_text(run: Run) -> str:
    if not run.helper_peak_rss_mb:
        return ""
    return f" (each helper process at most {run.helper_peak_rss_mb:,.0f} MB)"


def report(title: str, unit: str, results: dict[str, list[Run]]) -> None:
    print(f"\n{title}, median of runs")
    medians = {side: statistics.median(r.rate for r in runs) for side, runs in results.items()
               if runs}  # fmt: skip
    for side, runs in results.items():
        if not runs:
            continue
        rates = ", ".join(f"{r.rate:,.0f}" for r in runs)
        cpu = statistics.median(r.cpu_us for r in runs)
        rss = max(r.peak_rss_mb for r in runs)
        helpers = max(runs, key=lambda r: r.helper_peak_rss_mb)
        print(f"  {side:9s} {medians[side]:10,.0f} {unit}/s   (runs: {rates}); CPU {cpu:.0f} us "
              f"per {unit[:-1]}; peak RSS {rss:,.0f} MB{_helpers_text(helpers)}; "
              f"load {runs[-1].load}")  # fmt: skip
    if len(medians) == 2:
        print(f"  ratio hub/debezium: {medians['hub'] / medians['debezium']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=200_000, help="Changes per streaming run.")
    parser.add_argument("--rows", type=int, default=1_000_000, help="Rows of the snapshot table.")
    parser.add_argument("--runs", type=int, default=3, help="Measured runs per connector.")
    parser.add_argument(
        "--warmup", type=int, default=200_000, help="Changes (and rows) of the unmeasured warm-up."
    )
    parser.add_argument(
        "--parts", default="streaming,snapshot", help="streaming, snapshot or both (default)."
    )
    parser.add_argument("--only", choices=["hub", "debezium"], default=None)
    parser.add_argument(
        "--profile", type=Path, default=None, help="Write a cProfile of the hub connector here."
    )
    args = parser.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not set(parts) <= {"streaming", "snapshot"}:
        sys.exit("--parts takes streaming, snapshot or both, comma-separated")
    sides = [args.only] if args.only else ["hub", "debezium"]
    if "debezium" in sides and not (JARS / "debezium").is_dir():
        sys.exit(f"Debezium jars are missing in {JARS / 'debezium'}: run `make bench-jars` first.")
    # SIGTERM stops the benchmark like Ctrl-C, so the broker and PostgreSQL are stopped too.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    root = Path(tempfile.mkdtemp(prefix="hub-bench-cdc-"))
    root.chmod(0o755)
    version = _debezium_version()
    progress(f"{os.cpu_count()} cores, load average {load_average()}")
    progress(f"hub: {HUB_SOURCE} {HUB_ENVIRONMENT}")
    progress(f"Debezium {version}: {DEBEZIUM_CONNECTOR}, worker {CONNECT_WORKER}")
    streaming: dict[str, list[Run]] = {side: [] for side in sides}
    snapshots: dict[str, list[Run]] = {side: [] for side in sides}
    try:
        with Stack(root).running() as stack:
            if "streaming" in parts:
                streaming = streaming_runs(stack, sides, runs=args.runs, changes=args.changes,
                                           warmup=args.warmup, profile=args.profile)  # fmt: skip
            if "snapshot" in parts:
                # A snapshot is a connector's first start: a fresh process each time. The
                # warm-up run (not counted) warms the server's caches and the broker.
                for side in sides if args.warmup else []:
                    progress(f"warm-up: {side} snapshot, {args.warmup} rows (not counted)")
                    snapshot_run(stack, side, f"{side[:3]}ws", args.warmup, None)
                for run in range(1, args.runs + 1):
                    for side in sides:
                        progress(f"run {run}: {side} snapshot, {args.rows} rows")
                        profile = args.profile if side == "hub" else None
                        snapshots[side].append(
                            snapshot_run(stack, side, f"{side[:3]}{run}s", args.rows, profile)
                        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nhub: postgres-cdc {HUB_SOURCE}, {HUB_ENVIRONMENT}; Debezium {version}")
    if "streaming" in parts:
        report(f"Streaming, {args.changes} changes (inserts and updates)", "changes", streaming)
    if "snapshot" in parts:
        report(f"Snapshot of {args.rows} rows (snapshot mode initial)", "rows", snapshots)
    print(f"\nload average at the end: {load_average()}")


def _debezium_version() -> str:
    found = sorted((JARS / "debezium").glob("debezium-connector-postgres-*.jar"))
    return found[0].stem.removeprefix("debezium-connector-postgres-") if found else "?"


if __name__ == "__main__":
    main()
