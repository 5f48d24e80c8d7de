"""Changes per second from PostgreSQL into Kafka: the hub's CDC connector against Debezium.

Both connectors stream the same workload from the same PostgreSQL server into the same broker,
one after the other, several times; the report gives each one's median and their ratio.

    make bench-jars                       # once: Debezium + Kafka Connect jars into .hub/jars
    .venv/bin/python bench/cdc.py         # 50,000 changes, 3 runs each (a few minutes)
    .venv/bin/python bench/cdc.py --changes 20000 --runs 1 --only hub

Debezium runs in Kafka Connect standalone mode (`ConnectStandalone`) with the JsonConverter
(schemas enabled), because Confluent's Avro converter is not on Maven Central; the hub's
connector writes Confluent-framed Avro after validating every record against its schema.
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
from pathlib import Path

import psycopg
from confluent_kafka import Consumer, TopicPartition

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

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


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def workload(dsn: str, changes: int) -> None:
    """Half inserts, half updates of the inserted rows, in transactions of PER_TRANSACTION."""
    inserts = changes // 2
    with psycopg.connect(dsn, autocommit=True) as conn:
        for start in range(1, inserts + 1, PER_TRANSACTION):
            end = min(start + PER_TRANSACTION - 1, inserts)
            conn.execute(
                "INSERT INTO orders SELECT g, g %% 1000, g * 1.25, 'new', now() "
                "FROM generate_series(%s::bigint, %s::bigint) g",
                (start, end),
            )
        for start in range(1, changes - inserts + 1, PER_TRANSACTION):
            end = min(start + PER_TRANSACTION - 1, changes - inserts)
            conn.execute(
                "UPDATE orders SET status = 'paid', amount = amount + 1, updated_at = now() "
                "WHERE id BETWEEN %s AND %s",
                (start, end),
            )


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


def slot_active(dsn: str, slot: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
    return bool(row and row[0])


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


# Runs `hub connect run FILE` with the connector's thread under cProfile (`--profile`).
_PROFILED = """
import cProfile, sys, threading, time
from connectors.postgres import source
from hub_cli.main import run
original = source.PostgresCdc.run
target = sys.argv[2]
def profiled(self, context):
    profile = cProfile.Profile()
    def dump():
        while True:
            time.sleep(2)
            profile.dump_stats(target)
    threading.Thread(target=dump, daemon=True).start()
    profile.enable()
    original(self, context)
