"""A silver row by its key, for row lineage (`GET /row` on the loader's health port, ADR 0042).

Silver rows keep the source position of the change event they hold (`_hub_position`: the LSN
and transaction id, or the event's time without an LSN), not its Kafka position. So the row is
found by its key in silver, and then its event in the silver table's bronze table: the bronze
row with the same key and source position, whose `_hub_partition` and `_hub_offset` lineage
traces further. A replayed source can write the same event twice; the first in Kafka is named.
Both lookups take Spark queries, so they run here, on the loader's driver, and not in the API,
which has no Spark.

Nothing the caller sends becomes SQL text: the table must be one of the silver tables in the
metastore, its name checked against a pattern first; the key's columns must be columns of that
table; each value is converted to its column's type in Python and compared with a literal
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
    VALID_FROM,
    VALID_TO,
    ChangelogSpec,
    events,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

_SILVER_TABLE = re.compile(r"silver\.([a-z0-9_]{1,240}_(?:current|history))")
MAX_KEY_COLUMNS = 8


def row_position(spark: "SparkSession", table: str, key: dict[str, Any]) -> dict[str, Any]:
    """The `_hub_partition` and `_hub_offset` of the row of `table` whose columns equal `key`:
    the current row of a `_current` table, the newest version of a `_history` table."""
    from pyspark.sql import functions as F

    match = _SILVER_TABLE.fullmatch(table)
    if match is None or not spark.catalog.tableExists(table):
        raise HubError(
            f"'{table[:300]}' is not a silver table of this loader: rows are found by key in "
            "silver.<table>_current and silver.<table>_history.",
            code=ErrorCode.LINEAGE_NOT_FOUND,
        )
    if not key or len(key) > MAX_KEY_COLUMNS:
        raise HubError(
            f"Give the row's key as 1 to {MAX_KEY_COLUMNS} columns and their values.",
            code=ErrorCode.INVALID_ROW_KEY,
        )
    frame = spark.table(table)
    scd = (VALID_FROM, VALID_TO, IS_CURRENT, IS_DELETED)
    types = {
        f.name: f.dataType
        for f in frame.schema.fields
        if not f.name.startswith("_hub_") and f.name not in scd
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
    found = (
        frame.where(condition)
        .orderBy(F.col(POSITION).desc())
        .select(POSITION, OP)
        .limit(2)
        .collect()
    )
    shown = ", ".join(f"{n}={v!r}" for n, v in sorted(key.items()))
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
    position, op = found[0][POSITION], found[0][OP]
    bronze = f"bronze.{match.group(1).rsplit('_', 1)[0]}"
    if not spark.catalog.tableExists(bronze):
        raise HubError(f"{table} has no bronze table {bronze} to trace its rows to.",
                       code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
    spec = ChangelogSpec(bronze, table.rsplit("_", 1)[0], tuple(sorted(key)))
    same = condition & (F.col(f"{POSITION}.major") == F.lit(position["major"]))
    same = same & (F.col(f"{POSITION}.minor") == F.lit(position["minor"])) & (F.col(OP) == op)
    event = (
        events(spark.table(bronze), spec)
        .where(same)
        .orderBy("_hub_partition", "_hub_offset")
        .select("_hub_partition", "_hub_offset")
        .limit(1)
        .collect()
    )
    if not event:
        raise HubError(
            f"The row of {table} with {shown} holds a change no longer in {bronze}.",
            code=ErrorCode.LINEAGE_NOT_FOUND,
        )
    return {
        "table": table,
        "bronze_table": bronze,
        "partition": event[0]["_hub_partition"],
        "offset": event[0]["_hub_offset"],
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
