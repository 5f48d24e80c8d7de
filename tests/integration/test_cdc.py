"""PostgreSQL CDC end to end: a real server, `hub connect run`, a real broker, the registry."""

import json
import os
import signal
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.cdc import CdcEnvironment, Event, libpq_url, replay, wait_for
from tests.support.metrics import value

pytestmark = pytest.mark.integration

SETUP = """
CREATE TYPE mood AS ENUM ('happy', 'sad');
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    amount numeric(10,2) NOT NULL,
    note text,
    placed_at timestamptz,
    local_at timestamp,
    day date,
    tags int[],
    attrs jsonb,
    feeling mood,
    ref uuid,
    raw bytea,
    ratio double precision,
    big numeric
);
COMMENT ON COLUMN orders.amount IS 'Order total in EUR';
CREATE TABLE items (id int PRIMARY KEY, name text, qty int);
ALTER TABLE items REPLICA IDENTITY FULL;
CREATE TABLE audit (at timestamptz DEFAULT now(), message text);
INSERT INTO orders VALUES
    (1, 10.50, 'first', '2024-05-01 12:00:00+00', '2024-05-01 12:00:00', '2024-05-01',
     '{1,2,NULL}', '{"a": 1}', 'happy', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '\\x0102',
     0.25, 3.14159),
    (2, 20.00, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO items VALUES (1, 'pen', 3), (2, 'ink', 5);
INSERT INTO audit (message) VALUES ('before');
"""


@pytest.fixture
def cdc(kafka_bootstrap: str, tmp_path: Path) -> Iterator[CdcEnvironment]:
    environment = CdcEnvironment(tmp_path, kafka_bootstrap)
    yield environment
    environment.close()


def _execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _metric(
    cdc: CdcEnvironment, name: str, *, connector: str = "shop", **labels: str
) -> float | None:
    """A series of `connector` in the running connector process's `/metrics`."""
    try:
        text = httpx.get(cdc.metrics_url, timeout=5).text
    except httpx.ConnectError:
        return None
    return value(text, name, connector=connector, **labels)


def _ops(events: list[Event]) -> list[str]:
    return [e.value["op"] if e.value is not None else "tombstone" for e in events]