source.PostgresCdc.run = profiled
sys.argv = ["hub", "connect", "run", sys.argv[1]]
run()
"""


def run_hub(stack: Stack, run: int, changes: int, profile: Path | None = None) -> float:
    name = f"hub{run}"
    dsn = stack.database(f"bench_{name}")
    config = stack.root / f"{name}.yaml"
    config.write_text(
        f"name: {name}\ntype: postgres-cdc\nowner: bench\ntopic_prefix: cdc.{name}\n"
        "source:\n  dsn: ${BENCH_DSN}\n  tables: [public.orders]\n"
        f"  slot: {name}_slot\n  publication: {name}_pub\n  snapshot_mode: never\n"
    )
    env = {
        **os.environ,
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
    return _measure(stack, command, env, dsn, f"{name}_slot", f"cdc.{name}.public.orders", changes)


def run_debezium(stack: Stack, run: int, changes: int) -> float:
    name = f"dbz{run}"
    dsn = stack.database(f"bench_{name}")
    topic = f"{name}.public.orders"
    TopicAdmin(KafkaSettings(bootstrap_servers=stack.bootstrap)).create(
        topic, partitions=1, config={}
    )
    worker = stack.root / f"{name}-worker.properties"
    worker.write_text(
        f"bootstrap.servers={stack.bootstrap}\n"
        "key.converter=org.apache.kafka.connect.json.JsonConverter\n"
        "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
        f"offset.storage.file.filename={stack.root / (name + '.offsets')}\n"
        "offset.flush.interval.ms=1000\n"
        f"listeners=http://127.0.0.1:{free_port()}\n"
    )
    connector = stack.root / f"{name}.properties"
    connector.write_text(
        f"name={name}\n"
        "connector.class=io.debezium.connector.postgresql.PostgresConnector\n"
        "plugin.name=pgoutput\n"
        f"database.hostname=127.0.0.1\ndatabase.port={stack.postgres.port}\n"
        f"database.user={stack.postgres.user}\ndatabase.password=\n"
        f"database.dbname=bench_{name}\ntopic.prefix={name}\n"
        "table.include.list=public.orders\n"
        f"slot.name={name}_slot\npublication.name={name}_pub\n"
        "publication.autocreate.mode=filtered\nsnapshot.mode=no_data\n"
    )
    logging_config = stack.root / "log4j2.properties"
    logging_config.write_text(
        "rootLogger.level = WARN\nrootLogger.appenderRef.console.ref = console\n"
        "appender.console.type = Console\nappender.console.name = console\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{HH:mm:ss} %-5p %c{1}: %m%n\n"
        "logger.debezium.name = io.debezium\nlogger.debezium.level = INFO\n"
    )
    java = shutil.which("java") or "java"
    command = [
        java,
        "-Xmx1g",
        f"-Dlog4j2.configurationFile={logging_config}",
        "-cp",
        f"{JARS / 'debezium'}/*",
        "org.apache.kafka.connect.cli.ConnectStandalone",
        str(worker),
        str(connector),
    ]
    return _measure(stack, command, dict(os.environ), dsn, f"{name}_slot", topic, changes)


def _measure(
    stack: Stack,
    command: list[str],
    env: dict[str, str],
    dsn: str,
    slot: str,
    topic: str,
    changes: int,
) -> float:
    log = (stack.root / f"{slot}.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait(lambda: slot_active(dsn, slot), timeout_s=180, what=f"{slot} to stream")
        time.sleep(1.0)  # let the connector settle into its streaming loop
        start = time.monotonic()
        workload(dsn, changes)
        written = time.monotonic() - start
        wait(lambda: end_offset(stack.bootstrap, topic) >= changes, timeout_s=900, what=topic)
        elapsed = time.monotonic() - start
        progress(f"  {topic}: {changes} changes in {elapsed:.1f}s (workload {written:.1f}s)")
        return changes / elapsed
    except RuntimeError:
        log.flush()
        tail = (stack.root / f"{slot}.log").read_text(errors="replace").splitlines()[-30:]
        progress("connector log (last lines):\n" + "\n".join(tail))
        raise
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=["hub", "debezium"], default=None)
    parser.add_argument(
        "--profile", type=Path, default=None, help="Write a cProfile of the hub connector here."
    )
    args = parser.parse_args()
    if args.only != "hub" and not (JARS / "debezium").is_dir():
        sys.exit(f"Debezium jars are missing in {JARS / 'debezium'}: run `make bench-jars` first.")
    # SIGTERM stops the benchmark like Ctrl-C, so the broker and PostgreSQL are stopped too.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    root = Path(tempfile.mkdtemp(prefix="hub-bench-cdc-"))
    root.chmod(0o755)
    results: dict[str, list[float]] = {"hub": [], "debezium": []}
    try:
        with Stack(root).running() as stack:
            for run in range(1, args.runs + 1):
                if args.only in (None, "hub"):
                    progress(f"run {run}: hub connector")
                    results["hub"].append(run_hub(stack, run, args.changes, args.profile))
                if args.only in (None, "debezium"):
                    progress(
                        f"run {run}: Debezium {_debezium_version()} (Kafka Connect standalone)"
                    )
                    results["debezium"].append(run_debezium(stack, run, args.changes))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nPostgreSQL -> Kafka, {args.changes} changes (inserts and updates), median of runs")
    medians = {k: statistics.median(v) for k, v in results.items() if v}
    for name, rate in medians.items():
        runs = ", ".join(f"{r:,.0f}" for r in results[name])
        print(f"  {name:9s} {rate:10,.0f} changes/s   (runs: {runs})")
    if len(medians) == 2:
        print(f"  ratio hub/debezium: {medians['hub'] / medians['debezium']:.2f}")


def _debezium_version() -> str:
    found = sorted((JARS / "debezium").glob("debezium-connector-postgres-*.jar"))
    return found[0].stem.removeprefix("debezium-connector-postgres-") if found else "?"


if __name__ == "__main__":
    main()
