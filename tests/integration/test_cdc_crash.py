"""The CDC connector killed with SIGKILL five times while 100,000 changes are made.

After it catches up, replaying each topic (apply by key in order, deletes remove) gives exactly
the source table, and every duplicate the crashes caused is recognisable: it repeats an earlier
event's (`source.lsn`, `op`, key) with the same content.
"""

import json
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from connectors.postgres.pgoutput import parse_lsn
from tests.support.cdc import CdcEnvironment, Event, libpq_url, replay, stop, wait_for

pytestmark = pytest.mark.integration

CHANGES = 100_000
KILLS = 5
TABLES = ("accounts", "orders", "events")
PER_TRANSACTION = 250


class Workload:
    """Inserts, updates and deletes over three tables, in transactions, tracking live ids."""

    def __init__(self, dsn: str, seed: int) -> None:
        self.dsn = dsn
        self.random = random.Random(seed)
        self.live: dict[str, list[int]] = {t: [] for t in TABLES}
        self.next_id = 1
        self.done = 0

    def setup(self, initial_rows: int) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for table in TABLES:
                conn.execute(
                    f"CREATE TABLE {table} (id bigint PRIMARY KEY, version int NOT NULL, "
                    "label text, amount numeric(12,2))"
                )
            conn.execute("ALTER TABLE events REPLICA IDENTITY FULL")
        self._transaction({t: initial_rows for t in TABLES}, updates=0, deletes=0)
        self.done = 0

    def run(self, total: int, progress: list[int]) -> None:
        while self.done < total:
            table = self.random.choice(TABLES)
            inserts = self.random.randint(0, PER_TRANSACTION // 2)
            updates = self.random.randint(0, PER_TRANSACTION - inserts)
            deletes = min(PER_TRANSACTION - inserts - updates, len(self.live[table]) // 4)
            self._transaction({table: inserts}, updates=updates, deletes=deletes, table=table)
            progress[0] = self.done

    def _transaction(
        self, inserts: dict[str, int], *, updates: int, deletes: int, table: str = ""
    ) -> None:
        with psycopg.connect(self.dsn) as conn, conn.cursor() as cursor:
            for name, count in inserts.items():
                rows = [
                    (
                        self.next_id + i,
                        1,
                        f"row {self.next_id + i}",
                        self.random.randint(0, 10**6) / 100,
                    )
                    for i in range(count)
                ]
                self.next_id += count
                if rows:
                    cursor.executemany(
                        f"INSERT INTO {name} (id, version, label, amount) VALUES (%s, %s, %s, %s)",
                        rows,
                    )
                    self.live[name].extend(r[0] for r in rows)
                self.done += count
            if table and updates and self.live[table]:
                chosen = self.random.sample(self.live[table], min(updates, len(self.live[table])))
                cursor.execute(
                    f"UPDATE {table} SET version = version + 1, label = label || '+' "
                    "WHERE id = ANY(%s)",
                    (chosen,),
                )
                self.done += len(chosen)
            if table and deletes:
                doomed = set(self.random.sample(self.live[table], deletes))
                cursor.execute(f"DELETE FROM {table} WHERE id = ANY(%s)", (list(doomed),))
                self.live[table] = [i for i in self.live[table] if i not in doomed]
                self.done += len(doomed)


def _source_rows(dsn: str, table: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f"SELECT id, version, label, amount FROM {table}").fetchall()
    return {(r[0],): {"id": r[0], "version": r[1], "label": r[2], "amount": r[3]} for r in rows}


def _check_duplicates(events: list[Event]) -> int:
    """Every repeated (lsn, op, key) repeats the same change; returns how many repeats."""
    seen: dict[tuple[Any, ...], Any] = {}
    repeats = 0
    for event in events:
        if event.value is None:
            continue
        value = event.value
        identity = (value["source"]["lsn"], value["op"], json.dumps(event.key, sort_keys=True))
        content = (value["before"], value["after"], value["source"]["txId"])
        if identity in seen:
            assert seen[identity] == content, f"different changes share {identity}"
            repeats += 1
        else:
            seen[identity] = content
    return repeats


def test_killed_five_times_loses_nothing(
    kafka_bootstrap: str, postgres_database: str, tmp_path: Path
) -> None:
    dsn = libpq_url(postgres_database)
    seed = random.randrange(1 << 30)
    print(f"workload seed {seed}")
    workload = Workload(dsn, seed)
    workload.setup(initial_rows=2_000)
    cdc = CdcEnvironment(tmp_path, kafka_bootstrap)
    file = cdc.connector_file("crash", dsn, [f"public.{t}" for t in TABLES], max_batch_events=5000)
    progress = [0]
    writer = threading.Thread(target=workload.run, args=(CHANGES, progress), daemon=True)
    chaos = random.Random(seed)
    kill_points = sorted(chaos.sample(range(5_000, CHANGES - 20_000), KILLS))
    kills = 0
    process = cdc.start(file, dsn)
    try:
        wait_for(
            lambda: "streaming slot" in cdc.log_of(file), timeout_s=120, what="the first snapshot"
        )
        writer.start()
        for point in kill_points:
            wait_for(lambda p=point: progress[0] >= p, timeout_s=300, what=f"{point} changes")
            # Let the restarted connector get back to streaming before the next kill, so each
            # kill lands somewhere in its work (publishing, committing, confirming).
            wait_for(
                lambda: cdc.log_of(file).count("streaming slot") >= cdc.starts,
                timeout_s=120,
                what="the restarted connector to stream",
            )
            time.sleep(chaos.uniform(0.0, 2.0))
            process.send_signal(signal.SIGKILL)
            assert process.wait(30) == -signal.SIGKILL
            kills += 1
            process = cdc.start(file, dsn)
        writer.join(timeout=600)
        assert not writer.is_alive()
        with psycopg.connect(dsn) as conn:
            end = parse_lsn(str(conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]))

        def caught_up() -> bool:
            with psycopg.connect(dsn) as conn:
                row = conn.execute(
                    "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                    "WHERE slot_name = 'crash_slot'"
                ).fetchone()
            return row is not None and row[0] is not None and parse_lsn(row[0]) >= end

        wait_for(caught_up, timeout_s=300, what="the connector to confirm the last change")
    finally:
        stop(process)
    assert kills == KILLS
    try:
        for table in TABLES:
            events = cdc.read(f"cdc.crash.public.{table}")
            repeats = _check_duplicates(events)
            print(f"{table}: {len(events)} records, {repeats} recognisable duplicates")
            assert replay(events) == _source_rows(dsn, table), f"{table} differs from its topic"
    finally:
        cdc.close()
