"""The JDBC polling source on real PostgreSQL and SQLite: each mode, polls, restarts."""

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

from tests.support.connect import ConnectHub, Connector, connector_file
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


def _connector(tmp_path: Path, url: str, mode: str, **source: Any) -> Connector:
    """A connector polling table `orders` into `<its prefix>.orders` (the `topic` here)."""
    columns = {}
    if "incrementing" in mode:
        columns["incrementing_column"] = "id"
    if "timestamp" in mode:
        columns["timestamp_column"] = "updated_at"
    connector = connector_file(
        tmp_path,
        kind="jdbc",
        owner="erp",
        prefixed=True,
        source={
            "url": url,
            "mode": mode,
            "tables": ["orders"],
            "poll_seconds": 0.2,
            **columns,
            **source,
        },
    )
    return Connector(connector.name, f"{connector.topic}.orders", connector.file)


def _reached(hub: ConnectHub, name: str, **expected: Any) -> Callable[[], bool]:
    """True once connector `name` has committed `expected` as its position in `orders`."""

    def check() -> bool:
        position = hub.offsets(name).get(str(sorted({"table": "orders"}.items())), {})
        return all(position.get(k) == v for k, v in expected.items())

    return check


@pytest.mark.parametrize("mode", ["incrementing", "timestamp", "timestamp+incrementing"])
def test_polls_resume_after_restart_without_gaps_or_duplicates(
    mode: str, database_url: str, tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    engine = create_engine(database_url)
    table = _orders(engine)
    _insert(engine, table, 1, 2, 3)
    connector = _connector(tmp_path, database_url, mode, batch_size=2)
    moved = T0 + timedelta(minutes=5, seconds=30)

    def reached(row: int, at: datetime) -> Callable[[], bool]:
        if mode == "incrementing":
            return _reached(connect_hub, connector.name, id=row)
        return _reached(connect_hub, connector.name, ts=at.isoformat())

    with connect_hub.worker(connector.file):
        wait_until(reached(3, T0 + timedelta(minutes=3)), timeout_s=60, what="the first rows")
        _insert(engine, table, 4, 5)
        with engine.begin() as conn:  # an update: seen by the timestamp modes only
            conn.execute(
                update(table).where(table.c.id == 1).values(customer="c1-moved", updated_at=moved)
            )
        wait_until(reached(5, moved), timeout_s=60, what="the next poll")
    _insert(engine, table, 6, 7)
    with connect_hub.worker(connector.file):
        wait_until(
            reached(7, T0 + timedelta(minutes=7)), timeout_s=60, what="rows added while down"
        )
    engine.dispose()

    rows = [(1, "c1"), (2, "c2"), (3, "c3"), (4, "c4"), (5, "c5")]
    updates = [] if mode == "incrementing" else [(1, "c1-moved")]
    expected = rows + updates + [(6, "c6"), (7, "c7")]
    records = connect_hub.records(connector.topic, expected=len(expected))
    assert [(v["id"], v["customer"]) for _k, v in records] == expected
    first = records[0][1]
    assert first["amount"] == Decimal("1.50")
    assert first["updated_at"] == (T0 + timedelta(minutes=1)).replace(tzinfo=UTC)


@pytest.mark.parametrize("mode", ["timestamp", "timestamp+incrementing"])
def test_rows_sharing_a_timestamp_are_never_split_or_skipped(
    mode: str, database_url: str, tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    engine = create_engine(database_url)
    table = _orders(engine)
    _insert(engine, table, 1, 2, 3, 4, 5, at=T0)
    # Within the delay: not read yet, as a row whose transaction may still commit late.
    _insert(engine, table, 6, at=datetime.now(UTC).replace(tzinfo=None))
    connector = _connector(tmp_path, database_url, mode, batch_size=2, timestamp_delay_seconds=3600)
    with connect_hub.worker(connector.file):
        wait_until(
            _reached(connect_hub, connector.name, ts=T0.isoformat(), id=5)
            if mode == "timestamp+incrementing"
            else _reached(connect_hub, connector.name, ts=T0.isoformat()),
            timeout_s=60,
            what="the tied rows",
        )
    engine.dispose()

    records = connect_hub.records(connector.topic, expected=5)
    assert sorted(v["id"] for _k, v in records) == [1, 2, 3, 4, 5]


def test_a_failing_source_is_reported_failed_with_its_error(
    tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    create_engine(url).connect().close()
    connector = _connector(tmp_path, url, "incrementing")
    with connect_hub.worker(connector.file) as worker:

        def failed() -> bool:
            return worker.status(connector.name) == "FAILED"

        wait_until(failed, timeout_s=60, what="FAILED")
        status = worker.task(connector.name).status
        trace, code = status.trace, status.error_code
    assert trace is not None
    assert "table 'orders' does not exist" in trace
    assert code == 42243  # the source does not match the file: not retried


def test_a_custom_query_is_polled_into_its_topic(
    database_url: str, tmp_path: Path, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    engine = create_engine(database_url)
    table = _orders(engine)
    _insert(engine, table, 1, 2, 3)
    connector = connector_file(
        tmp_path,
        kind="jdbc",
        owner="erp",
        source={
            "url": database_url,
            "mode": "incrementing",
            "query": "SELECT id, customer FROM orders WHERE id <> 2",
            "incrementing_column": "id",
            "key_columns": ["id"],
            "poll_seconds": 0.2,
        },
    )
    with connect_hub.worker(connector.file):
        partition = str(sorted({"query": connector.name}.items()))
        wait_until(
            lambda: connect_hub.offsets(connector.name).get(partition) == {"id": 3},
            timeout_s=60,
            what="the query's rows",
        )
    engine.dispose()

    records = connect_hub.records(connector.topic, expected=2)
    assert [v for _k, v in records] == [{"id": 1, "customer": "c1"}, {"id": 3, "customer": "c3"}]
