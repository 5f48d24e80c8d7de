"""The loader's `/status` reads tables' facts from their Delta logs with plain Python
(spark_loaders/tables/delta_log.py): on tables Delta itself wrote, the rows, version and commit time
agree with what Spark says, through appends, a MERGE's rewrite and a quarantine's reasons."""

import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_loaders.tables.delta_log import TableLog

pytestmark = pytest.mark.integration


def test_rows_version_and_commit_time_match_spark_through_appends_and_rewrites(
    spark: SparkSession, tmp_path: Path
) -> None:
    from delta.tables import DeltaTable

    location = tmp_path / "bronze.db" / "shop_orders"
    followed = TableLog(location)
    before = time.time()
    spark.range(0, 5).write.format("delta").save(str(location))
    first = followed.refresh()
    spark.range(5, 8).write.format("delta").mode("append").save(str(location))
    # A MERGE rewrites files: removes and adds in one commit.
    updates = spark.range(0, 10).selectExpr("id", "id * 10 AS value")
    (
        DeltaTable.forPath(spark, str(location)).alias("t")
        .merge(updates.alias("s"), "t.id = s.id")
        .whenNotMatchedInsert(values={"id": "s.id"})
        .execute()
    )  # fmt: skip
    latest = followed.refresh()

    assert first is not None and (first.rows, first.version) == (5, 0)
    history = DeltaTable.forPath(spark, str(location)).history(1).collect()[0]
    assert latest is not None
    assert latest.rows == spark.read.format("delta").load(str(location)).count() == 10
    assert latest.version == history["version"]
    assert latest.committed_ms is not None
    assert before - 1 <= latest.committed_ms / 1000 <= time.time() + 1
    # DESCRIBE HISTORY gives the commit file's modification time, a few ms after commitInfo's.
    assert abs(latest.committed_ms / 1000 - history["timestamp"].timestamp()) < 1


def test_a_quarantine_tables_records_are_counted_by_reason(
    spark: SparkSession, tmp_path: Path
) -> None:
    location = tmp_path / "quarantine.db" / "shop_orders"
    for reason, count in (("SCHEMA_UNRESOLVABLE", 2), ("NOT_CONFLUENT_FRAMED", 1)):
        rows = spark.range(count).selectExpr(
            "id AS _hub_offset", f"'{reason}' AS _hub_reason_code", "'why' AS _hub_reason"
        )
        rows.coalesce(1).write.format("delta").mode("append").save(str(location))

    facts = TableLog(location).refresh()

    assert facts is not None and facts.rows == 3
    assert facts.by_reason == {"SCHEMA_UNRESOLVABLE": 2, "NOT_CONFLUENT_FRAMED": 1}
