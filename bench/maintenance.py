"""Table maintenance: an analyst's query on a table of many micro-batches, before and after
maintenance, against the same rows written in one batch.

A loader on a 1 s trigger appends a few small files per batch. This lands `--batches` appends
(default 3,000: under an hour of a 1 s trigger) of `--rows` rows each into a table laid out as
bronze is (partitioned by ingest date), writes the same rows in one batch into a second table
(the baseline), and times a typical analyst query (a filtered aggregate over every row) on:

1. the table of many batches, as the loader left it;
2. the same table after `TableMaintenance.maintain` (OPTIMIZE, then VACUUM), as the loader's
   scheduled maintenance or `hub load maintain` runs it;
3. the baseline.

4. the maintained table and the baseline again, as the analyst server reads them with
   `HUB_ANALYST_SNAPSHOT_STALENESS_SECONDS` (`--staleness`, 5 s): from the state Delta last
   loaded, refreshed in the background, instead of listing the table's log first.

Each query time is the median of `--repeats` runs after one warm-up run, the two tables taking
turns. It prints the data files and log files of each table, the medians, the ratios to the
baseline measured beside them (the target: maintained within 1.2x), the time landing and
maintenance took, and the peak memory (resident set) of the Spark driver's JVM and of this
Python process.

The session reads the tables as every hub session does, through the hub's log store for local
tables (`NameFirstLogStore`); `--delta-log-store` reads them through Delta's own HDFS log store,
which lists the whole log folder before each query, for comparison.

    .venv/bin/python bench/maintenance.py                 # about 15 minutes on 2 cores
    .venv/bin/python bench/maintenance.py --batches 300   # a quick look, 2 minutes
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import local_loader_settings, peak_rss_mb, self_peak_rss_mb, spark_driver_pid  # noqa: E402
from spark_loaders.services.analyst import staleness_conf  # noqa: E402
from spark_loaders.services.analyst_settings import AnalystSettings  # noqa: E402
from spark_loaders.services.session import (  # noqa: E402
    LOCAL_LOG_STORE,
    LOCAL_LOG_STORE_CONF,
    spark_session,
)
from spark_loaders.tables.maintenance import TableMaintenance  # noqa: E402

QUERY = """
    SELECT category, count(*) AS orders, round(sum(amount), 2) AS revenue,
           count(DISTINCT customer) AS customers
    FROM {table}
    WHERE amount > 10
    GROUP BY category
    ORDER BY category
"""


def _rows(spark: Any, start: int, count: int) -> Any:
    """Order-like rows: ids from `start`, 1,000 customers, 20 categories, one ingest date."""
    return spark.range(start, start + count).selectExpr(
        "id",
        "id % 1000 AS customer",
        "concat('c', id % 20) AS category",
        "cast(id * 7 % 10000 AS double) / 100 AS amount",
        "current_timestamp() AS _hub_ingested_at",
        "date'2026-11-24' AS _hub_ingest_date",
    )


def _files(spark: Any, table: str) -> int:
    return int(spark.sql(f"DESCRIBE DETAIL {table}").first()["numFiles"])


def _medians(spark: Any, tables: list[str], repeats: int) -> tuple[list[float], list[Any]]:
    """Each table's median query wall time over `repeats` runs after a warm-up, the tables taking
    turns so that all of them see the same machine conditions, and each one's answer."""
    sqls = [QUERY.format(table=table) for table in tables]
    answers = [spark.sql(sql).collect() for sql in sqls]
    times: list[list[float]] = [[] for _ in tables]
    for _ in range(repeats):
        for sql, table_times in zip(sqls, times, strict=True):
            started = time.perf_counter()
            spark.sql(sql).collect()
            table_times.append(time.perf_counter() - started)
    return [statistics.median(t) for t in times], answers


