"""`hub up --demo` as a user runs it: one bad feed, or a dead loader, never stops the hub.

The real command runs as a subprocess with its state in a temporary `HUB_HOME` and free ports:
it starts Kafka, the metastore, the API server and the loader, and publishes the demo feeds.
A second team's feed is poisoned from the start, the loader is killed, bronze tables are
compacted by the loader's scheduled maintenance as they land, and Ctrl-C must leave nothing
behind. One test function: it starts a whole stack of its own.
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyspark.sql import SparkSession

from hub_core.processes import port_open
from tests.conftest import JARS
from tests.support.cli import hub
from tests.support.delta_log import LiveFiles
from tests.support.hub_client import bearer, create_feed
from tests.support.loader import produce_avro
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

# Upper bounds only, for a 2-core machine busy with other tests: Kafka, the metastore, the API
# and the loader's Spark start, and a first batch creates every table, in a few minutes there.
STARTUP_S = 600
LANDING_S = 600
DEMO_BRONZE = ("demo_page_views", "demo_orders", "demo_customers", "demo_products")

# A second team's legitimate feed, which a misbehaving producer with broker access poisons:
# it writes records framed with the id of a recursive schema the team registered under a
# subject of its own (no topic's subject, so the registry allows the recursion). The loader
# cannot land them in the feed's table: the kind of feed that must not stop everyone else's.
POISON_TOPIC = "ledger.transfers"
LEDGER_SCHEMA = {
    "type": "record",
    "name": "Transfer",
    "namespace": "ledger",
    "fields": [
        {"name": "transfer_id", "type": "string"},
        {
            "name": "amount_wei",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 18},
        },
    ],
}
POISON_SUBJECT = "ledger.node"
POISON_SCHEMA = {
    "type": "record",
    "name": "Node",
    "fields": [
        {"name": "value", "type": "int"},
        {"name": "next", "type": ["null", "Node"], "default": None},
    ],
}


def test_hub_up_keeps_landing_through_a_poisoned_feed_and_a_killed_loader_and_stops_clean(
    spark: SparkSession, tmp_path: Path
) -> None:
    stack = HubUp.configure(tmp_path)
    with stack.running() as hub_up:
        hub_up.wait_for_output("The hub is up.", timeout_s=STARTUP_S)
        with stack.probing() as probe:
            # A second team creates a feed, and a producer of its own poisons it in Kafka with
            # records of a recursive schema the loader cannot land, while the demo feeds'
            # tables are being created.
            ledger_key = stack.team_key("ledger")
            create_feed(stack.api_url, ledger_key, topic=POISON_TOPIC, schema=LEDGER_SCHEMA,
                        owner="ledger")  # fmt: skip
            poison_id = stack.register(ledger_key, POISON_SUBJECT, POISON_SCHEMA)
            poisoned_at = datetime.now(UTC)
            chains = [{"value": n, "next": {"value": n + 1, "next": None}} for n in range(3)]
            produce_avro(stack.bootstrap, POISON_TOPIC, poison_id, POISON_SCHEMA, chains)

            # The demo feeds reach bronze all the same (and silver and gold, below).
            tables = Tables(spark, stack.home / "warehouse")
            for table in [f"bronze.{name}" for name in DEMO_BRONZE]:
                tables.wait_for_rows(table, timeout_s=LANDING_S)

            # The poisoned records are quarantined with a reason, as their feed's own failure.
            quarantine = f"quarantine.{POISON_TOPIC.replace('.', '_')}"
            tables.wait_for_rows(quarantine, timeout_s=LANDING_S, at_least=len(chains))
            assert tables.poison_reasons(quarantine) == {"SCHEMA_UNRESOLVABLE": len(chains)}

            # The demo feeds keep landing: records published well after the poisoned feed's
            # records (the loader finds a new topic within seconds) reach their tables.
            tables.wait_for_records_after(poisoned_at, margin_s=15, timeout_s=LANDING_S)

            # The loader is killed: `hub up` says so, restarts it, and landing resumes.
            loader = hub_up.pid_of("loader")
            os.kill(loader, signal.SIGKILL)
            killed_at = datetime.now(UTC)
            hub_up.wait_for_output(f"The loader (pid {loader}) was killed by SIGKILL", timeout_s=60)
            hub_up.wait_for_output("Restarted the loader (pid ", timeout_s=120)
            assert hub_up.pid_of("loader") != loader
            tables.wait_for_records_after(killed_at, margin_s=5, timeout_s=STARTUP_S)

            # Silver and gold follow the demo feeds, built on by the restarted loader.
            for table in [
                "silver.demo_customers_history",
                "silver.demo_products_current",
                "gold.fact_orders",
                "gold.dim_customer",
            ]:
                tables.wait_for_rows(table, timeout_s=LANDING_S)

        # The API and Kafka stayed up the whole time.
        assert probe.failures == [], probe.failures
        assert probe.checks > 0
        assert "The API server (pid" not in hub_up.output()

        hub_up.interrupt()
        assert hub_up.wait(timeout_s=300) == 0, hub_up.output()[-4000:]

    # The loader's scheduled maintenance compacted bronze tables while they were landing.
    commits = (stack.home / "warehouse" / "bronze.db").glob("*/_delta_log/*.json")
    assert any('"operation":"OPTIMIZE"' in commit.read_text() for commit in commits)

    assert processes_of(stack.home) == []
    taken = [port for port in stack.ports.values() if port_open(port)]
    assert taken == [], f"ports still open after Ctrl-C: {taken}"


@dataclass(frozen=True)
class HubUp:
    """How this test runs `hub up --demo`: its home, its ports, its environment."""

    home: Path
    ports: dict[str, int]
    env: dict[str, str]

    @classmethod
    def configure(cls, tmp_path: Path) -> "HubUp":
        home = tmp_path / "hub"
        ports = {name: free_port() for name in ("broker", "controller", "api", "metastore")}
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
        env.update(
            {
                "HUB_HOME": str(home),
                "HUB_KAFKA_BROKER_PORT": str(ports["broker"]),
                "HUB_KAFKA_CONTROLLER_PORT": str(ports["controller"]),
                "HUB_KAFKA_BROKER_JARS_DIR": str(JARS / "kafka"),
                "HUB_API_PORT": str(ports["api"]),
                "HUB_LOADER_METASTORE_PORT": str(ports["metastore"]),
                "HUB_LOADER_METASTORE_JARS_DIR": str(JARS / "metastore"),
                "HUB_LOADER_JARS_DIR": str(JARS / "spark"),
                "HUB_LOADER_MASTER": "local[2]",
                "HUB_LOADER_DRIVER_MEMORY": "1g",
                "HUB_LOADER_SHUFFLE_PARTITIONS": "2",
                "HUB_UP_RESTART_INITIAL_SECONDS": "1",
                "HUB_UP_RESTART_MAX_SECONDS": "10",
                "HUB_UP_STOP_GRACE_SECONDS": "90",
                # Bronze maintenance (OPTIMIZE, VACUUM) runs next to the landing, often.
                "HUB_LOADER_MAINTENANCE_SECONDS": "45",
            }
        )
        return cls(home, ports, env)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['api']}"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports['broker']}"

    def register(self, key: str, subject: str, schema: dict[str, Any]) -> int:
        """Register `schema` under `subject` with a team's key, as a Confluent client would."""
        response = httpx.post(
            f"{self.api_url}/subjects/{subject}/versions",
            headers={**bearer(key), "Content-Type": "application/vnd.schemaregistry.v1+json"},
            json={"schema": json.dumps(schema)},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        schema_id: int = response.json()["id"]
        return schema_id

    @contextlib.contextmanager
    def running(self) -> Iterator["HubUpProcess"]:
        """`hub up --demo` in a session of its own; whatever happens, nothing of it survives."""
        self.home.mkdir(parents=True)
        output = self.home.parent / "hub-up.out"
        with output.open("wb") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "hub_cli.main", "up", "--demo"],
                cwd=self.home.parent,
                env=self.env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        running = HubUpProcess(process, output)
        try:
            yield running
        finally:
            if process.poll() is None:
                running.interrupt()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=300)
            for pid, _ in processes_of(self.home):  # only after a failure: kill what is left
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            process.wait()

    @contextlib.contextmanager
    def probing(self) -> Iterator["Probe"]:
        """Check every second, in the background, that the API answers and Kafka listens."""
        probe = Probe(self.api_url, self.ports["broker"])
        thread = threading.Thread(target=probe.run, daemon=True)
        thread.start()
        try:
            yield probe
        finally:
            probe.stop.set()
            thread.join(timeout=60)

    def team_key(self, team: str) -> str:
        """Create `team` and a key of it with the `hub` command, as an operator would."""
        for args in (("team", "create", team), ("key", "create", "--team", team)):
            result = hub(*args, env=self.env)
            assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout.strip().splitlines()[-1]


