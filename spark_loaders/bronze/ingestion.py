"""When rows are landed (a batch, a replay, a rebuild): their `_hub_ingested_at` and ingestion date.

Spark writes a timestamp literal into the code it generates for a query as a number. A batch
stamped with `current_timestamp()` therefore ran code that differed from the previous batch's
by that number alone: Spark compiled it again, and the JVM ran it cold, interpreted, until its
JIT compiler had compiled the new class again, on cores the batch needed. Here the time is an
array literal, which generated code reads by reference, and its element is taken at an index
Spark cannot fold into a constant (`_hub_partition * 0`: every bronze and quarantine row has
the column), so each batch runs the code the previous one compiled. At 1,000 records/s the
loader compiled about two classes per batch before and none after, and catching up 1,000,000
records took 3.27 s instead of 3.50 s with a constant in place of the time (docs/loaders.md,
"Per-batch work"; `tests/e2e/test_loader_batches.py` counts the compilations).

The date is a literal: it changes the code once a day.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import Column
from pyspark.sql import functions as F

from spark_loaders.tables.delta_tables import PARTITION_COLUMN


@dataclass(frozen=True)
class IngestionTime:
    """One batch's landing time (aware, UTC), as the columns its rows get."""

    at: datetime

    @classmethod
    def now(cls) -> "IngestionTime":
        return cls(datetime.now(UTC))

    @property
    def column(self) -> Column:
        """`_hub_ingested_at` of rows that have `_hub_partition` (quarantine rows)."""
        return F.get(F.lit([self.at]), F.col("_hub_partition") * 0)

    def columns(self) -> dict[str, Column]:
        """`_hub_ingested_at` and `_hub_ingest_date` (its UTC date, the bronze tables'
        partition column) of rows that have `_hub_partition`."""
        return {"_hub_ingested_at": self.column, PARTITION_COLUMN: F.lit(self.at.date())}
