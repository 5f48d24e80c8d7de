"""Listing a table's log: a query on a table whose `_delta_log` holds many older files, on a
local folder and in a bucket of an S3-compatible server, with and without the hub's listing.

Before each query Delta lists the table's log from its last checkpoint on. A table of a 1 s
trigger keeps tens of thousands of older log files within its retention; this measures what
they cost a query in four Spark sessions (each its own process: the log store is a setting of
the JVM):

1. a local folder, the hub's log store (`NameFirstLogStore`, every hub session's);
2. a local folder, Delta's own HDFS log store (lists the whole folder);
3. a bucket on versitygw, Delta's S3 store listing from a name
   (`delta.enableFastS3AListFrom`, every hub session's);
4. a bucket on versitygw, Delta's S3 store listing the whole folder (Delta's default).

Each writes a table of 600,000 rows and 3 small appends, times a filtered aggregate (median of
`--repeats` after a warm-up), adds `--old-files` (12,600: what 3,000 commits and their
checksums leave) empty files named to sort before the log's commits, as the older commits a
checkpoint covers do, and times it again. It prints both medians, their ratio (the cost of the
older files), and each session's peak memory.

    .venv/bin/python bench/log_listing.py      # about 4 minutes on 2 cores
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import local_loader_settings, peak_rss_mb, spark_driver_pid  # noqa: E402
from spark_loaders.services.session import (  # noqa: E402
    FAST_S3A_LISTING_CONF,
    LOCAL_LOG_STORE,
    LOCAL_LOG_STORE_CONF,
    spark_session,
)
from tests.support.object_store import ObjectStore  # noqa: E402

QUERY = "SELECT k, count(*), round(sum(amount), 2) FROM delta.`{uri}` WHERE id % 3 = 0 GROUP BY k"

VARIANTS = {
    "local, hub's log store": ("local", {LOCAL_LOG_STORE_CONF: LOCAL_LOG_STORE}),
    "local, Delta's HDFS log store": (
        "local",
        {LOCAL_LOG_STORE_CONF: "io.delta.storage.HDFSLogStore"},
    ),
    "bucket, listing from a name (hub)": ("s3", {FAST_S3A_LISTING_CONF: "true"}),
    "bucket, listing the whole folder": ("s3", {FAST_S3A_LISTING_CONF: "false"}),
}


def _median_query(spark: Any, uri: str, repeats: int) -> float:
    sql = QUERY.format(uri=uri)
    spark.sql(sql).collect()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        spark.sql(sql).collect()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def run_variant(name: str, repeats: int, old_files: int, s3: dict[str, str]) -> dict[str, Any]:
    """One session: the query's median before and after the older files, and the JVM's peak."""
    where, conf = VARIANTS[name]
    home = Path(tempfile.mkdtemp(prefix="hub-bench-listing-"))
    fields: dict[str, object] = {"driver_memory": "2g"}
    if where == "s3":
        fields.update(
            s3_endpoint=s3["endpoint"],
            s3_access_key=s3["access_key"],
            s3_secret_key=s3["secret_key"],
            s3_path_style_access=True,
            s3_region="us-east-1",
            warehouse_dir=f"s3a://{s3['bucket']}/warehouse",
        )
        uri = f"s3a://{s3['bucket']}/{home.name}"
        folder = Path(s3["folder"]) / home.name
    else:
        uri = str(home / "table")
        folder = home / "table"
    settings = local_loader_settings(home, **fields)
    with spark_session(settings, app_name="hub-bench-log-listing", extra_conf=conf) as spark:
        jvm_pid = spark_driver_pid(spark)
        rows = spark.range(600_000).selectExpr(
            "id", "id % 97 AS k", "cast(id AS double) * 1.5 AS amount"
        )
        rows.coalesce(1).write.format("delta").save(uri)
        for extra in range(3):
            more = spark.range(extra, extra + 1).selectExpr(
                "id", "id % 97 AS k", "cast(id AS double) AS amount"
            )
            more.write.format("delta").mode("append").save(uri)
        before = _median_query(spark, uri, repeats)
        log = folder / "_delta_log"
        for old in range(old_files):
            (log / f".0_older_{old:05d}.json").write_bytes(b"")
        files = sum(1 for _ in log.iterdir())
        after = _median_query(spark, uri, repeats)
        jvm_peak = peak_rss_mb(jvm_pid)
    return {"before": before, "after": after, "files": files, "jvm_peak_mb": jvm_peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--old-files", type=int, default=12_600)
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # one session, in a subprocess
    parser.add_argument("--s3", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.variant:
        result = run_variant(args.variant, args.repeats, args.old_files, json.loads(args.s3))
        print("RESULT " + json.dumps(result), flush=True)
        return

    root = Path(tempfile.mkdtemp(prefix="hub-bench-listing-s3-"))
    results: dict[str, dict[str, Any]] = {}
    with ObjectStore(root / "data", root / "versitygw.log") as server:
        bucket = server.bucket("hub-tables")
        s3 = {
            "endpoint": bucket.endpoint,
            "access_key": bucket.access_key,
            "secret_key": bucket.secret_key,
            "bucket": bucket.name,
            "folder": str(bucket.folder),
        }
        for name in VARIANTS:
            print(f"  {name} ...", flush=True)
            out = subprocess.run(
                [sys.executable, __file__, "--variant", name, "--s3", json.dumps(s3),
                 "--repeats", str(args.repeats), "--old-files", str(args.old_files)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if out.returncode != 0 or not lines:
                print(out.stderr[-3000:])
                sys.exit(f"the session of {name!r} failed")
            results[name] = json.loads(lines[-1].removeprefix("RESULT "))

    print()
    print(f"{'session':<36} {'log files':>9} {'query, few':>11} {'query, many':>12} {'ratio':>6}"
          f" {'JVM peak':>9}")  # fmt: skip
    for name, r in results.items():
        print(
            f"{name:<36} {r['files']:>9} {r['before']:>9.3f} s {r['after']:>10.3f} s"
            f" {r['after'] / r['before']:>5.2f}x {r['jvm_peak_mb']:>6.0f} MB"
        )


if __name__ == "__main__":
    main()
