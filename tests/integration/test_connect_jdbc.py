"""The JDBC polling source on real PostgreSQL and SQLite: each mode, polls, restarts."""

import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    create_engine,
    insert,
    update,
)

from tests.support.connect import running_worker, stored_offsets, write_config
from tests.support.kafka import read_avro
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

T0 = datetime(2024, 5, 1, 12, 0, 0)


def _orders(engine: Engine) -> Table:
    table = Table(
        "orders",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("customer", String(50), nullable=False),
        Column("amount", Numeric(10, 2)),
        Column("updated_at", DateTime, nullable=False),
    )
    table.create(engine)
    return table


def _insert(engine: Engine, table: Table, *ids: int, at: datetime | None = None) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(table),
            [
                {
                    "id": i,
                    "customer": f"c{i}",
                    "amount": Decimal(f"{i}.50"),
                    "updated_at": at or T0 + timedelta(minutes=i),
                }
                for i in ids
            ],
        )


def _connector(tmp_path: Path, url: str, mode: str, **source: Any) -> tuple[str, str, Path]:
    name = f"jdbc-{uuid.uuid4().hex[:8]}"
    prefix = f"erp.{name.replace('-', '_')}"
    columns = {}
    if "incrementing" in mode:
        columns["incrementing_column"] = "id"
    if "timestamp" in mode:
        columns["timestamp_column"] = "updated_at"
    config = {
        "name": name,
        "type": "jdbc",
        "owner": "erp",
        "topic_prefix": prefix,
        "source": {
            "url": url,
            "mode": mode,
            "tables": ["orders"],
            "poll_seconds": 0.2,
            **columns,
            **source,
        },
    }
    return name, f"{prefix}.orders", write_config(tmp_path / f"{name}.yaml", config)


def _position(bootstrap: str, name: str) -> dict[str, Any]:
    return stored_offsets(bootstrap, name).get(str(sorted({"table": "orders"}.items())), {})


def _reached(bootstrap: str, name: str, **expected: Any) -> Callable[[], bool]:
    return lambda: all(_position(bootstrap, name).get(k) == v for k, v in expected.items())


@pytest.mark.parametrize("mode", ["incrementing", "timestamp", "timestamp+incrementing"])
def test_polls_resume_after_restart_without_gaps_or_duplicates(
    mode: str,
    database_url: str,
    tmp_path: Path,
    api_url: str,
    api_database: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
) -> None:
    team_key("erp")
    engine = create_engine(database_url)
    table = _orders(engine)
    _insert(engine, table, 1, 2, 3)
    name, topic, config = _connector(tmp_path, database_url, mode, batch_size=2)
    moved = T0 + timedelta(minutes=5, seconds=30)

    def reached(row: int, at: datetime) -> Callable[[], bool]:
        if mode == "incrementing":
            return _reached(kafka_bootstrap, name, id=row)
        return _reached(kafka_bootstrap, name, ts=at.isoformat())

    with running_worker([config], database_url=api_database, bootstrap=kafka_bootstrap):
        wait_until(reached(3, T0 + timedelta(minutes=3)), timeout_s=60, what="the first rows")
        _insert(engine, table, 4, 5)
        with engine.begin() as conn:  # an update: seen by the timestamp modes only
            conn.execute(
                update(table).where(table.c.id == 1).values(customer="c1-moved", updated_at=moved)
            )
        wait_until(reached(5, moved), timeout_s=60, what="the next poll")
    _insert(engine, table, 6, 7)
    with running_worker([config], database_url=api_database, bootstrap=kafka_bootstrap):
        wait_until(
            reached(7, T0 + timedelta(minutes=7)), timeout_s=60, what="rows added while down"
        )
    engine.dispose()

    rows = [(1, "c1"), (2, "c2"), (3, "c3"), (4, "c4"), (5, "c5")]
    updates = [] if mode == "incrementing" else [(1, "c1-moved")]
    expected = rows + updates + [(6, "c6"), (7, "c7")]
    records = read_avro(api_url, kafka_bootstrap, topic, expected=len(expected))
    assert [(v["id"], v["customer"]) for _k, v in records] == expected
    first = records[0][1]
    assert first["amount"] == Decimal("1.50")
    assert first["updated_at"] == (T0 + timedelta(minutes=1)).replace(tzinfo=UTC)


@pytest.mark.parametrize("mode", ["timestamp", "timestamp+incrementing"])
def test_rows_sharing_a_timestamp_are_never_split_or_skipped(
    mode: str,
    database_url: str,
    tmp_path: Path,
    api_url: str,
    api_database: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
) -> None:
    team_key("erp")
    engine = create_engine(database_url)
    table = _orders(engine)
    _insert(engine, table, 1, 2, 3, 4, 5, at=T0)
    # Within the delay: not read yet, as a row whose transaction may still commit late.
    _insert(engine, table, 6, at=datetime.now(UTC).replace(tzinfo=None))
    name, topic, config = _connector(
        tmp_path, database_url, mode, batch_size=2, timestamp_delay_seconds=3600
    )
    with running_worker([config], database_url=api_database, bootstrap=kafka_bootstrap):
        wait_until(
            _reached(kafka_bootstrap, name, ts=T0.isoformat(), id=5)
            if mode == "timestamp+incrementing"
            else _reached(kafka_bootstrap, name, ts=T0.isoformat()),
            timeout_s=60,
            what="the tied rows",
        )
    engine.dispose()

    records = read_avro(api_url, kafka_bootstrap, topic, expected=5)
    assert sorted(v["id"] for _k, v in records) == [1, 2, 3, 4, 5]


def test_a_failing_source_is_reported_failed_with_its_error(
    tmp_path: Path,
    api_database: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
) -> None:
    team_key("erp")
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    create_engine(url).connect().close()
    name, _topic, config = _connector(tmp_path, url, "incrementing")
    with running_worker([config], database_url=api_database, bootstrap=kafka_bootstrap) as worker:

        def failed() -> bool:
            return worker.status(name) == "FAILED"

        wait_until(failed, timeout_s=60, what="FAILED")
        trace = worker.task(name).status.trace
    assert trace is not None
    assert "table 'orders' does not exist" in trace


def test_a_custom_query_is_polled_into_its_topic(
    database_url: str,
    tmp_path: Path,
    api_url: str,
    api_database: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
) -> None:
    team_key("erp")
    engine = create_engine(database_url)
    table = _orders(engine)
    _insert(engine, table, 1, 2, 3)
    name = f"jdbc-{uuid.uuid4().hex[:8]}"
    topic = f"erp.{name.replace('-', '_')}"
    config = write_config(
        tmp_path / "query.yaml",
        {
            "name": name,
            "type": "jdbc",
            "owner": "erp",
            "topic": topic,
            "source": {
                "url": database_url,
                "mode": "incrementing",
                "query": "SELECT id, customer FROM orders WHERE id <> 2",
                "incrementing_column": "id",
                "key_columns": ["id"],
                "poll_seconds": 0.2,
            },
        },
    )
    with running_worker([config], database_url=api_database, bootstrap=kafka_bootstrap):
        partition = str(sorted({"query": name}.items()))
        wait_until(
            lambda: stored_offsets(kafka_bootstrap, name).get(partition) == {"id": 3},
            timeout_s=60,
            what="the query's rows",
        )
    engine.dispose()

    records = read_avro(api_url, kafka_bootstrap, topic, expected=2)
    assert [v for _k, v in records] == [{"id": 1, "customer": "c1"}, {"id": 3, "customer": "c3"}]
