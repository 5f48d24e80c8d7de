"""Running the PostgreSQL CDC connector in tests, and reading its topics back as Python values."""

import io
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import psycopg
from confluent_kafka import Consumer, TopicPartition

from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_core.database import create_database_engine
from migrations import migrate
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import SchemaId
from registry.wire import unframe
from tests.support.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def libpq_url(sqlalchemy_url: str) -> str:
    """`postgresql+psycopg://...` as the plain libpq URL the connector takes."""
    return sqlalchemy_url.replace("postgresql+psycopg://", "postgresql://", 1)


@dataclass(frozen=True, slots=True)
class Event:
    """One record of a CDC topic, decoded."""

    offset: int
    key: dict[str, Any] | None
    value: dict[str, Any] | None
    headers: dict[str, str]
    schema_id: SchemaId | None


class CdcEnvironment:
    """A registry database with a team, and the settings a connector process needs."""

    def __init__(self, root: Path, bootstrap: str) -> None:
        self.root = root
        self.bootstrap = bootstrap
        self.registry_url = f"sqlite:///{root / 'registry.db'}"
        migrate.upgrade(self.registry_url)
        self.engine = create_database_engine(self.registry_url)
        TeamStore(self.engine).register(name=TeamName("shop"))
        self.registry = RegistryService(SchemaStore(self.engine), cache_seconds=0.0)
        self.suffix = uuid.uuid4().hex[:8]
        self._schemas: dict[SchemaId, Any] = {}
        self.starts = 0
        self.metrics_url = ""  # `/metrics` of the connector process started last

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HUB_REGISTRY_DATABASE_URL": self.registry_url,
            "HUB_KAFKA_BOOTSTRAP_SERVERS": self.bootstrap,
            "HUB_CONNECT_OFFSETS_TOPIC": f"_cdc_offsets_{self.suffix}",
            "HUB_CONNECT_CONFIGS_TOPIC": f"_cdc_configs_{self.suffix}",
            "HUB_CONNECT_STATUS_TOPIC": f"_cdc_status_{self.suffix}",
        }

    def connector_file(self, name: str, dsn: str, tables: list[str], **source: Any) -> Path:
        """Write a connector file; `source` adds or overrides keys of its `source:` block."""
        lines = [
            f"name: {name}",
            "type: postgres-cdc",
            "owner: shop",
            f"topic_prefix: cdc.{name}",
            "source:",
            "  dsn: ${CDC_TEST_DSN}",
            f"  tables: [{', '.join(tables)}]",
            f"  slot: {name}_slot",
            f"  publication: {name}_pub",
            "  heartbeat_seconds: 1",
            "  max_batch_seconds: 0.2",
        ]
        lines += [f"  {key}: {value}" for key, value in source.items()]
        path = self.root / f"{name}.yaml"
        path.write_text("\n".join(lines) + "\n")
        os.environ["CDC_TEST_DSN"] = dsn
        return path

    def start(self, file: Path, dsn: str) -> subprocess.Popen[bytes]:
        """`hub connect run FILE` in its own process (so it can be killed)."""
        self.starts += 1
        port = free_port()
        self.metrics_url = f"http://127.0.0.1:{port}/metrics"
        log = (self.root / f"{file.stem}.log").open("ab")
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "hub"), "connect", "run", str(file)],
            env={**self.env(), "CDC_TEST_DSN": dsn, "HUB_CONNECT_HEALTH_PORT": str(port)},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )

    @contextmanager
    def running(self, file: Path, dsn: str) -> Iterator[subprocess.Popen[bytes]]:
        process = self.start(file, dsn)
        try:
            yield process
        finally:
            stop(process)

    def log_of(self, file: Path) -> str:
        path = self.root / f"{file.stem}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def read(self, topic: str) -> list[Event]:
        """Every record of `topic` so far, decoded with the writer schemas from the registry."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"cdc-tests-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            metadata = consumer.list_topics(topic, timeout=10)
            partitions = list(metadata.topics[topic].partitions)
            ends = {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions
            }
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            events: list[Event] = []
            remaining = {p for p, end in ends.items() if end > 0}
            while remaining:
                for message in consumer.consume(num_messages=5000, timeout=1.0):
                    if message.error() is not None:
                        continue
                    partition, offset = message.partition(), message.offset()
                    events.append(self._event(message.key(), message.value(), offset, message))
                    if offset >= ends[partition] - 1:
                        remaining.discard(partition)
            return events
        finally:
            consumer.close()

    def _decode(self, data: bytes | None) -> tuple[Any, SchemaId | None]:
        if not data:  # no key, or the empty key of a truncate event
            return None, None
        schema_id, payload = unframe(data)
        if schema_id not in self._schemas:
            self._schemas[schema_id] = self.registry.schema(schema_id=schema_id).parsed
        return fastavro.schemaless_reader(
            io.BytesIO(payload), self._schemas[schema_id], None
        ), schema_id

    def _event(self, key: bytes | None, value: bytes | None, offset: int, message: Any) -> Event:
        decoded_key, _ = self._decode(key)
        decoded_value, schema_id = self._decode(value)
        headers = {k: v.decode() for k, v in (message.headers() or [])}
        return Event(
            offset=offset,
            key=decoded_key,
            value=decoded_value,
            headers=headers,
            schema_id=schema_id,
        )

    def close(self) -> None:
        self.engine.dispose()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def wait_for(condition: Any, *, timeout_s: float, what: str, interval_s: float = 0.5) -> None:
    """Wait until `condition()` is true; fail naming `what` (not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(interval_s)
    raise AssertionError(f"gave up waiting for {what} after {timeout_s:.0f}s")


def replay(events: list[Event]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The table state the events describe: apply by key in order, deletes remove, and a
    column listed as unchanged (TOAST) keeps its previous value."""
    state: dict[tuple[Any, ...], dict[str, Any]] = {}
    for event in events:
        if event.value is None:
            continue  # tombstones repeat the delete before them
        op = event.value["op"]
        if op == "t":
            state.clear()
            continue
        assert event.key is not None
        key = tuple(event.key.values())
        if op == "d":
            state.pop(key, None)
            continue
        row = dict(event.value["after"])
        unchanged = event.headers.get("hub.cdc.unchanged-columns")
        if unchanged:
            for column in unchanged.split(","):
                row[column] = state.get(key, {}).get(column)
        state[key] = row
    return state


def table_rows(dsn: str, table: str, key: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The source table as the connector would render it (text-converted by the caller)."""
    with psycopg.connect(dsn) as conn:
        cursor = conn.execute(f"SELECT * FROM {table}")
        names = [d.name for d in cursor.description or []]
        return {(row[names.index(key)],): dict(zip(names, row, strict=True)) for row in cursor}
