"""Change events from bronze, put in source order: the timeline both silver tables derive from.

A changelog topic carries the change-event envelope (`before`, `after`, `op`, `ts_ms`,
`source`). Kafka offsets say in which order records were written, not in which order the source
committed them: a connector replaying after a crash writes old events again, and events can be
published late. So silver orders every key's events by their SOURCE POSITION and recomputes the
affected part of the timeline from scratch on each batch; writing the result with MERGE makes a
replayed batch produce the very same rows, which is a no-op.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BinaryType, DataType, StringType, StructType

# What a connector writes for a column whose value it could not read (PostgreSQL TOAST columns
# unchanged by an UPDATE): silver keeps the column's previous value instead.
UNAVAILABLE_VALUE = "__hub_unavailable_value"

ENVELOPE_COLUMNS = ("before", "after", "op", "ts_ms", "source")
DELETIONS = ("d", "t")

# Columns silver adds; every one starts with `_hub_` except the SCD2 ones users query.
OP = "_hub_op"
POSITION = "_hub_position"
LSN = "_hub_lsn"
TX_ID = "_hub_tx_id"
UNAVAILABLE = "_hub_unavailable"
VALID_FROM = "valid_from"
VALID_TO = "valid_to"
IS_CURRENT = "is_current"
IS_DELETED = "is_deleted"
# Working columns, never stored.
_ORIGIN = "_hub_origin"  # 0: already in history, 1: new in this batch, 2: a truncate applied
_DROP = "_hub_drop"


@dataclass(frozen=True)
class ChangelogSpec:
    """What silver needs to know of a changelog topic: its bronze table and key columns."""

    bronze_table: str
    silver_prefix: str
    key_columns: tuple[str, ...]

    @property
    def current_table(self) -> str:
        return f"{self.silver_prefix}_current"

    @property
    def history_table(self) -> str:
        return f"{self.silver_prefix}_history"


def is_envelope(schema: StructType) -> bool:
    """Whether a bronze table's columns are the change-event envelope."""
    fields = {f.name: f.dataType for f in schema.fields}
    if not all(name in fields for name in ENVELOPE_COLUMNS):
        return False
    source = fields["source"]
    return isinstance(source, StructType) and {"ts_ms", "lsn"} <= set(source.fieldNames())


def row_fields(schema: StructType) -> list[str]:
    """The row's column names, from the `after` (else `before`) struct of the envelope."""
    for side in ("after", "before"):
        data_type = schema[side].dataType
        if isinstance(data_type, StructType):
            return data_type.fieldNames()
    raise ValueError("the envelope has no row structure in `before` or `after`")


def position() -> Column:
    """The source position events are ordered by: (lsn, txId), or (ts_ms, 0) without an lsn.

    The connector's processing time `ts_ms` changes when an event is replayed, so it is no
    part of the position when the source has one.
    """
    lsn = F.col("source.lsn")
    return F.struct(
        F.coalesce(lsn, F.col("ts_ms")).cast("long").alias("major"),
        F.when(lsn.isNotNull(), F.coalesce(F.col("source.txId").cast("long"), F.lit(0)))
        .otherwise(F.lit(0))
        .cast("long")
        .alias("minor"),
    )


def events(bronze: DataFrame, spec: ChangelogSpec) -> DataFrame:
    """Bronze envelope rows as flat events: key and row columns, op, position, commit time.

    Truncates keep null keys and row columns; deletes carry the `before` image.
    """
    fields = row_fields(bronze.schema)
    row_type: StructType = bronze.schema["after"].dataType  # type: ignore[assignment]
    marked = [
        F.when(test, F.lit(f.name))
        for f in row_type.fields
        if (test := _holds_marker(F.col(f"after.{f.name}"), f.dataType)) is not None
    ]
    unavailable = F.filter(
        F.array(*marked) if marked else F.array().cast("array<string>"),
        lambda c: c.isNotNull(),
    )
    image = F.when(F.col("op") == "d", F.col("before")).otherwise(F.col("after"))
    return bronze.where(F.col("op").isin("c", "u", "d", "r", "t")).select(
        *[image.getField(c).alias(c) for c in fields],
        F.col("op").alias(OP),
        position().alias(POSITION),
        F.col("source.lsn").cast("long").alias(LSN),
        F.col("source.txId").cast("long").alias(TX_ID),
        F.when(F.col("op") == "u", unavailable)
        .otherwise(F.array().cast("array<string>"))
        .alias(UNAVAILABLE),
        F.timestamp_millis(F.coalesce(F.col("source.ts_ms"), F.col("ts_ms"))).alias(VALID_FROM),
        F.col("_hub_partition"),
        F.col("_hub_offset"),
    )