def _log_files(spark: Any, table: str) -> int:
    """Files in the table's _delta_log (commits, checksums, checkpoints): each query lists them."""
    location = spark.sql(f"DESCRIBE DETAIL {table}").first()["location"]
    return sum(1 for _ in Path(location.removeprefix("file:"), "_delta_log").iterdir())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--rows", type=int, default=200, help="rows per batch")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--staleness",
        type=float,
        default=5.0,
        help="HUB_ANALYST_SNAPSHOT_STALENESS_SECONDS of the last two measurements",
    )
    parser.add_argument(
        "--delta-log-store",
        action="store_true",
        help="read the tables with Delta's own HDFS log store instead of the hub's (the "
        "comparison: it lists the whole log folder before each query)",
    )
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="hub-bench-maintenance-"))
    settings = local_loader_settings(home, driver_memory="2g")
    print(f"cores: {os.cpu_count()}, batches: {args.batches} x {args.rows} rows, home: {home}")
    store = "io.delta.storage.HDFSLogStore" if args.delta_log_store else LOCAL_LOG_STORE
    print(f"log store for local tables: {store}")
    conf = {LOCAL_LOG_STORE_CONF: store}
    with spark_session(settings, app_name="hub-bench-maintenance", extra_conf=conf) as spark:
        jvm_pid = spark_driver_pid(spark)
        spark.sql("CREATE DATABASE IF NOT EXISTS bronze")
        batched, single = "bronze.bench_batched", "bronze.bench_single"

        started = time.monotonic()
        for batch in range(args.batches):
            writer = _rows(spark, batch * args.rows, args.rows).coalesce(1).write.format("delta")
            writer = writer.mode("append")
            if batch == 0:
                writer = writer.partitionBy("_hub_ingest_date")
            writer.saveAsTable(batched)
            if (batch + 1) % 100 == 0 or batch + 1 == args.batches:
                elapsed = time.monotonic() - started
                print(f"  {batch + 1}/{args.batches} batches landed ({elapsed:.0f} s)", flush=True)
        landed = time.monotonic() - started
        total = args.batches * args.rows
        _rows(spark, 0, total).write.format("delta").partitionBy("_hub_ingest_date").saveAsTable(
            single
        )

        files_batched, files_single = _files(spark, batched), _files(spark, single)
        (before, baseline_before), answers = _medians(spark, [batched, single], args.repeats)
        assert answers[0] == answers[1], "the two tables answer differently"

        result = TableMaintenance(spark, settings).maintain(batched)
        assert result.error is None, result.error
        (after, baseline), answers = _medians(spark, [batched, single], args.repeats)
        assert answers[0] == answers[1], "maintenance changed the answer"
        logs = _log_files(spark, batched), _log_files(spark, single)

        # As the analyst server runs with HUB_ANALYST_SNAPSHOT_STALENESS_SECONDS.
        staleness = staleness_conf(AnalystSettings(snapshot_staleness_seconds=args.staleness))
        for key, value in staleness.items():
            spark.conf.set(key, value)
        (after_stale, baseline_stale), answers = _medians(spark, [batched, single], args.repeats)
        assert answers[0] == answers[1], "a stale-tolerant read answered differently"
        jvm_peak = peak_rss_mb(jvm_pid)

    python_peak = self_peak_rss_mb()
    print()
    print(f"{'table':<44} {'files':>6} {'log files':>10} {'query (median)':>15} {'ratio':>7}")
    rows = [
        (f"{args.batches} batches, as landed", files_batched, "", before, baseline_before),
        ("one batch (baseline)", files_single, "", baseline_before, baseline_before),
        (
            f"{args.batches} batches, after maintenance",
            result.files_after,
            logs[0],
            after,
            baseline,
        ),
        ("one batch (baseline)", files_single, logs[1], baseline, baseline),
        (
            f"  the same, staleness {args.staleness:g} s",
            result.files_after,
            logs[0],
            after_stale,
            baseline_stale,
        ),
        (
            f"  one batch, staleness {args.staleness:g} s",
            files_single,
            logs[1],
            baseline_stale,
            baseline_stale,
        ),
    ]
    for name, files, log_files, seconds, against in rows:
        print(
            f"{name:<44} {files:>6} {log_files!s:>10} {seconds:>13.3f} s {seconds / against:>6.2f}x"
        )
    print()
    print(f"landing {args.batches} batches: {landed:.0f} s")
    print(f"maintenance (OPTIMIZE + VACUUM): {result.seconds:.1f} s")
    print(f"peak RSS: Spark driver JVM {jvm_peak:.0f} MB, Python {python_peak:.0f} MB")
    for label, ratio in (
        ("reading the latest commit", after / baseline),
        (f"with a staleness of {args.staleness:g} s", after_stale / baseline_stale),
    ):
        verdict = "met" if ratio <= 1.2 else "MISSED"
        print(f"target: maintained within 1.2x of one batch, {label}: {ratio:.2f}x, {verdict}")


if __name__ == "__main__":
    main()