def test_snapshot_then_stream_every_operation(cdc: CdcEnvironment, postgres_database: str) -> None:
    dsn = libpq_url(postgres_database)
    _execute(dsn, SETUP)
    file = cdc.connector_file(
        "shop", dsn, ["public.orders", "public.items", "public.audit"], snapshot_mode="initial"
    )
    orders, items, audit = (
        "cdc.shop.public.orders",
        "cdc.shop.public.items",
        "cdc.shop.public.audit",
    )
    with cdc.running(file, dsn):
        wait_for(
            lambda: len(_safe_read(cdc, orders)) == 2 and len(_safe_read(cdc, audit)) == 1,
            timeout_s=90,
            what="the snapshot of orders and audit",
        )
        _execute(
            dsn,
            "INSERT INTO orders (id, amount, note) VALUES (3, 1.00, 'three')",
            "UPDATE orders SET amount = 11.00 WHERE id = 1",
            "DELETE FROM orders WHERE id = 2",
            "UPDATE items SET qty = 4 WHERE id = 1",
            "DELETE FROM items WHERE id = 2",
            "INSERT INTO audit (message) VALUES ('after')",
            "ALTER TABLE orders ADD COLUMN channel text",
            "INSERT INTO orders (id, amount, channel) VALUES (4, 2.00, 'web')",
            "TRUNCATE items",
        )
        wait_for(
            lambda: len(_safe_read(cdc, orders)) >= 7 and len(_safe_read(cdc, items)) >= 6,
            timeout_s=60,
            what="the streamed changes",
        )
        order_events = cdc.read(orders)
        item_events = cdc.read(items)
        audit_events = cdc.read(audit)
        # Once everything is in Kafka and confirmed, the slot holds no WAL.
        wait_for(
            lambda: _metric(cdc, "hub_connector_cdc_slot_lag_bytes", slot="shop_slot") == 0,
            timeout_s=30,
            what="the slot's lag to fall to 0 in /metrics",
        )
        published = {
            topic: _metric(cdc, "hub_connector_records_published_total", topic=topic)
            for topic in (orders, items, audit)
        }

    assert _ops(order_events) == ["r", "r", "c", "u", "d", "tombstone", "c"]
    assert published == {orders: 7, items: 6, audit: 2}
    snapshot = [e.value for e in order_events[:2] if e.value is not None]
    assert [s["source"]["snapshot"] for s in snapshot] == ["true", "true"]
    first = next(e.value["after"] for e in order_events[:2] if e.key == {"id": 1} and e.value)
    assert first["amount"] == Decimal("10.50")
    assert first["note"] == "first"
    assert first["tags"] == [1, 2, None]
    assert json.loads(first["attrs"]) == {"a": 1}
    assert first["feeling"] == "happy"
    assert str(first["ref"]) == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert first["raw"] == b"\x01\x02"
    assert first["ratio"] == 0.25
    assert first["big"] == "3.14159"
    assert first["day"].isoformat() == "2024-05-01"
    assert first["placed_at"].isoformat() == "2024-05-01T12:00:00+00:00"

    # Streamed events carry increasing WAL positions; snapshot reads the consistent point.
    lsns = [e.value["source"]["lsn"] for e in order_events if e.value is not None]
    assert lsns[0] == lsns[1] and lsns[2] >= lsns[1]
    assert lsns[2:] == sorted(lsns[2:])
    assert all(e.value["source"]["txId"] for e in order_events[2:] if e.value is not None)

    delete = order_events[4]
    assert delete.key == {"id": 2} and delete.value is not None
    assert delete.value["before"]["id"] == 2 and delete.value["before"]["amount"] is None
    assert order_events[5].key == {"id": 2} and order_events[5].value is None

    # ALTER TABLE ... ADD COLUMN: a new schema version, with the new column, is used from then on.
    assert order_events[6].value is not None
    assert order_events[6].value["after"]["channel"] == "web"
    assert order_events[6].schema_id != order_events[2].schema_id
    versions = cdc.registry.versions(subject=f"{orders}-value")  # type: ignore[arg-type]
    assert len(versions) == 2

    # REPLICA IDENTITY FULL: updates and deletes carry the whole old row.
    assert _ops(item_events) == ["r", "r", "u", "d", "tombstone", "t"]
    update = item_events[2].value
    assert update is not None
    assert update["before"] == {"id": 1, "name": "pen", "qty": 3}
    assert update["after"] == {"id": 1, "name": "pen", "qty": 4}
    assert item_events[5].key is None

    # A table without a primary key: an event feed without keys.
    assert _ops(audit_events) == ["r", "c"]
    assert audit_events[0].value is not None
    assert audit_events[0].value["source"]["snapshot"] == "last"  # the snapshot's last read
    assert all(e.key is None for e in audit_events)

    assert replay(order_events) == {
        (1,): {**first, "amount": Decimal("11.00")},
        (3,): _row(order_events[2]),
        (4,): _row(order_events[6]),
    }


def test_unchanged_toast_column_keeps_its_value(
    cdc: CdcEnvironment, postgres_database: str
) -> None:
    dsn = libpq_url(postgres_database)
    big = "x" * 200_000  # far above the TOAST threshold, stored out of line
    _execute(
        dsn,
        "CREATE TABLE docs (id int PRIMARY KEY, body text, views int)",
        "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",
    )
    file = cdc.connector_file("docs", dsn, ["public.docs"], snapshot_mode="never")
    topic = "cdc.docs.public.docs"
    with cdc.running(file, dsn):
        wait_for(lambda: "streaming slot" in cdc.log_of(file), timeout_s=60, what="streaming")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("INSERT INTO docs VALUES (1, %s, 0)", (big,))
        _execute(dsn, "UPDATE docs SET views = 1 WHERE id = 1")
        wait_for(lambda: len(_safe_read(cdc, topic)) >= 2, timeout_s=60, what="two events")
        events = cdc.read(topic)
    update = events[1]
    assert update.value is not None and update.value["op"] == "u"
    assert update.headers["hub.cdc.unchanged-columns"] == "body"
    assert update.value["after"]["body"] == "__hub_unavailable_value"
    assert replay(events) == {(1,): {"id": 1, "body": big, "views": 1}}