def _holds_marker(column: Column, data_type: DataType) -> Column | None:
    """Whether a column holds the unavailable-value marker, in the forms connectors write it:
    the string, its UTF-8 bytes, or an array of one of those; None for types that cannot."""
    if isinstance(data_type, StringType):
        return column == UNAVAILABLE_VALUE
    if isinstance(data_type, BinaryType):
        return column == F.lit(UNAVAILABLE_VALUE.encode())
    if isinstance(data_type, ArrayType):
        inner = _holds_marker(F.try_element_at(column, F.lit(1)), data_type.elementType)
        return None if inner is None else (F.size(column) == 1) & inner
    return None


def timeline(
    existing: DataFrame,
    new: DataFrame,
    truncates: DataFrame,
    *,
    keys: Sequence[str],
    columns: Sequence[str],
) -> DataFrame:
    """Every version of the affected keys, in source order, with SCD2 columns recomputed.

    `existing` holds the history rows of the keys this batch touches, `new` the batch's events
    for them, `truncates` every truncate seen (position and time). The result has one row per
    distinct (key, position, op), an `_hub_drop` flag on stored rows that no longer belong.
    """
    kept = [*keys, *columns, OP, POSITION, LSN, TX_ID, UNAVAILABLE, VALID_FROM]
    stored = existing.select(*kept, F.lit(0).alias(_ORIGIN), F.lit(-1).cast("long").alias("o"))
    fresh = new.select(*kept, F.lit(1).alias(_ORIGIN), F.col("_hub_offset").alias("o"))
    # A truncate deletes every key alive at its position: one deletion row per key and truncate.
    affected = stored.select(*keys).union(fresh.select(*keys)).distinct()
    nulls = [F.lit(None).cast(existing.schema[c].dataType).alias(c) for c in columns]
    applied = affected.crossJoin(truncates.select(POSITION, LSN, TX_ID, VALID_FROM)).select(
        *keys,
        *nulls,
        F.lit("t").alias(OP),
        POSITION,
        LSN,
        TX_ID,
        F.array().cast("array<string>").alias(UNAVAILABLE),
        VALID_FROM,
        F.lit(2).alias(_ORIGIN),
        F.lit(-1).cast("long").alias("o"),
    )
    candidates = stored.unionByName(fresh).unionByName(applied)
    # Duplicates (a replayed event, a truncate applied twice) share key, position and op: the
    # stored row wins, so a replay changes nothing.
    first = Window.partitionBy(*keys, POSITION, OP).orderBy(_ORIGIN, "o")
    unique = candidates.withColumn("_n", F.row_number().over(first)).where("_n = 1").drop("_n", "o")
    in_order = Window.partitionBy(*keys).orderBy(POSITION, F.col(OP) == "t")
    previous_op = F.lag(OP).over(in_order)
    # A truncate only deletes a key that was alive just before it.
    with_drop = unique.withColumn(
        _DROP,
        (F.col(OP) == "t") & (previous_op.isNull() | previous_op.isin(*DELETIONS)),
    )
    alive = with_drop.where(~F.col(_DROP))
    order = Window.partitionBy(*keys).orderBy(POSITION, F.col(OP) == "t")
    so_far = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    resolved = [
        # The last value that was not an unavailable-value marker, nulls included.
        F.last(
            F.when(~F.array_contains(UNAVAILABLE, c), F.struct(F.col(c).alias("v"))),
            ignorenulls=True,
        )
        .over(so_far)
        .getField("v")
        .alias(c)
        for c in columns
    ]
    next_from = F.lead(VALID_FROM).over(order)
    versions = alive.select(
        *keys,
        *resolved,
        OP,
        POSITION,
        LSN,
        TX_ID,
        UNAVAILABLE,
        VALID_FROM,
        next_from.alias(VALID_TO),
        next_from.isNull().alias(IS_CURRENT),
        F.col(OP).isin(*DELETIONS).alias(IS_DELETED),
        F.col(_DROP),
    )
    dropped = _closed_rows(
        with_drop.where(F.col(_DROP) & (F.col(_ORIGIN) == 0)),
        keys=keys,
        columns=columns,
        drop=F.col(_DROP),
    )
    return versions.unionByName(dropped)


def truncate_markers(new: DataFrame, *, keys: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """History rows recording the batch's truncates: null keys, deleted, never current."""
    return _closed_rows(new.where(F.col(OP) == "t"), keys=keys, columns=columns, drop=F.lit(False))


def _closed_rows(
    rows: DataFrame, *, keys: Sequence[str], columns: Sequence[str], drop: Column
) -> DataFrame:
    """`rows` as history rows that are deleted, never current, and valid until no time."""
    return rows.select(
        *keys,
        *columns,
        OP,
        POSITION,
        LSN,
        TX_ID,
        UNAVAILABLE,
        VALID_FROM,
        F.lit(None).cast("timestamp").alias(VALID_TO),
        F.lit(False).alias(IS_CURRENT),
        F.lit(True).alias(IS_DELETED),
        drop.alias(_DROP),
    )


HISTORY_METADATA = (OP, POSITION, LSN, TX_ID, UNAVAILABLE, VALID_FROM, VALID_TO, IS_CURRENT)
