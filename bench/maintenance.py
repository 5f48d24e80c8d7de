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

Each query time is the median of `--repeats` runs after one warm-up run. It prints the files of
each table, the medians, the ratios to the baseline (the target: maintained within 1.2x), the
time maintenance took, and the peak memory (resident set) of the Spark driver's JVM and of this
Python process.

    .venv/bin/python bench/maintenance.py                 # about 20 minutes on 2 cores
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

from bench.servers import local_loader_settings, peak_rss_mb, self_peak_rss_mb  # noqa: E402
from spark_loaders.maintenance import TableMaintenance  # noqa: E402
from spark_loaders.session import spark_session  # noqa: E402

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


def _median_query_seconds(spark: Any, table: str, repeats: int) -> tuple[float, list[Any]]:
    """The query's median wall time over `repeats` runs after a warm-up, and its answer."""
    sql = QUERY.format(table=table)
    answer = spark.sql(sql).collect()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        spark.sql(sql).collect()
        times.append(time.perf_counter() - started)
    return statistics.median(times), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=3000)
    parser.add_argument("--rows", type=int, default=200, help="rows per batch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="hub-bench-maintenance-"))
    settings = local_loader_settings(home, driver_memory="2g")
    print(f"cores: {os.cpu_count()}, batches: {args.batches} x {args.rows} rows, home: {home}")
    with spark_session(settings, app_name="hub-bench-maintenance") as spark:
        jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
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
        total = args.batches * args.rows
        _rows(spark, 0, total).write.format("delta").partitionBy("_hub_ingest_date").saveAsTable(
            single
        )

        files_batched, files_single = _files(spark, batched), _files(spark, single)
        before, answer_before = _median_query_seconds(spark, batched, args.repeats)
        baseline, answer_single = _median_query_seconds(spark, single, args.repeats)
        assert answer_before == answer_single, "the two tables answer differently"

        result = TableMaintenance(spark, settings).maintain(batched)
        assert result.error is None, result.error
        after, answer_after = _median_query_seconds(spark, batched, args.repeats)
        assert answer_after == answer_single, "maintenance changed the answer"
        jvm_peak = peak_rss_mb(jvm_pid)

    python_peak = self_peak_rss_mb()
    print()
    print(f"{'table':<40} {'files':>7} {'query (median)':>15} {'vs one batch':>13}")
    rows = [
        (f"{args.batches} batches, as landed", files_batched, before),
        (f"{args.batches} batches, after maintenance", result.files_after, after),
        ("one batch (baseline)", files_single, baseline),
    ]
    for name, files, seconds in rows:
        print(f"{name:<40} {files:>7} {seconds:>13.3f} s {seconds / baseline:>12.2f}x")
    print()
    print(f"maintenance (OPTIMIZE + VACUUM): {result.seconds:.1f} s")
    print(f"peak RSS: Spark driver JVM {jvm_peak:.0f} MB, Python {python_peak:.0f} MB")
    verdict = "met" if after / baseline <= 1.2 else "MISSED"
    print(f"target: maintained within 1.2x of one batch: {after / baseline:.2f}x, {verdict}")


if __name__ == "__main__":
    main()