def _row(event: Event) -> dict[str, Any]:
    assert event.value is not None
    return dict(event.value["after"])


def _safe_read(cdc: CdcEnvironment, topic: str) -> list[Event]:
    try:
        return cdc.read(topic)
    except KeyError:  # the topic does not exist yet
        return []


def test_snapshot_without_the_exported_one_overlaps_and_never_gaps(
    cdc: CdcEnvironment, postgres_database: str
) -> None:
    """A slot that exists without a finished snapshot (a snapshot interrupted by a crash): the
    new snapshot reads a later state and the changes since the slot's start are streamed again."""
    dsn = libpq_url(postgres_database)
    _execute(
        dsn,
        "CREATE TABLE stock (sku int PRIMARY KEY, qty int)",
        "INSERT INTO stock VALUES (1, 10)",
        # As the connector's first start leaves them: publication, then slot.
        "CREATE PUBLICATION again_pub FOR TABLE stock",
        "SELECT pg_create_logical_replication_slot('again_slot', 'pgoutput')",
        "INSERT INTO stock VALUES (2, 20)",
        "UPDATE stock SET qty = 11 WHERE sku = 1",
        "INSERT INTO stock VALUES (3, 30)",
        "DELETE FROM stock WHERE sku = 3",
    )
    file = cdc.connector_file("again", dsn, ["public.stock"])
    topic = "cdc.again.public.stock"
    with cdc.running(file, dsn):
        wait_for(lambda: len(_safe_read(cdc, topic)) >= 7, timeout_s=90, what="snapshot + replay")
        events = cdc.read(topic)
    assert _ops(events) == ["r", "r", "c", "u", "c", "d", "tombstone"]
    assert replay(events) == {(1,): {"sku": 1, "qty": 11}, (2,): {"sku": 2, "qty": 20}}


