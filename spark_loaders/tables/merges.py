"""What a MERGE is given: rows computed now, with fresh column identities, less those the
target table already holds as they are.

Silver's history and current tables and the warehouse's dimensions and facts are all written by
MERGE from frames computed over the very tables they change.
"""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import MapType


def detached(frame: DataFrame) -> DataFrame:
    """The frame computed now, with fresh column identities, to MERGE into a table it read.

    The MERGE changes the table the frame was computed from, so it must not be recomputed
    afterwards; and Delta cannot tell source from target columns when they share identities.
    """
    computed = frame.localCheckpoint(eager=True)
    return computed.select(*[F.col(c).alias(c) for c in computed.columns])


def without_unchanged(rows: DataFrame, table: DataFrame, *, flag: str | None = None) -> DataFrame:
    """`rows` less those `table` already holds as they are (every column equal, nulls too),
    computed now (`detached`). Rows with the boolean column `flag` set (a deletion, `flag` not
    being a column of the table) are all kept.

    Delta's MERGE rewrites, and commits, every file holding a row its ON condition matches,
    even when no clause's condition then holds: a replayed batch, or a rebuild over unchanged
    data, would commit a copy of what the table holds, with a second ledger entry. A MERGE
    given only the rows that change commits nothing when none do.
    """
    columns = [c for c in rows.columns if c != flag]
    comparable = set(columns) <= set(table.columns) and not any(
        isinstance(rows.schema[c].dataType, MapType) for c in columns
    )
    if not comparable:
        # New columns reach the table through the MERGE's schema evolution; maps cannot be
        # compared by Spark's set operations.
        return detached(rows)
    flagged = F.coalesce(F.col(flag), F.lit(False)) if flag is not None else F.lit(False)
    fresh = rows.where(~flagged).select(*columns).exceptAll(table.select(*columns))
    if flag is not None:
        fresh = fresh.withColumn(flag, F.lit(False)).unionByName(rows.where(flagged))
    return detached(fresh)
