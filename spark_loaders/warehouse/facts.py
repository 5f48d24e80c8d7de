"""Fact tables `gold.fact_<name>`: bronze event records with foreign keys to dimension versions.

Each build reads the fact feed's bronze table, gives every business key without a dimension row
an inferred member, looks up for every fact the dimension version valid at the fact's time, and
MERGEs by grain: new facts are inserted, facts whose keys or measures changed are updated, all
others are left alone, so a build repeated on the same data commits no change.
"""

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from hub_core.naming import TopicName, bronze_table
from spark_loaders.tables.comments import set_table_comment
from spark_loaders.tables.delta_tables import save_as_new_table, stamp_feeds_once
from spark_loaders.tables.maintenance import new_table_properties
from spark_loaders.tables.merges import detached, without_unchanged
from spark_loaders.warehouse.dimensions import (
    UNKNOWN_KEY,
    VALID_FROM,
    DimensionBuilder,
    dim_table,
    surrogate,
)
from spark_loaders.warehouse.errors import WarehouseSourceNotFound
from spark_loaders.warehouse.model import Fact, ScdType, WarehouseModel
from spark_loaders.warehouse.snapshots import Snapshots


def fact_table(fact: Fact) -> str:
    return f"gold.fact_{fact.name}"


class FactBuilder:
    """Refreshes one fact table; its dimensions must have been refreshed first."""

    def __init__(
        self,
        spark: SparkSession,
        model: WarehouseModel,
        fact: Fact,
        dimensions: dict[str, DimensionBuilder],
        *,
        where: str,
        snapshots: Snapshots | None = None,
    ) -> None:
        self._spark = spark
        self._model = model
        self._fact = fact
        self._dimensions = dimensions
        self._where = where
        # Bronze and the dimensions are read at the versions the build pinned (its ledger
        # entry names them).
        self._snapshots = snapshots or Snapshots(spark)

    def refresh(self) -> int:
        """Bring the fact table up to date; returns how many fact rows it holds."""
        self.add_inferred()
        return self.write()

    def add_inferred(self) -> None:
        """Give every business key of the facts without a dimension row an inferred member."""
        rows = self._source()
        for ref in self._fact.dimensions:
            dim = self._model.dimension(ref.dimension)
            keys = rows.select(*[F.col(f).alias(d) for f, d in ref.columns.items()])
            not_null = F.lit(True)
            for column in dim.business_key:
                not_null = not_null & F.col(column).isNotNull()
            self._dimensions[dim.name].add_inferred(keys.where(not_null).distinct())

    def write(self) -> int:
        """Look every fact's keys up in its dimensions (`add_inferred` first) and merge the
        facts that change; returns how many fact rows the table holds."""
        fact = self._fact
        rows = self._source()
        keyed = rows
        for ref in fact.dimensions:
            keyed = self._look_up(keyed, ref.dimension, ref.columns, ref.as_of or fact.event_time)
        columns = [
            *fact.grain,
            fact.event_time,
            *[surrogate(self._model.dimension(r.dimension)) for r in fact.dimensions],
            *[m for m in fact.measures if m not in fact.grain],
        ]
        facts = detached(keyed.select(*dict.fromkeys(columns)))
        self._write(facts)
        return self._spark.table(fact_table(fact)).count()

    def _source(self) -> DataFrame:
        """The fact feed's bronze records, one per grain (the latest record wins)."""
        fact = self._fact
        table = bronze_table(TopicName(fact.source))
        if not self._spark.catalog.tableExists(table):
            raise WarehouseSourceNotFound(
                f"{self._where}.source: bronze table {table} of feed {fact.source!r} does not "
                "exist; publish to the feed and run the loader first."
            )
        rows = self._snapshots.read(table)
        needed = {
            "grain": fact.grain,
            "event_time": [fact.event_time],
            "measures": fact.measures,
            "dimensions": [c for r in fact.dimensions for c in (*r.columns, r.as_of) if c],
        }
        for field, columns in needed.items():
            for column in columns:
                if column not in rows.columns:
                    choices = [c for c in rows.columns if not c.startswith("_hub_")]
                    raise WarehouseSourceNotFound(
                        f"{self._where}.{field}: column {column!r} is not in {table}; "
                        f"valid choices: {', '.join(choices)}"
                    )
        latest = Window.partitionBy(*fact.grain).orderBy(
            F.desc("_hub_timestamp"), F.desc("_hub_partition"), F.desc("_hub_offset")
        )
        return rows.withColumn("_n", F.row_number().over(latest)).where("_n = 1").drop("_n")

    def _look_up(
        self, rows: DataFrame, dimension: str, columns: dict[str, str], as_of: str
    ) -> DataFrame:
        """Add the dimension's surrogate key: the version valid at `as_of`, or -1 for no key."""
        dim = self._model.dimension(dimension)
        key = surrogate(dim)
        # At the version the build pinned after adding inferred members (its entry names it).
        table = self._snapshots.read(dim_table(dim)).where(F.col(key) != UNKNOWN_KEY)
        renamed = {bk: f"_d_{bk}" for bk in dim.business_key}
        members = table.select(
            F.col(key).alias("_d_key"),
            *[F.col(bk).alias(alias) for bk, alias in renamed.items()],
            *([F.col(VALID_FROM).alias("_d_from")] if dim.scd_type is ScdType.VERSIONED else []),
        )
        condition = F.lit(True)
        for fact_column, bk in columns.items():
            condition = condition & (F.col(fact_column) == F.col(renamed[bk]))
        if dim.scd_type is ScdType.VERSIONED:
            # The latest version that started at or before the fact: the one valid then, or,
            # after the member was deleted, the last one it had.
            condition = condition & (F.col("_d_from") <= F.col(as_of).cast("timestamp"))
        joined = rows.join(members, condition, "left")
        if dim.scd_type is ScdType.VERSIONED:
            best = Window.partitionBy(*self._fact.grain).orderBy(F.desc_nulls_last("_d_from"))
            joined = joined.withColumn("_n", F.row_number().over(best)).where("_n = 1")
            joined = joined.drop("_n", "_d_from")
        return joined.withColumn(
            key, F.coalesce(F.col("_d_key"), F.lit(UNKNOWN_KEY).cast("long"))
        ).drop("_d_key", *renamed.values())

    def feeds(self) -> list[str]:
        """The feeds the fact table is built from: its source and its dimensions' sources."""
        fact = self._fact
        return [fact.source] + [self._model.dimension(r.dimension).source for r in fact.dimensions]

    def _write(self, facts: DataFrame) -> None:
        table = fact_table(self._fact)
        if not self._spark.catalog.tableExists(table):
            self._spark.sql("CREATE DATABASE IF NOT EXISTS gold")
            save_as_new_table(
                self._spark,
                facts.write.format("delta").options(**new_table_properties(self._spark, table)),
                table,
            )
            set_table_comment(
                self._spark,
                table,
                f"Facts {self._fact.name} from {self._fact.source}, "
                f"one row per {', '.join(self._fact.grain)}.",
            )
            stamp_feeds_once(self._spark, table, self.feeds())
            return
        stamp_feeds_once(self._spark, table, self.feeds())
        # Only the facts that change: a MERGE matching unchanged rows would still commit.
        facts = without_unchanged(facts, self._spark.table(table))
        if facts.isEmpty():
            return
        grain = " AND ".join(f"t.{c} <=> s.{c}" for c in self._fact.grain)
        others = [c for c in facts.columns if c not in self._fact.grain]
        differs = " OR ".join(f"NOT (t.{c} <=> s.{c})" for c in others) or "false"
        (
            DeltaTable.forName(self._spark, table)
            .alias("t")
            .merge(facts.alias("s"), grain)
            .whenMatchedUpdate(condition=differs, set={c: f"s.{c}" for c in others})
            .whenNotMatchedInsertAll()
            .execute()
        )
