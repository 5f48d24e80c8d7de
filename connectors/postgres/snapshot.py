"""The initial snapshot: every row of the captured tables as of the slot's consistent point.

The rows are read in one REPEATABLE READ transaction. On the first start that transaction adopts
the snapshot the slot exported when it was created (`SET TRANSACTION SNAPSHOT`), so the snapshot
and the stream meet exactly: no gap, no overlap. A snapshot interrupted by a crash cannot adopt
that snapshot again (it lived only as long as the creating connection); the restarted snapshot
reads a newer state instead and the stream still starts at the slot's unconfirmed consistent
point, so changes in between are published again (overlap, never a gap) and applying events in
order still ends at the source's state.
"""

from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg import adapters, postgres, sql
from psycopg.pq import Format
from psycopg.types.string import TextLoader

from connectors.postgres.envelope import TableShape

TupleText = tuple[str | None, ...]

# Every column is loaded as the type's text output, exactly what pgoutput sends while streaming,
# by the loader psycopg uses for `text` columns: its C implementation where installed, which
# saves a Python call per value over a loader class of our own.
_RAW_TEXT = adapters.get_loader(postgres.types["text"].oid, Format.TEXT) or TextLoader


def read_table(
    conn: psycopg.Connection[Any], shape: TableShape, *, batch_rows: int
) -> Iterator[list[TupleText]]:
    """The table's rows as text tuples in replication column order, `batch_rows` at a time."""
    columns = sql.SQL(", ").join(sql.Identifier(c.name) for c in shape.columns)
    query = sql.SQL("SELECT {} FROM {}").format(columns, sql.Identifier(shape.schema, shape.table))
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
