"""Dimension tables `gold.dim_<name>` from silver history: versions, surrogate keys, members.

Surrogate keys are bigints handed out in order (the largest key so far plus one) and stored: a
member version keeps its key for the life of the table. Versions are identified by (business
key, valid_from); the first version of every member starts at `BEGINNING`, so an inferred member
(made for a fact that arrived first) and the member's real first version are the same row, and
the real data completes the inferred row in place, under the same key.
"""

from datetime import datetime

from delta.tables import DeltaTable
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StructField, StructType, TimestampType

from hub_core.naming import TopicName, table_suffix
from spark_loaders.tables.comments import set_table_comment
from spark_loaders.tables.delta_tables import save_as_new_table, stamp_feeds_once
from spark_loaders.tables.maintenance import new_table_properties
from spark_loaders.tables.merges import without_unchanged
from spark_loaders.warehouse.errors import WarehouseSourceNotFound
from spark_loaders.warehouse.model import Dimension, ScdType
from spark_loaders.warehouse.snapshots import Snapshots

UNKNOWN_KEY = -1
BEGINNING = datetime(1900, 1, 1)
VALID_FROM = "valid_from"
VALID_TO = "valid_to"
IS_CURRENT = "is_current"
IS_INFERRED = "is_inferred"


def dim_table(dim: Dimension) -> str:
    return f"gold.dim_{dim.name}"


def surrogate(dim: Dimension) -> str:
    return f"{dim.name}_key"


def history_table(topic: str) -> str:
    return f"silver.{table_suffix(TopicName(topic))}_history"


def identity(dim: Dimension) -> list[str]:
    """The columns naming one row of the dimension besides its surrogate key."""
    return (
        [*dim.business_key, VALID_FROM] if dim.scd_type is ScdType.VERSIONED else dim.business_key
    )