@dataclass
class HubUpProcess:
    """The running `hub up` and what it printed."""

    process: subprocess.Popen[bytes]
    output_file: Path

    def output(self) -> str:
        return self.output_file.read_text(errors="replace")

    def wait_for_output(self, text: str, *, timeout_s: float) -> None:
        def seen() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(
                    f"hub up exited ({self.process.returncode}) before printing {text!r}:\n"
                    + self.output()[-4000:]
                )
            return text in self.output()

        try:
            wait_until(seen, timeout_s=timeout_s, what=repr(text))
        except AssertionError as error:
            if self.process.returncode is not None:
                raise  # says so, with the output
            output = self.output()[-4000:]
            raise AssertionError(f"{error}\n--- hub up output ---\n{output}") from None

    def pid_of(self, name: str) -> int:
        """The pid of the newest `name` child `hub up` started."""
        pids = re.findall(rf"started the {name} \(pid (\d+),", self.output())
        assert pids, f"hub up has not started a {name}:\n{self.output()[-4000:]}"
        return int(pids[-1])

    def interrupt(self) -> None:
        """Ctrl-C."""
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)

    def wait(self, *, timeout_s: float) -> int:
        return self.process.wait(timeout=timeout_s)


@dataclass
class Probe:
    """Health checks of the API and the broker port, and those that failed."""

    api_url: str
    broker_port: int
    stop: threading.Event = field(default_factory=threading.Event)
    failures: list[str] = field(default_factory=list)
    checks: int = 0

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.checks += 1
            try:
                status = httpx.get(f"{self.api_url}/healthz", timeout=15).status_code
            except httpx.HTTPError as exc:
                self.failures.append(f"{datetime.now(UTC)}: healthz: {exc!r}")
            else:
                if status != 200:
                    self.failures.append(f"{datetime.now(UTC)}: healthz answered {status}")
            if not port_open(self.broker_port):
                self.failures.append(f"{datetime.now(UTC)}: Kafka's port is closed")