def test_snapshot_in_several_processes_reads_every_row_once(
    cdc: CdcEnvironment, postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`snapshot_processes: 3`: helper processes publish shares of each table's pages in the
    connector's snapshot; every row arrives once, counted, and the stream follows."""
    monkeypatch.setenv("HUB_CONNECT_MAX_SNAPSHOT_PROCESSES", "3")  # more than CI's 2 cores
    dsn = libpq_url(postgres_database)
    _execute(
        dsn,
        "CREATE TABLE parts (id int PRIMARY KEY, label text NOT NULL)",
        "INSERT INTO parts SELECT g, repeat('p', 40) || g FROM generate_series(1, 3000) g",
        "CREATE TABLE bins (id int PRIMARY KEY, parts int)",  # one page: the connector's alone
        "INSERT INTO bins VALUES (1, 10), (2, 20)",
    )
    file = cdc.connector_file(
        "split", dsn, ["public.parts", "public.bins"], snapshot_processes=3,
        snapshot_batch_rows=250,
    )  # fmt: skip
    parts, bins = "cdc.split.public.parts", "cdc.split.public.bins"
    with cdc.running(file, dsn):
        wait_for(
            lambda: len(_safe_read(cdc, parts)) >= 3000 and len(_safe_read(cdc, bins)) >= 2,
            timeout_s=120,
            what="the snapshot of parts and bins",
        )
        _execute(dsn, "UPDATE parts SET label = 'moved' WHERE id = 7")
        wait_for(lambda: len(_safe_read(cdc, parts)) >= 3001, timeout_s=60, what="the update")
        wait_for(
            lambda: (
                _metric(
                    cdc, "hub_connector_records_published_total", connector="split", topic=parts
                )
                == 3001
            ),
            timeout_s=30,
            what="every published record counted in /metrics",
        )
        part_events, bin_events = cdc.read(parts), cdc.read(bins)
    log = cdc.log_of(file)

    assert "snapshot: 2 helper process(es) started" in log
    assert "snapshot helper 1 published" in log and "snapshot helper 2 published" in log
    reads = [e for e in part_events if e.value is not None and e.value["op"] == "r"]
    assert sorted(e.key["id"] for e in reads if e.key) == list(range(1, 3001))
    assert {e.value["source"]["snapshot"] for e in reads if e.value} == {"true"}
    assert [e.value["source"]["snapshot"] for e in bin_events if e.value] == ["true", "last"]
    assert _ops(part_events)[-1] == "u"
    assert replay(part_events)[(7,)]["label"] == "moved"
    assert len(replay(part_events)) == 3000


def test_a_snapshot_helper_that_dies_makes_the_snapshot_start_again(
    cdc: CdcEnvironment, postgres_database: str
) -> None:
    """A helper killed before it published its share: the snapshot is taken again from the
    start (overlap, never a gap), and the connector goes on streaming."""
    dsn = libpq_url(postgres_database)
    _execute(
        dsn,
        "CREATE TABLE lots (id int PRIMARY KEY, label text NOT NULL)",
        "INSERT INTO lots SELECT g, repeat('l', 40) || g FROM generate_series(1, 2000) g",
    )
    file = cdc.connector_file("killed", dsn, ["public.lots"], snapshot_processes=2)
    topic = "cdc.killed.public.lots"
    with cdc.running(file, dsn) as process:
        helper = _helper_process(process.pid, timeout_s=60)
        os.kill(helper, signal.SIGKILL)  # it is still wiring its publish path: nothing published
        _wait_started_again(cdc, file, "snapshot")
        wait_for(
            lambda: {e.key["id"] for e in _safe_read(cdc, topic) if e.key} == set(range(1, 2001)),
            timeout_s=90,
            what="every row of the retried snapshot",
        )
        _execute(dsn, "DELETE FROM lots WHERE id = 5")
        wait_for(
            lambda: any(e.value is None for e in _safe_read(cdc, topic)),
            timeout_s=60,
            what="the delete streamed after the snapshot",
        )
        events = cdc.read(topic)
    log = cdc.log_of(file)
    assert "snapshot helper 1 ended (exit code -9) before its share was published" in log
    assert "transient failure" in log  # retried, not FAILED
    assert [e.value["source"]["snapshot"] for e in events if e.value and e.value["op"] == "r"][
        -1
    ] == "last"
    state = replay(events)
    assert (5,) not in state and len(state) == 1999


def test_a_stream_in_several_processes_keeps_each_rows_events_in_order(
    cdc: CdcEnvironment, postgres_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stream_processes: 3`: helpers publish the changes of their share of the keys; every
    event arrives once, each row's in the order they were made, a changed key is deleted and
    created, a table without a key still streams, and the slot's position moves on."""
    monkeypatch.setenv("HUB_CONNECT_MAX_STREAM_PROCESSES", "3")  # more than CI's 2 cores
    dsn = libpq_url(postgres_database)
    _execute(
        dsn,
        "CREATE TABLE ledger (id bigint PRIMARY KEY, balance int NOT NULL)",
        "INSERT INTO ledger SELECT g, 0 FROM generate_series(1, 5) g",
        "CREATE TABLE notes (body text)",  # no key: the connector's own share
    )
    file = cdc.connector_file("shared", dsn, ["public.ledger", "public.notes"], stream_processes=3)
    ledger, notes = "cdc.shared.public.ledger", "cdc.shared.public.notes"
    with cdc.running(file, dsn):
        wait_for(lambda: len(_safe_read(cdc, ledger)) >= 5, timeout_s=90, what="the snapshot")
        wait_for(
            lambda: "stream: 2 helper process(es) started" in cdc.log_of(file),
            timeout_s=30,
            what="the stream helpers",
        )
        _execute(
            dsn,
            "INSERT INTO ledger SELECT g, 0 FROM generate_series(6, 400) g",
            *["UPDATE ledger SET balance = balance + 1"] * 3,
            "UPDATE ledger SET id = id + 1000 WHERE id <= 30",
            "DELETE FROM ledger WHERE id BETWEEN 100 AND 119",
            "INSERT INTO notes VALUES ('a'), ('b')",
        )
        with psycopg.connect(dsn, autocommit=True) as conn:
            (written,) = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone() or ("",)
        expected = 5 + 395 + 3 * 400 + 30 * 3 + 20 * 2
        wait_for(
            lambda: len(_safe_read(cdc, ledger)) >= expected and len(_safe_read(cdc, notes)) >= 2,
            timeout_s=120,
            what="every change",
        )
        wait_for(
            lambda: (
                _metric(
                    cdc, "hub_connector_records_published_total", connector="shared", topic=ledger
                )
                == expected
            ),
            timeout_s=30,
            what="every published record counted in /metrics",
        )
        wait_for(
            lambda: _slot_confirmed_past(dsn, "shared_slot", written),
            timeout_s=60,
            what="the slot confirmed past the last change",
        )
        events, note_events = cdc.read(ledger), cdc.read(notes)
    assert len(events) == expected  # each event once
    by_key: dict[int, list[Event]] = {}
    for event in events:
        assert event.key is not None
        by_key.setdefault(event.key["id"], []).append(event)
    for key, its in by_key.items():
        if key > 1000:
            continue  # created by a key change, after the updates
        balances = [e.value["after"]["balance"] for e in its if e.value and e.value["op"] == "u"]
        assert balances == [1, 2, 3], f"row {key}: {_ops(its)} {balances}"
    assert _ops(by_key[3]) == ["r", "u", "u", "u", "d", "tombstone"]
    created = by_key[1007][0].value
    assert _ops(by_key[1007]) == ["c"] and created is not None and created["after"]["balance"] == 3
    assert _ops(by_key[110]) == ["c", "u", "u", "u", "d", "tombstone"]
    state = replay(events)
    alive = [*range(31, 100), *range(120, 401), *range(1001, 1031)]
    assert state == {(i,): {"id": i, "balance": 3} for i in alive}
    assert sorted(e.value["after"]["body"] for e in note_events if e.value) == ["a", "b"]


def test_a_stream_helper_that_dies_makes_the_stream_start_again_from_the_lowest_position(
    cdc: CdcEnvironment, postgres_database: str
) -> None:
    """A stream helper killed mid-stream: the connector's stream fails as transient, starts
    again from the position every process had reached, and no change is lost."""
    dsn = libpq_url(postgres_database)
    _execute(dsn, "CREATE TABLE tally (id int PRIMARY KEY, n int NOT NULL)")
    file = cdc.connector_file("tally", dsn, ["public.tally"], stream_processes=2)
    topic = "cdc.tally.public.tally"
    with cdc.running(file, dsn) as process:
        helper = _helper_process(process.pid, timeout_s=60)
        _execute(dsn, "INSERT INTO tally SELECT g, 0 FROM generate_series(1, 200) g")
        wait_for(lambda: len(_safe_read(cdc, topic)) >= 200, timeout_s=90, what="the inserts")
        os.kill(helper, signal.SIGKILL)
        _execute(dsn, "UPDATE tally SET n = 1")
        _wait_started_again(cdc, file, "stream")
        wait_for(
            lambda: (
                replay(_safe_read(cdc, topic)) == {(i,): {"id": i, "n": 1} for i in range(1, 201)}
            ),
            timeout_s=90,
            what="every update, after the restart",
        )
    log = cdc.log_of(file)
    assert "stream helper 1 ended (exit code -9) before its share was published" in log
    assert "transient failure" in log  # retried, not FAILED


def _wait_started_again(cdc: CdcEnvironment, file: Path, kind: str) -> None:
    """Until the connector's log shows its `kind` helper started again after one was killed."""
    wait_for(
        lambda: (
            f"{kind}: 1 helper process(es) started"
            in cdc.log_of(file).split("ended (exit code -9)", 1)[-1]
        ),
        timeout_s=90,
        what=f"the {kind} to start again with a new helper",
    )


def _slot_confirmed_past(dsn: str, slot: str, lsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (lsn, slot),
        ).fetchone()
    return bool(row and row[0])


def _helper_process(parent: int, *, timeout_s: float) -> int:
    """The pid of the first helper process `parent` starts (multiprocessing's spawn)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                command = (stat.parent / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue  # the process ended while we looked
            if ppid == parent and b"spawn_main" in command:
                return int(stat.parent.name)
        time.sleep(0.02)
    raise AssertionError(f"no helper process started within {timeout_s:.0f}s")