class DimensionBuilder:
    """Creates and refreshes one dimension table."""

    def __init__(
        self,
        spark: SparkSession,
        dim: Dimension,
        *,
        where: str,
        snapshots: Snapshots | None = None,
    ) -> None:
        self._spark = spark
        self._dim = dim
        self._where = where  # the model path, for messages
        # Silver history is read at the version the build pinned (its ledger entry names it).
        self._snapshots = snapshots or Snapshots(spark)

    def ensure_table(self) -> None:
        """Create the table with its unknown member (key -1) when missing."""
        dim = self._dim
        if self._spark.catalog.tableExists(dim_table(dim)):
            stamp_feeds_once(self._spark, dim_table(dim), [dim.source])
            return
        history = self._history()
        fields = [StructField(surrogate(dim), LongType(), False)]
        fields += [history.schema[c] for c in [*dim.business_key, *dim.attributes]]
        if dim.scd_type is ScdType.VERSIONED:
            fields += [
                StructField(VALID_FROM, TimestampType(), True),
                StructField(VALID_TO, TimestampType(), True),
                StructField(IS_CURRENT, BooleanType(), True),
            ]
        fields.append(StructField(IS_INFERRED, BooleanType(), True))
        schema = StructType(
            [StructField(f.name, f.dataType, f.name != surrogate(dim)) for f in fields]
        )
        unknown: dict[str, object] = {f.name: None for f in fields}
        unknown.update({surrogate(dim): UNKNOWN_KEY, IS_INFERRED: False})
        if dim.scd_type is ScdType.VERSIONED:
            unknown.update({VALID_FROM: BEGINNING, IS_CURRENT: True})
        self._spark.sql("CREATE DATABASE IF NOT EXISTS gold")
        unknown_row = self._spark.createDataFrame([tuple(unknown[f.name] for f in fields)], schema)
        save_as_new_table(
            self._spark,
            unknown_row.write.format("delta").options(
                **new_table_properties(self._spark, dim_table(dim))
            ),
            dim_table(dim),
        )
        set_table_comment(
            self._spark,
            dim_table(dim),
            f"Dimension {dim.name} from {dim.source} (SCD type {int(dim.scd_type)}); "
            f"key {UNKNOWN_KEY} is the unknown member.",
        )
        stamp_feeds_once(self._spark, dim_table(dim), [dim.source])

    def refresh(self) -> None:
        """Merge the versions silver history implies; existing rows keep their keys."""
        self.ensure_table()
        self._merge(self._versions().withColumn(IS_INFERRED, F.lit(False)), overwrite=True)

    def add_inferred(self, business_keys: DataFrame) -> None:
        """Add an inferred member for each business key that has no row yet."""
        dim = self._dim
        table = self._spark.table(dim_table(dim))
        missing = business_keys.join(table.select(*dim.business_key), dim.business_key, "left_anti")
        rows = missing.select(
            *dim.business_key,
            *[F.lit(None).cast(table.schema[c].dataType).alias(c) for c in dim.attributes],
        )
        if dim.scd_type is ScdType.VERSIONED:
            rows = rows.select(
                "*",
                F.lit(BEGINNING).alias(VALID_FROM),
                F.lit(None).cast("timestamp").alias(VALID_TO),
                F.lit(True).alias(IS_CURRENT),
            )
        self._merge(rows.withColumn(IS_INFERRED, F.lit(True)), overwrite=False)

    def _merge(self, rows: DataFrame, *, overwrite: bool) -> None:
        dim = self._dim
        key = surrogate(dim)
        table = self._spark.table(dim_table(dim)).where(F.col(key) != UNKNOWN_KEY)
        ident = identity(dim)
        known = rows.join(table.select(key, *ident), ident, "left")
        top = table.agg(F.coalesce(F.max(key), F.lit(0)).alias("_top"))
        numbered = (
            known.crossJoin(top)
            .withColumn(
                key,
                F.coalesce(
                    F.col(key),
                    F.col("_top")
                    + F.row_number().over(
                        Window.partitionBy(F.col(key).isNull()).orderBy(*[F.col(c) for c in ident])
                    ),
                ),
            )
            .drop("_top")
        )
        # Only the rows that change: a MERGE matching unchanged rows would still commit.
        source = without_unchanged(numbered, self._spark.table(dim_table(dim)))
        if source.isEmpty():
            return
        updated = [c for c in source.columns if c not in (key, *ident)]
        differs = " OR ".join(f"NOT (t.{c} <=> s.{c})" for c in updated)
        merge = (
            DeltaTable.forName(self._spark, dim_table(dim))
            .alias("t")
            .merge(source.alias("s"), f"t.{key} = s.{key}")
        )
        if overwrite:
            merge = merge.whenMatchedUpdate(condition=differs, set={c: f"s.{c}" for c in updated})
        merge.whenNotMatchedInsertAll().execute()

    def _history(self) -> DataFrame:
        table = history_table(self._dim.source)
        if not self._spark.catalog.tableExists(table):
            raise WarehouseSourceNotFound(
                f"{self._where}.source: silver table {table} of feed {self._dim.source!r} does "
                "not exist; the feed must be a changelog (change-event envelope) landed in "
                "bronze, and silver must have run (`hub warehouse build` runs it first)."
            )
        history = self._snapshots.read(table)
        for field in ("business_key", "attributes"):
            for column in getattr(self._dim, field):
                if column not in history.columns:
                    choices = [c for c in history.columns if not c.startswith("_hub_")]
                    raise WarehouseSourceNotFound(
                        f"{self._where}.{field}: column {column!r} is not in {table}; "
                        f"valid choices: {', '.join(choices)}"
                    )
        return history

    def _versions(self) -> DataFrame:
        """One row per member version with only the tracked attributes (type 1: one per member)."""
        dim = self._dim
        keys = dim.business_key
        history = self._history().where(_all_not_null(keys))
        order = Window.partitionBy(*keys).orderBy("_hub_position")
        tracked = F.struct(*dim.attributes)
        if dim.scd_type is ScdType.OVERWRITE:
            latest = (
                history.where(~F.col("is_deleted"))
                .withColumn("_n", F.row_number().over(order.orderBy(F.desc("_hub_position"))))
                .where("_n = 1")
            )
            return latest.select(*keys, *dim.attributes)
        # A new version starts where tracked attributes change or a member comes back.
        previous = F.lag(tracked).over(order)
        starts = previous.isNull() | F.lag("is_deleted").over(order) | ~previous.eqNullSafe(tracked)
        live = history.withColumn("_start", starts.cast("int")).where(~F.col("is_deleted"))
        running = order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        grouped = live.withColumn("_version", F.sum("_start").over(running))
        versions = grouped.groupBy(*keys, "_version").agg(
            *[F.first(c).alias(c) for c in dim.attributes],
            F.min(VALID_FROM).alias(VALID_FROM),
            F.max_by(VALID_TO, "_hub_position").alias(VALID_TO),
        )
        first = Window.partitionBy(*keys).orderBy(VALID_FROM)
        return versions.select(
            *keys,
            *dim.attributes,
            F.when(F.row_number().over(first) == 1, F.lit(BEGINNING))
            .otherwise(F.col(VALID_FROM))
            .alias(VALID_FROM),
            VALID_TO,
            F.col(VALID_TO).isNull().alias(IS_CURRENT),
        )


def _all_not_null(columns: list[str]) -> Column:
    condition = F.lit(True)
    for column in columns:
        condition = condition & F.col(column).isNotNull()
    return condition
