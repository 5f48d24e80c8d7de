"""A CDC connector whose PostgreSQL server restarts: it retries, stays RUNNING, loses nothing.

The server is one of this test's own (the session's is shared by other tests), stopped and
started while `hub connect run` streams from it. The connector's status is read the way the API
reads it (the status topic, through `ControlPlane`) all along.
"""

import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from connectors.control import ControlPlane
from connectors.settings import ConnectSettings
from hub_core.errors import ErrorCode, HubError
from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from tests.support.cdc import CdcEnvironment, libpq_url, wait_for
from tests.support.postgres import TempPostgres

pytestmark = pytest.mark.integration


@pytest.fixture
def own_postgres() -> Iterator[TempPostgres]:
    """A PostgreSQL cluster this test may stop and start."""
    root = Path(tempfile.mkdtemp(prefix="hub-postgres-outage-"))
    root.chmod(0o755)
    cluster = TempPostgres(root=root / "cluster")
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


class StatusWatch:
    """Reads the connector's reported status over and over in the background, keeping each."""

    def __init__(self, control: ControlPlane, name: str) -> None:
        self.samples: list[dict[str, Any]] = []
        self._control = control
        self._name = name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="status-watch", daemon=True)

    def __enter__(self) -> "StatusWatch":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                status = self._control.status(self._name)
            except HubError:  # not announced yet
                pass
            else:
                if status["tasks"]:
                    self.samples.append(status["tasks"][0])
            self._stop.wait(0.1)

    @property
    def latest(self) -> dict[str, Any]:
        return self.samples[-1] if self.samples else {}

    def retrying(self, attempts: int) -> bool:
        return (self.latest.get("retry") or {}).get("attempts", 0) >= attempts


def _insert(dsn: str, ids: range) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for n in ids:  # one transaction each, so the stream has many positions to confirm
            conn.execute("INSERT INTO orders (id, note) VALUES (%s, %s)", (n, f"order {n}"))


def _published_ids(cdc: CdcEnvironment, topic: str) -> set[int]:
    try:
        events = cdc.read(topic)
    except Exception:  # the topic does not exist yet
        return set()
    return {e.value["after"]["id"] for e in events if e.value is not None and e.value["after"]}


def test_cdc_connector_rides_out_a_postgres_restart_without_failing(
    kafka_bootstrap: str,
    own_postgres: TempPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUB_CONNECT_HEARTBEAT_SECONDS", "1")
    monkeypatch.setenv("HUB_CONNECT_RETRY_BACKOFF_SECONDS", "0.5")
    monkeypatch.setenv("HUB_CONNECT_RETRY_BACKOFF_MAX_SECONDS", "2")
    dsn = libpq_url(own_postgres.create_database("shop"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text)")
    cdc = CdcEnvironment(tmp_path, kafka_bootstrap)
    file = cdc.connector_file("outage", dsn, ["public.orders"])
    topic = "cdc.outage.public.orders"
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)
    control = ControlPlane(
        ConnectSettings(
            offsets_topic=f"_cdc_offsets_{cdc.suffix}",
            configs_topic=f"_cdc_configs_{cdc.suffix}",
            status_topic=f"_cdc_status_{cdc.suffix}",
        ),
        kafka,
        admin=TopicAdmin(kafka),
        producer=None,
    )
    try:
        with cdc.running(file, dsn) as process, StatusWatch(control, "outage") as watch:
            wait_for(lambda: "streaming slot" in cdc.log_of(file), timeout_s=120, what="the stream")
            _insert(dsn, range(1, 11))
            wait_for(
                lambda: _published_ids(cdc, topic) >= set(range(1, 11)),
                timeout_s=60,
                what="the first rows in Kafka",
            )
            # Changes committed just before the server goes down may not be confirmed yet:
            # the connector must stream them after the restart, from its stored position.
            _insert(dsn, range(11, 21))
            own_postgres.stop()
            wait_for(
                lambda: watch.retrying(attempts=2),
                timeout_s=60,
                what="the task to report that it retries",
            )
            own_postgres.start()
            _insert(dsn, range(21, 31))
            wait_for(
                lambda: _published_ids(cdc, topic) >= set(range(1, 31)),
                timeout_s=120,
                what="every row in Kafka after the restart",
            )
            wait_for(
                lambda: watch.latest.get("state") == "RUNNING" and "retry" not in watch.latest,
                timeout_s=30,
                what="the task to report that it recovered",
            )
            assert process.poll() is None, cdc.log_of(file)
        published = _published_ids(cdc, topic)
    finally:
        cdc.close()

    states = [sample["state"] for sample in watch.samples]
    assert "FAILED" not in states, [s.get("trace") for s in watch.samples if s.get("trace")]
    retrying = [s for s in watch.samples if s.get("retry")]
    assert retrying, "no reported status said the task was retrying"
    assert {s["state"] for s in retrying} == {"RUNNING"}
    last = retrying[-1]
    assert last["retry"]["last_error_code"] == ErrorCode.CDC_SOURCE_UNAVAILABLE
    assert "CdcSourceUnavailable" in last["retry"]["last_error"]
    assert last["trace"].startswith("retrying after")
    assert published == set(range(1, 31))
