"""The initial snapshot: every row of the captured tables as of the slot's consistent point.

The rows are read in one REPEATABLE READ transaction. On the first start that transaction adopts
the snapshot the slot exported when it was created (`SET TRANSACTION SNAPSHOT`), so the snapshot
and the stream meet exactly: no gap, no overlap. A snapshot interrupted by a crash cannot adopt
that snapshot again (it lived only as long as the creating connection); the restarted snapshot
reads a newer state instead and the stream still starts at the slot's unconfirmed consistent
point, so changes in between are published again (overlap, never a gap) and applying events in
order still ends at the source's state.

With `snapshot_processes` above 1 the table is read in shares of its pages (ctid ranges, a TID
range scan on PostgreSQL 14 and newer): the connector exports its transaction's snapshot
(`pg_export_snapshot`) and each helper process adopts it, so every share reads the same moment,
as `pg_dump --jobs` does (`connectors/postgres/snapshot_helpers.py`).
"""

from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import adapters, postgres, sql
from psycopg.pq import Format
from psycopg.types.string import TextLoader

from connectors.postgres.changes import envelope
from connectors.postgres.envelope import TableShape, convert_row, key_of
from publish.publisher import IncomingRecord

TupleText = tuple[str | None, ...]
# A share of a table: its pages from the first to before the second; None: to the table's end.
PageRange = tuple[int, int | None]

# Every column is loaded as the type's text output, exactly what pgoutput sends while streaming,
# by the loader psycopg uses for `text` columns: its C implementation where installed, which
# saves a Python call per value over a loader class of our own.
_RAW_TEXT = adapters.get_loader(postgres.types["text"].oid, Format.TEXT) or TextLoader


def read_table(
    conn: psycopg.Connection[Any],
    shape: TableShape,
    *,
    batch_rows: int,
    pages: PageRange | None = None,
) -> Iterator[list[TupleText]]:
    """The table's rows (of `pages` only, when given) as text tuples in replication column
    order, `batch_rows` at a time."""
    columns = sql.SQL(", ").join(sql.Identifier(c.name) for c in shape.columns)
    query = sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(shape.schema, shape.table))
    if pages is not None:
        first, end = pages
        query += sql.SQL(" WHERE ctid >= {}::tid").format(sql.Literal(f"({first},0)"))
        if end is not None:
            query += sql.SQL(" AND ctid < {}::tid").format(sql.Literal(f"({end},0)"))
    name = f"hub_snapshot_{shape.schema}_{shape.table}"[:60]
    with conn.cursor(name=name) as cursor:
        for column in shape.columns:
            cursor.adapters.register_loader(column.type_oid, _RAW_TEXT)
        cursor.itersize = batch_rows
        cursor.execute(query)
        while True:
            rows = cursor.fetchmany(batch_rows)
            if not rows:
                return
            yield rows


def begin_snapshot(conn: psycopg.Connection[Any], exported: str | None) -> None:
    """Start the read-only REPEATABLE READ transaction, adopting `exported` when given."""
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    if exported is not None:
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(exported)))


def export_snapshot(conn: psycopg.Connection[Any]) -> str:
    """The name under which other sessions adopt this transaction's snapshot while it is open."""
    row = conn.execute("SELECT pg_export_snapshot()").fetchone()
    assert row is not None
    return str(row[0])


def table_pages(conn: psycopg.Connection[Any], shape: TableShape) -> int:
    """How many pages the table's main fork holds now (0 for a partitioned table's parent)."""
    row = conn.execute(
        "SELECT pg_relation_size(%s::regclass) / current_setting('block_size')::int",
        (sql.Identifier(shape.schema, shape.table).as_string(conn),),
    ).fetchone()
    assert row is not None
    return int(row[0])


def page_ranges(pages: int, parts: int) -> list[PageRange]:
    """`parts` ranges that together cover every page once; the last is open, so pages added
    after `pages` was read are covered too (their rows are invisible to the snapshot anyway)."""
    bounds = [pages * k // parts for k in range(parts)]
    return [(bounds[k], bounds[k + 1]) for k in range(parts - 1)] + [(bounds[-1], None)]


def snapshot_records(
    shape: TableShape, rows: list[TupleText], source: dict[str, Any]
) -> list[IncomingRecord]:
    """Each row as a read event (`op` `r`), keyed by its primary key; `source` is shared."""
    records = []
    for row in rows:
        after = convert_row(shape, row).values
        records.append(
            IncomingRecord(key=key_of(shape, after), value=envelope("r", None, after, source))
        )
    return records
