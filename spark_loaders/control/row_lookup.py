"""A silver or gold row by its key, for row lineage (`GET /row` on the loader's health port,
ADRs 0042 and 0047).

Silver rows keep the source position of the change event they hold (`_hub_position`: the LSN
and transaction id, or the event's time without an LSN), not its Kafka position. So the row is
found by its key in silver, and then its event in the silver table's bronze table: the bronze
row with the same key and source position, whose `_hub_partition` and `_hub_offset` lineage
traces further. A replayed source can write the same event twice; the first in Kafka is named.
Both lookups take Spark queries, so they run here, on the loader's driver, and not in the API,
which has no Spark.

Gold rows keep no position of their own either. A gold table's newest ledger entry names the
version of its source that the table's rows were last built from (`newest_reads`), and the row
is found again in that version: a fact's bronze record is the newest record (as the build
picks it) whose columns equal the fact's; a dimension row's change is the silver history row
that started its version (type 2) or the newest one it holds (type 1), whose event in bronze
is then found as a silver row's is. Those matches are joins in Spark, so no value of the row
makes a round trip through Python.

Nothing the caller sends becomes SQL text: the table must be one of the silver or gold tables
in the metastore, its name checked against a pattern first; the key's columns must be columns
of that table; each value is converted to its column's type in Python and compared with a literal
through the DataFrame API. The query reads at most two rows.
"""

import datetime as dt
import re
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from hub_core.errors import ErrorCode, HubError
from spark_loaders.silver.changes import (
    IS_CURRENT,
    IS_DELETED,
    OP,
    POSITION,
    UNAVAILABLE,
    VALID_FROM,
    VALID_TO,
    ChangelogSpec,
    events,
)
from spark_loaders.tables.lineage import delta_table_id
from spark_loaders.warehouse.dimensions import BEGINNING, UNKNOWN_KEY
from spark_loaders.warehouse.snapshots import Pin, at_version, newest_reads

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType

_SILVER_TABLE = re.compile(r"silver\.([a-z0-9_]{1,240}_(?:current|history))")
_GOLD_TABLE = re.compile(r"gold\.(dim|fact)_([a-z0-9_]{1,240})")
_BRONZE_TABLE = re.compile(r"bronze\.[a-z0-9_]{1,249}")
_HISTORY_TABLE = re.compile(r"silver\.([a-z0-9_]{1,240})_history")
MAX_KEY_COLUMNS = 8
# Columns a gold table computes, never matched against its source's.
_GOLD_ONLY = (VALID_FROM, VALID_TO, IS_CURRENT, IS_DELETED, "is_inferred")


def row_position(spark: "SparkSession", table: str, key: dict[str, Any]) -> dict[str, Any]:
    """The `_hub_partition` and `_hub_offset` of the bronze record the row of `table` whose
    columns equal `key` holds: the current row of a `_current` table, the newest version of a
    `_history` table or of a versioned dimension, the one row of a fact or another dimension."""
    from pyspark.sql import functions as F

    match = _SILVER_TABLE.fullmatch(table)
    gold = _GOLD_TABLE.fullmatch(table)
    if (match is None and gold is None) or not spark.catalog.tableExists(table):
        raise HubError(
            f"'{table[:300]}' is not a silver or gold table of this loader: rows are found by "
            "key in silver.<table>_current, silver.<table>_history, gold.dim_<name> and "
            "gold.fact_<name>.",
            code=ErrorCode.LINEAGE_NOT_FOUND,
        )
    if not key or len(key) > MAX_KEY_COLUMNS:
        raise HubError(
            f"Give the row's key as 1 to {MAX_KEY_COLUMNS} columns and their values.",
            code=ErrorCode.INVALID_ROW_KEY,
        )
    frame = spark.table(table)
    shown = ", ".join(f"{n}={v!r}" for n, v in sorted(key.items()))
    if match is None:
        condition = _condition(frame, table, key, gold=True)
        return _gold_position(spark, table, frame, condition, shown=shown)
    condition = _condition(frame, table, key, gold=False)
    newest = frame.where(condition).orderBy(F.col(POSITION).desc())
    found = newest.select(POSITION).limit(2).collect()
    if not found:
        raise HubError(
            f"No row of {table} has {shown}.",
            code=ErrorCode.LINEAGE_NOT_FOUND,
        )
    if len(found) > 1 and table.endswith("_current"):
        raise HubError(
            f"More than one row of {table} has {shown}: give every column of the table's key.",
            code=ErrorCode.INVALID_ROW_KEY,
        )
    return _event_of(spark, table, newest.limit(1), sorted(key))


