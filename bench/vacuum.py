"""VACUUM of small bronze-like tables: the loader's maintenance against Delta's own defaults.

Delta's VACUUM lists a table's files with Spark jobs whose task count it takes from Spark's
`spark.sql.sources.parallelPartitionDiscovery.parallelism` (10,000 by default), whatever the
table's size. The loader runs VACUUM with `HUB_LOADER_VACUUM_LISTING_TASKS` tasks per listing
job instead (by default one per core; `TableMaintenance`). This makes `--tables` tables laid out
as bronze is (partitioned by ingest date, `--days` dates, `--batches` appends each, then
OPTIMIZE, so there are files for VACUUM to weigh), then VACUUMs each table both ways, taking
turns, `--repeats` times. It prints each way's median time per table, the tasks one VACUUM ran,
the ratio, and the peak memory (resident set) of the Spark driver's JVM and of this Python.

    .venv/bin/python bench/vacuum.py    # about 5 minutes on 2 cores
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import local_loader_settings, peak_rss_mb, self_peak_rss_mb, spark_driver_pid  # noqa: E402
from spark_loaders.services.session import spark_session  # noqa: E402
from spark_loaders.tables.maintenance import TableMaintenance  # noqa: E402


def _timed(spark: Any, group: str, vacuum: Callable[[], object]) -> tuple[float, int]:
    """Run `vacuum` with its Spark jobs in `group`: its wall time and how many tasks it ran."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        started = time.perf_counter()
        vacuum()
        seconds = time.perf_counter() - started
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    tracker = context.statusTracker()
    jobs = [tracker.getJobInfo(job) for job in tracker.getJobIdsForGroup(group)]
    stages = [tracker.getStageInfo(stage) for job in jobs if job for stage in job.stageIds]
    return seconds, sum(stage.numTasks for stage in stages if stage)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--days", type=int, default=7, help="ingest dates (partitions) per table")
    parser.add_argument("--batches", type=int, default=5, help="appends per table")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="hub-bench-vacuum-"))
    settings = local_loader_settings(home)
    print(f"cores: {os.cpu_count()}, {args.tables} tables x {args.days} dates x "
          f"{args.batches} appends, home: {home}")  # fmt: skip
    with spark_session(settings, app_name="hub-bench-vacuum") as spark:
        jvm_pid = spark_driver_pid(spark)
        spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
        tables = [f"bronze.bench_vacuum_{n}" for n in range(args.tables)]
        for table in tables:
            for batch in range(args.batches):
                rows = spark.range(batch * 100, batch * 100 + 100).selectExpr(
                    "id", f"date_add(date'2026-11-01', cast(id % {args.days} AS int)) AS day"
                )
                writer = rows.write.format("delta").mode("append").partitionBy("day")
                writer.saveAsTable(table)
            spark.sql(f"OPTIMIZE {table}")
        print(f"  {len(tables)} tables written and compacted", flush=True)

        maintenance = TableMaintenance(spark, settings)
        hours = settings.vacuum_retention_hours
        ways: dict[str, Callable[[str], object]] = {
            "Delta's defaults": lambda t: spark.sql(f"VACUUM {t} RETAIN {hours:g} HOURS"),
            "the loader's maintenance": lambda t: maintenance._vacuum(t),
        }
        times: dict[str, list[float]] = {way: [] for way in ways}
        tasks: dict[str, int] = {}
        runs = 0
        for repeat in range(args.repeats):
            for table in tables:
                for way, vacuum in ways.items():
                    runs += 1
                    seconds, count = _timed(spark, f"vacuum-{runs}", lambda: vacuum(table))  # noqa: B023
                    times[way].append(seconds)
                    tasks[way] = count
            print(f"  round {repeat + 1}/{args.repeats} done", flush=True)
        jvm_peak = peak_rss_mb(jvm_pid)

    medians = {way: statistics.median(t) for way, t in times.items()}
    baseline = medians["Delta's defaults"]
    print()
    print(f"{'VACUUM of one table':<28} {'median':>9} {'tasks':>9} {'ratio':>7}")
    for way, seconds in medians.items():
        print(f"{way:<28} {seconds:>7.2f} s {tasks[way]:>9,} {seconds / baseline:>6.2f}x")
    print(f"peak RSS: Spark driver JVM {jvm_peak:.0f} MB, Python {self_peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
