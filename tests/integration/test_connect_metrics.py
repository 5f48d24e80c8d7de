"""`hub connect run`'s Prometheus metrics, scraped from its health port: records published and
dead-lettered, errors by code, states, and each source's lag in its own units."""

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Column, DateTime, Integer, MetaData, Table, create_engine, insert

from tests.support.connect import ConnectHub, connector_file, serving_worker
from tests.support.metrics import value
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

POSITION = datetime(2024, 5, 1, 12, 2, 0)  # the newest timestamp of the JDBC rows (UTC)


def _scrape(url: str) -> str:
    try:
        return httpx.get(f"{url}/metrics", timeout=5).text
    except httpx.ConnectError:
        return ""  # not serving yet


def test_counts_and_lag_follow_what_the_connectors_did(
    tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    lines = tmp_path / "app.log"
    # Three records, two lines that go to the DLQ (not JSON; no `n`), and a line being written.
    lines.write_bytes(b'{"n": 1}\n{"n": 2}\nnot json\n{"m": 1}\n{"n": 3}\n{"n": 4')
    log = connector_file(tmp_path, kind="logfile", owner="erp", source={
        "paths": [str(lines)], "format": "json", "poll_seconds": 0.2,
        "fields": {"n": {"type": "long", "required": True}},
    })  # fmt: skip
    database = f"sqlite:///{tmp_path / 'erp.db'}"
    engine = create_engine(database)
    orders = Table(
        "orders",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("updated_at", DateTime, nullable=False),
    )
    orders.create(engine)
    with engine.begin() as conn:
        conn.execute(insert(orders), [
            {"id": 1, "updated_at": POSITION - timedelta(minutes=1)},
            {"id": 2, "updated_at": POSITION},
        ])  # fmt: skip
    polled = connector_file(tmp_path, kind="jdbc", owner="erp", prefixed=True, source={
        "url": database, "mode": "timestamp", "tables": ["orders"],
        "timestamp_column": "updated_at", "poll_seconds": 0.2,
    })  # fmt: skip
    missing = connector_file(tmp_path, kind="jdbc", owner="erp", prefixed=True, source={
        "url": f"sqlite:///{tmp_path / 'empty.db'}", "mode": "incrementing",
        "tables": ["orders"], "incrementing_column": "id", "poll_seconds": 0.2,
    })  # fmt: skip

    files = [log.file, polled.file, missing.file]
    with serving_worker(connect_hub, files, tmp_path / "worker.log") as url:
        mine = {"connector": log.name}

        def published_and_unread() -> tuple[float | None, ...]:
            text = _scrape(url)
            return (
                value(text, "hub_connector_records_published_total", **mine, topic=log.topic),
                value(text, "hub_connector_logfile_unread_bytes", **mine, path=str(lines)),
            )

        # Counted once Kafka has the batch, and the lag set once its position is committed.
        wait_until(lambda: published_and_unread() == (3, len(b'{"n": 4')), timeout_s=60,
                   what="the log file's records and lag in /metrics")  # fmt: skip
        wait_until(lambda: value(_scrape(url), "hub_connector_jdbc_position_age_seconds",
                                 connector=polled.name, table="orders") is not None,
                   timeout_s=60, what="the JDBC position's age in /metrics")  # fmt: skip
        text = _scrape(url)
        assert value(text, "hub_connector_records_dead_lettered_total", **mine,
                     topic=log.topic) == 2  # fmt: skip
        assert value(text, "hub_connector_records_published_total", connector=polled.name,
                     topic=f"{polled.topic}.orders") == 2  # fmt: skip
        assert value(text, "hub_connector_state", **mine, hub_connector_state="RUNNING") == 1
        assert value(text, "hub_connector_state", **mine, hub_connector_state="FAILED") == 0
        assert f'hub_connector_errors_total{{connector="{log.name}"' not in text

        expected_age = time.time() - POSITION.replace(tzinfo=UTC).timestamp()
        age = value(text, "hub_connector_jdbc_position_age_seconds", connector=polled.name,
                    table="orders")  # fmt: skip
        assert age is not None and expected_age - 5 < age < expected_age + 60

        wait_until(lambda: value(_scrape(url), "hub_connector_state", connector=missing.name,
                                 hub_connector_state="FAILED") == 1,
                   timeout_s=60, what="the failed connector's state")  # fmt: skip
        assert value(_scrape(url), "hub_connector_errors_total", connector=missing.name,
                     code="CONNECTOR_SOURCE_MISMATCH") == 1  # fmt: skip

        with lines.open("ab") as growing:
            growing.write(b"}\n")  # the last line is complete: read, and nothing is left
        wait_until(lambda: published_and_unread() == (4, 0), timeout_s=30,
                   what="the completed line, and no lag, in /metrics")  # fmt: skip