def _condition(frame: "DataFrame", table: str, key: dict[str, Any], *, gold: bool) -> "Column":
    """`key`'s columns equal to its values, each converted to its column's type; a silver
    table's key columns are its row's, a gold table's any of its columns."""
    from pyspark.sql import functions as F

    scd = (VALID_FROM, VALID_TO, IS_CURRENT, IS_DELETED)
    types = {
        f.name: f.dataType
        for f in frame.schema.fields
        if not f.name.startswith("_hub_") and (gold or f.name not in scd)
    }
    condition = F.lit(True)
    for name, given in sorted(key.items()):
        if name not in types:
            raise HubError(
                f"{table} has no column '{str(name)[:128]}'; its columns are "
                f"{', '.join(sorted(types))}.",
                code=ErrorCode.INVALID_ROW_KEY,
            )
        condition = condition & (F.col(name) == F.lit(_typed(table, name, given, types[name])))
    return condition


def _gold_position(
    spark: "SparkSession", table: str, frame: "DataFrame", condition: "Column", *, shown: str
) -> dict[str, Any]:
    """The bronze record a gold row was built from (module docstring)."""
    from pyspark.sql import functions as F

    kind, name = table.removeprefix("gold.").split("_", 1)
    versioned = VALID_FROM in frame.columns
    rows = frame.where(condition)
    rows = (rows.orderBy(F.col(VALID_FROM).desc()) if versioned else rows).limit(2)
    found = rows.collect()
    if not found:
        raise HubError(f"No row of {table} has {shown}.", code=ErrorCode.LINEAGE_NOT_FOUND)
    if len(found) > 1 and not versioned:
        raise HubError(
            f"More than one row of {table} has {shown}: give every column of its grain "
            f"or key{' (or its surrogate key ' + name + '_key)' if kind == 'dim' else ''}.",
            code=ErrorCode.INVALID_ROW_KEY,
        )
    row = found[0].asDict()
    if kind == "dim" and row.get(f"{name}_key") == UNKNOWN_KEY:
        raise HubError(f"Key {UNKNOWN_KEY} of {table} is the unknown member, which holds no "
                       "source row.", code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
    if kind == "dim" and row.get("is_inferred"):
        raise HubError(
            f"That row of {table} is an inferred member, made for facts that named it before "
            "its source had it: it holds no source change yet.",
            code=ErrorCode.LINEAGE_NOT_FOUND,
        )
    chosen = rows.limit(1)
    pattern = _HISTORY_TABLE if kind == "dim" else _BRONZE_TABLE
    source, pin = next(
        (
            (t, p)
            for t, p in newest_reads(spark, table).items()
            if pattern.fullmatch(t) and spark.catalog.tableExists(t)
        ),
        (None, None),
    )
    if source is None or pin is None:
        raise HubError(f"No ledger entry of {table} names the table its rows come from.",
                       code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
    read = _as_of(spark, source, pin)
    shared = [
        c
        for c in frame.columns
        if c in read.columns and not c.startswith("_hub_") and c not in (*_GOLD_ONLY, f"{name}_key")
    ]
    kept = [*shared, VALID_FROM] if versioned else shared
    given = chosen.select(*[F.col(c).alias(f"_g_{c}") for c in kept])
    same = F.lit(True)
    for column in shared:
        same = same & read[column].eqNullSafe(given[f"_g_{column}"])
    if kind == "fact":
        # The newest record of the fact's grain, as the build picks it (`FactBuilder._source`).
        record = read.join(given, same, "left_semi").orderBy(
            F.desc("_hub_timestamp"), F.desc("_hub_partition"), F.desc("_hub_offset")
        )
        landed = record.select("_hub_partition", "_hub_offset").limit(1).collect()
        if not landed:
            raise HubError(f"That row of {table} holds a record no longer in {source}.",
                           code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
        return _answer(table, source, landed[0])
    # The change that started the dimension row's version: its first history row since the
    # version's `valid_from` (a member's first version starts at BEGINNING); type 1 keeps the
    # newest change.
    live = same & ~read[IS_DELETED]
    if versioned:
        started = given[f"_g_{VALID_FROM}"] == F.lit(BEGINNING)
        live = live & (started | (read[VALID_FROM] == given[f"_g_{VALID_FROM}"]))
    order = F.col(POSITION).asc() if versioned else F.col(POSITION).desc()
    change = read.join(given, live, "left_semi").orderBy(order).limit(1)
    if not change.select(POSITION).collect():
        raise HubError(f"That row of {table} holds a change no longer in {source}.",
                       code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
    return {**_event_of(spark, source, change, shared, asked=table), "silver_table": source}


def _event_of(
    spark: "SparkSession",
    silver: str,
    change: "DataFrame",
    columns: list[str],
    *,
    asked: str | None = None,
) -> dict[str, Any]:
    """The bronze event that `change`, a one-row frame of silver table `silver`, holds: the
    first in Kafka with its source position, operation and `columns`' values (a replayed
    source can write the same event twice). `asked`: the table the question was about."""
    from pyspark.sql import functions as F

    table = asked or silver
    prefix = silver.rsplit("_", 1)[0]  # silver.<t>_current or _history
    bronze = f"bronze.{prefix.removeprefix('silver.')}"
    if not spark.catalog.tableExists(bronze):
        raise HubError(f"{silver} has no bronze table {bronze} to trace its rows to.",
                       code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
    flat = events(spark.table(bronze), ChangelogSpec(bronze, prefix, ()))
    held = change.select(
        *[F.col(c).alias(f"_s_{c}") for c in columns],
        F.col(f"{POSITION}.major").alias("_s_major"),
        F.col(f"{POSITION}.minor").alias("_s_minor"),
        F.col(OP).alias("_s_op"),
    )
    # An update's event may lack a column's value (a TOASTed one), which silver kept from the
    # version before: that column is not compared.
    match = (
        (flat[f"{POSITION}.major"] == held["_s_major"])
        & (flat[f"{POSITION}.minor"] == held["_s_minor"])
        & (flat[OP] == held["_s_op"])
    )
    for column in columns:
        kept = F.array_contains(flat[UNAVAILABLE], column)
        match = match & (kept | flat[column].eqNullSafe(held[f"_s_{column}"]))
    event = (
        flat.join(held, match, "left_semi")
        .orderBy("_hub_partition", "_hub_offset")
        .select("_hub_partition", "_hub_offset")
        .limit(1)
        .collect()
    )
    if not event:
        raise HubError(f"That row of {table} holds a change no longer in {bronze}.",
                       code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
    return _answer(table, bronze, event[0])


def _as_of(spark: "SparkSession", table: str, pin: Pin) -> "DataFrame":
    """`table` at the version a gold table's newest entry read; the current version when that
    one is of another Delta table (a reprocessing swap replaced it since: the rebuilt table's
    versions are numbered anew) or can no longer be read (its log expired)."""
    from pyspark.errors import AnalysisException

    if pin.table_id is not None and pin.table_id != delta_table_id(spark, table):
        return spark.table(table)
    try:
        return at_version(spark, table, pin.version)  # a name from the ledger, checked by pattern
    except AnalysisException:
        return spark.table(table)


def _answer(table: str, bronze: str, event: Any) -> dict[str, Any]:
    return {
        "table": table,
        "bronze_table": bronze,
        "partition": event["_hub_partition"],
        "offset": event["_hub_offset"],
    }


def _typed(table: str, name: str, given: Any, data_type: "DataType") -> Any:
    """`given` (a JSON value, or text from `col=value`) as a value of the column's type."""
    from pyspark.sql import types as T

    number = isinstance(given, int | float | str) and not isinstance(given, bool)
    try:
        if isinstance(data_type, T.StringType) and isinstance(given, str | int):
            return str(given)
        if isinstance(data_type, T.BooleanType) and isinstance(given, bool):
            return given
        if isinstance(data_type, T.BooleanType) and str(given).lower() in ("true", "false"):
            return str(given).lower() == "true"
        integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
        whole = number and not isinstance(given, float)
        if isinstance(data_type, integral) and whole and -(2**63) <= int(given) < 2**63:
            return int(given)
        if isinstance(data_type, T.FloatType | T.DoubleType) and number:
            return float(given)
        if isinstance(data_type, T.DecimalType) and number:
            return Decimal(str(given))
        if isinstance(data_type, T.DateType) and isinstance(given, str):
            return dt.date.fromisoformat(given)
    except (ValueError, InvalidOperation):
        pass
    raise HubError(
        f"Column '{name}' of {table} is {data_type.simpleString()}: {str(given)[:64]!r} is not "
        "a value of that type.",
        code=ErrorCode.INVALID_ROW_KEY,
    )