@dataclass(frozen=True)
class Tables:
    """The Delta tables of `hub up`'s warehouse. Waiting reads their logs (a Spark job per poll
    would take CPU from the loader under test); the quarantine's reasons are read with Spark."""

    spark: SparkSession
    warehouse: Path

    def wait_for_rows(self, table: str, *, timeout_s: float, at_least: int = 1) -> None:
        wait_until(
            lambda: self._files(table).rows() >= at_least,
            timeout_s=timeout_s,
            what=f"{at_least} rows in {table}",
            interval_s=2,
        )

    def poison_reasons(self, table: str) -> dict[str, int]:
        """How many rows of a quarantine table have each reason code."""
        rows = self.spark.read.format("delta").load(str(self._path(table)))
        counts = rows.groupBy("_hub_reason_code").count().collect()
        return {row["_hub_reason_code"]: int(row["count"]) for row in counts}

    def wait_for_records_after(
        self, moment: datetime, *, margin_s: float, timeout_s: float
    ) -> None:
        """Wait until every demo bronze table holds a record Kafka took `margin_s` after
        `moment`: records published then were landed."""
        after = moment + timedelta(seconds=margin_s)
        for name in DEMO_BRONZE:
            table = f"bronze.{name}"

            def landed(table: str = table) -> bool:
                newest = self._files(table).newest("_hub_timestamp")
                return newest is not None and newest > after

            wait_until(
                landed,
                timeout_s=timeout_s,
                what=f"{table} to land records published {margin_s:.0f}s after {moment:%X}",
                interval_s=2.0,
            )

    def _files(self, table: str) -> LiveFiles:
        return LiveFiles.of(self._path(table))

    def _path(self, table: str) -> Path:
        database, name = table.split(".")
        return self.warehouse / f"{database}.db" / name


def processes_of(home: Path) -> list[tuple[int, str]]:
    """Processes of this user whose command line or environment names `home`."""
    found = []
    marker = str(home).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except (FileNotFoundError, PermissionError, ProcessLookupError):
            continue
        if marker in cmdline or marker in environ:
            found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found
