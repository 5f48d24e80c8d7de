"""Table maintenance: a table of many small batches is compacted without changing what it
holds or what time travel reads, and tables of the auto-compacting layers compact themselves."""

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spark_loaders.tables.maintenance import AUTO_COMPACT, TableMaintenance, new_table_properties

LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"

pytestmark = pytest.mark.integration

BATCHES = 12


def _files(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE DETAIL {table}").first()["numFiles"])


def _append_batches(spark: Any, table: str, batches: int) -> None:
    for batch in range(batches):
        rows = spark.range(batch * 10, batch * 10 + 10).selectExpr("id", "id * 2 AS doubled")
        writer = rows.coalesce(1).write.format("delta").mode("append")
        if batch == 0:
            writer = writer.options(**new_table_properties(spark, table))
        writer.saveAsTable(table)


def test_optimize_compacts_many_small_files_and_keeps_rows_and_history(
    spark: Any, loader_settings: Any
) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
    table = f"bronze.maintenance_{uuid.uuid4().hex[:8]}"
    _append_batches(spark, table, BATCHES)
    assert _files(spark, table) == BATCHES
    before = sorted(tuple(r) for r in spark.table(table).collect())

    maintenance = TableMaintenance(spark, loader_settings)
    assert table in maintenance.tables(["bronze"])
    with _job_group(spark, f"maintain-{table}") as tasks:
        result = maintenance.maintain(table)
    # VACUUM lists the files with a task per core, not Spark's 10,000 per listing job.
    assert tasks() < 1_000
    assert spark.conf.get(LISTING_TASKS, None) is None  # the session's conf as it was

    assert result.error is None
    assert (result.files_before, result.files_after) == (BATCHES, 1)
    assert _files(spark, table) == 1
    assert sorted(tuple(r) for r in spark.table(table).collect()) == before
    # VACUUM kept the replaced files: versions within the retention still read.
    first = spark.read.format("delta").option("versionAsOf", 0).table(table)
    assert sorted(r["id"] for r in first.collect()) == list(range(10))
    properties = _properties(spark, table)
    # Bronze does not compact on write by default: each batch would pay for it.
    assert AUTO_COMPACT not in properties
    # The table keeps its log and its removed files as long as VACUUM keeps history, not
    # Delta's 30 days of log that every query would list.
    retention = f"interval {loader_settings.vacuum_retention_hours:g} hours"
    assert properties["delta.logRetentionDuration"] == retention
    assert properties["delta.deletedFileRetentionDuration"] == retention


def test_tables_of_auto_compacting_layers_compact_as_they_are_written(spark: Any) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS silver")
    table = f"silver.maintenance_{uuid.uuid4().hex[:8]}"
    # Delta compacts once this many small files gathered (default 50: smaller here, for speed).
    spark.conf.set("spark.databricks.delta.autoCompact.minNumFiles", "4")
    try:
        _append_batches(spark, table, BATCHES)
    finally:
        spark.conf.unset("spark.databricks.delta.autoCompact.minNumFiles")

    assert _properties(spark, table)[AUTO_COMPACT] == "true"
    assert _files(spark, table) < BATCHES / 2
    assert spark.table(table).count() == BATCHES * 10


def test_one_tables_failure_is_reported_and_the_others_are_maintained(
    spark: Any, loader_settings: Any
) -> None:
    spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
    table = f"bronze.maintenance_{uuid.uuid4().hex[:8]}"
    _append_batches(spark, table, 3)
    maintenance = TableMaintenance(spark, loader_settings)

    missing = maintenance.maintain("bronze.no_such_table_here")
    done = maintenance.maintain(table)

    assert missing.error is not None and "no_such_table_here" in missing.error
    assert done.error is None and done.files_after == 1


@contextlib.contextmanager
def _job_group(spark: Any, group: str) -> Iterator[Callable[[], int]]:
    """Run the block's Spark jobs in `group`; yields how many tasks they had."""
    context = spark.sparkContext
    context.setJobGroup(group, group)

    def tasks() -> int:
        tracker = context.statusTracker()
        jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(group)]
        stages = [tracker.getStageInfo(s) for job in jobs if job for s in job.stageIds]
        return sum(stage.numTasks for stage in stages if stage)

    try:
        yield tasks
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
        context.setLocalProperty("spark.job.description", None)


def _properties(spark: Any, table: str) -> dict[str, str]:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}
