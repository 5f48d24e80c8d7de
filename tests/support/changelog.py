"""Bronze-shaped change events, written straight to Delta to drive silver and gold in tests.

The rows have the columns the bronze loader lands for a topic carrying the change-event
envelope, so silver and the warehouse read them exactly as they read real bronze tables.
"""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

SOURCE = StructType(
    [
        StructField("version", StringType(), False),
        StructField("connector", StringType(), False),
        StructField("name", StringType(), False),
        StructField("ts_ms", LongType(), False),
        StructField("snapshot", StringType(), True),
        StructField("db", StringType(), False),
        StructField("schema", StringType(), False),
        StructField("table", StringType(), False),
        StructField("txId", LongType(), True),
        StructField("lsn", LongType(), True),
        StructField("sequence", StringType(), True),
    ]
)

METADATA = [
    StructField("_hub_key", BinaryType(), True),
    StructField("_hub_partition", IntegerType(), True),
    StructField("_hub_offset", LongType(), True),
    StructField("_hub_timestamp", TimestampType(), True),
    StructField("_hub_schema_id", IntegerType(), True),
    StructField("_hub_ingested_at", TimestampType(), True),
    StructField("_hub_ingest_date", DateType(), True),
]


def envelope_schema(row: list[tuple[str, DataType]]) -> StructType:
    """The bronze columns of an envelope topic whose rows have the `row` columns."""
    value = StructType([StructField(name, t, True) for name, t in row])
    return StructType(
        [
            StructField("before", value, True),
            StructField("after", value, True),
            StructField("op", StringType(), False),
            StructField("ts_ms", LongType(), False),
            StructField("source", SOURCE, False),
            *METADATA,
        ]
    )


@dataclass
class ChangeLog:
    """Builds bronze rows of one table's change events with increasing Kafka offsets."""

    table: str
    row: list[tuple[str, DataType]]
    offset: int = 0
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def event(
        self,
        op: str,
        *,
        lsn: int | None,
        ts_ms: int,
        after: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        tx_id: int | None = None,
    ) -> tuple[Any, ...]:
        """One bronze row; the connector's `ts_ms` is the commit time plus a little."""
        self.offset += 1
        names = [n for n, _ in self.row]
        now = datetime.now(UTC)
        source = (
            "2.0", "postgresql", "shop", ts_ms, "false", "shop", "public",
            self.table, tx_id if tx_id is not None else lsn, lsn, None,
        )  # fmt: skip
        return (
            tuple(before.get(n) for n in names) if before else None,
            tuple(after.get(n) for n in names) if after else None,
            op,
            ts_ms + 7,
            source,
            None,
            0,
            self.offset,
            now,
            1,
            now,
            date.today(),
        )

    def frame(self, spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
        return spark.createDataFrame(rows, envelope_schema(self.row))

    def append(self, spark: SparkSession, bronze_table: str, rows: list[tuple[Any, ...]]) -> None:
        """Append rows to a bronze Delta table as the bronze loader would."""
        self.frame(spark, rows).write.format("delta").mode("append").partitionBy(
            "_hub_ingest_date"
        ).saveAsTable(bronze_table)
