"""The bronze loader against a minimal hand-written Structured Streaming job, on the same records.

Baseline: Kafka source, `substring(value, 6)` to strip the Confluent header, `from_avro` with a
fixed schema, Delta append by path. The hub loader does more per batch (per-topic split, schema
ids, resolution to the newest schema, quarantine, idempotent writes, comments), and the ratio of
the two says what that costs.

Figures, each for both jobs, in one Spark session, on one local Kafka broker:

- throughput: records landed per second catching up a topic of N records (availableNow),
  median of `--repeats` runs taking turns, after both jobs warmed up on a smaller topic; beside
  a raw consume ceiling: one confluent-kafka consumer reading the same topic through; and the
  executor CPU seconds each catch-up cost (Spark's task metrics), steadier than wall time;
- freshness: a steady publisher (1 partition, `--rate` records/s for `--duration` s) while the
  job runs with a 1 s trigger; a reader polls the table, and a record's freshness is the time
  from its Kafka acknowledgement to the first poll that sees it (p50, p95);
- per-batch cost: Spark jobs per micro-batch and median `addBatch` time;
- driver RSS of the Spark JVM (current and peak) after each phase;
- with `--profile`, where each job's executor CPU goes (`bench/jfr.py`: Flight Recorder samples
  of the measured catch-ups, by part: Kafka read, Avro decoding, generated code, the sort before
  a partitioned write, Parquet encoding, Delta statistics). The recording costs a little CPU of
  its own, so a profiled run's throughput is not the one to publish;
- with `--same-columns`, the throughput and executor CPU of a third job taking turns with the
  two: the minimal job writing the columns a bronze table has, partitioned as bronze is. The
  loader's ratio to it is the cost of what the loader does; its own ratio to the minimal job is
  the cost of bronze's columns;
- with `--into-existing`, each catch-up lands in its job's table as it stands, emptied before
  the clock starts (`DELETE FROM`), as after a loader's stop, rather than in a new table, as
  for a new feed's backlog: each job lands the topic once first, not counted, to create it.
  The loader creates a new table through the metastore and appends to one by path, as the
  minimal job always writes.

    .venv/bin/python bench/loader.py              # 1,000,000 records; about 10 minutes on 2 cores
    .venv/bin/python bench/loader.py --records 20000 --duration 20
    .venv/bin/python bench/loader.py --profile --duration 10
    .venv/bin/python bench/loader.py --same-columns
    .venv/bin/python bench/loader.py --into-existing
"""

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.avro.functions import from_avro  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402

from bench.jfr import PARTS, Profile, recording  # noqa: E402
from bench.servers import kafka_and_api, local_loader_settings, spark_driver_pid  # noqa: E402
from hub_kafka.security import spark_options  # noqa: E402
from hub_kafka.settings import KafkaSettings  # noqa: E402
from spark_loaders.bronze.loader import BronzeLoader  # noqa: E402
from spark_loaders.runtime.progress import last_progress, recent_progress  # noqa: E402
from spark_loaders.runtime.storage import Location  # noqa: E402
from spark_loaders.services.session import spark_session  # noqa: E402
from spark_loaders.settings import LoaderSettings  # noqa: E402
from tests.support.loader import create_topic, produce_avro, register  # noqa: E402

SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [
        {"name": "n", "type": "long"},
        {"name": "page", "type": "string"},
        {"name": "sent_ms", "type": "long"},
    ],
}

# The metadata columns of a bronze table (docs/loaders.md, "Tables and columns").
BRONZE_METADATA = (
    "_hub_key",
    "_hub_partition",
    "_hub_offset",
    "_hub_timestamp",
    "_hub_schema_id",
    "_hub_request_id",
    "_hub_idempotency_key",
    "_hub_ingested_at",
    "_hub_ingest_date",
)

# (topic, availableNow, run number) -> the query and its table's path
Starter = Callable[[str, bool, int], tuple[StreamingQuery, str]]


@dataclass
class Figures:
    name: str
    throughput: float = 0.0
    fresh_p50: float = 0.0
    fresh_p95: float = 0.0
    jobs_per_batch: float = 0.0
    add_batch_ms: float = 0.0
    rss_mb: float = 0.0
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0  # executor CPU of one catch-up (median)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records for throughput")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs of each job")
    parser.add_argument("--warmup", type=int, default=100_000, help="records to warm up on")
    parser.add_argument("--rate", type=int, default=1000, help="records/s for freshness")
    parser.add_argument("--duration", type=int, default=30, help="seconds of freshness run")
    parser.add_argument(
        "--profile", action="store_true", help="record where executor CPU goes (JDK's JFR)"
    )
    parser.add_argument(
        "--same-columns",
        action="store_true",
        help="also catch up with a minimal job writing bronze's columns (throughput only)",
    )
    parser.add_argument(
        "--into-existing",
        action="store_true",
        help="catch up into each job's table as it stands, emptied, instead of a new table",
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="hub-bench-loader-"))
    try:
        with kafka_and_api(home) as (bootstrap, api_url):
            run(home, bootstrap, api_url, args)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def run(home: Path, bootstrap: str, api_url: str, args: argparse.Namespace) -> None:
    settings = local_loader_settings(home, registry_url=api_url, trigger_seconds=1.0)
    with spark_session(settings, app_name="bench-loader") as spark:
        kafka = KafkaSettings(bootstrap_servers=bootstrap)
        print(f"Spark up; driver RSS {_rss(spark)[0]:.0f} MB", flush=True)

        bulk, warmup = "bench.bulk", "bench.warmup"
        for topic, records in ((bulk, args.records), (warmup, args.warmup)):
            _fill(bootstrap, api_url, topic, records)

        ceiling = _consume_ceiling(bootstrap, bulk, args.records)
        print(f"raw consume ceiling: {ceiling:.0f} records/s (one confluent-kafka consumer)")

        hub = Figures("hub bronze loader")
        base = Figures("minimal job")
        # With `--into-existing`, a minimal job's table keeps its path from run to run.
        keep = args.into_existing
        starters: list[tuple[Figures, Starter]] = [
            (base, lambda topic, once, run: _minimal(spark, home, kafka, topic, once, run, keep)),
            (hub, lambda topic, once, run: _hub(spark, settings, home, kafka, topic, once, run)),
        ]
        columns = Figures("minimal, bronze columns")
        caught_up = list(starters)
        if args.same_columns:
            caught_up.append(
                (
                    columns,
                    lambda topic, once, run: _same_columns(spark, home, kafka, topic, run, keep),
                )
            )
        for figures, start in caught_up:
            print(f"warm-up: {figures.name} catching up {args.warmup} records", flush=True)
            start(warmup, True, 0)[0].awaitTermination()
        tables: dict[str, str] = {}  # with `--into-existing`: each job's table of the topic
        if args.into_existing:
            for figures, start in caught_up:
                print(f"{figures.name}: creating its table of {bulk} (not counted)", flush=True)
                query, tables[figures.name] = start(bulk, True, 0)
                query.awaitTermination()
        rates: dict[str, list[float]] = {f.name: [] for f, _ in caught_up}
        cpu: dict[str, list[float]] = {f.name: [] for f, _ in caught_up}
        profiles = {f.name: Profile() for f, _ in caught_up}
        for run in range(1, args.repeats + 1):
            # Taking turns, so neither job always runs on a machine the other just warmed.
            for figures, start in caught_up if run % 2 else caught_up[::-1]:
                print(f"throughput {run}: {figures.name}, {args.records} records", flush=True)
                # The table of an earlier run goes, or is emptied, before the clock starts.
                if args.into_existing:
                    spark.sql(f"DELETE FROM delta.`{tables[figures.name]}`")
                elif figures is hub:
                    _drop_bronze(spark, settings, bulk)
                jfr = home / f"{figures.name.replace(' ', '-')}-{run}.jfr"
                with recording(spark_driver_pid(spark), jfr) if args.profile else nullcontext():
                    began = time.monotonic()
                    query, _ = start(bulk, True, run)
                    query.awaitTermination()
                    rates[figures.name].append(args.records / (time.monotonic() - began))
                if args.profile:
                    profiles[figures.name].add(jfr)
                cpu[figures.name].append(_executor_cpu_s(spark, str(query.runId)))
                print(
                    f"  {rates[figures.name][-1]:.0f} records/s, executor CPU "
                    f"{cpu[figures.name][-1]:.2f} s; {_durations(query)}"
                )
                _print_job_names(spark, str(query.runId), 1)
                rss = _rss(spark)
                figures.rss_mb, figures.peak_rss_mb = rss[0], max(rss[1], figures.peak_rss_mb)
        for figures, _ in caught_up:
            figures.throughput = statistics.median(rates[figures.name])
            figures.cpu_s = statistics.median(cpu[figures.name])

        for index, (figures, start) in enumerate(starters):
            topic = f"bench.fresh{index}"
            create_topic(bootstrap, topic, partitions=1)
            topic_schema = register(api_url, "unused-auth-is-off", f"{topic}-value", SCHEMA)
            print(f"freshness: {figures.name}, {args.rate}/s for {args.duration} s", flush=True)
            query, path = start(topic, False, 0)
            acked: dict[int, float] = {}
            publisher = threading.Thread(
                target=_publish_steadily,
                args=(bootstrap, topic, topic_schema, args.rate, args.duration, acked),
            )
            publisher.start()
            seen: dict[int, float] = {}
            _poll_visible(spark, path, seen, publisher.is_alive)
            publisher.join()
            last = max(acked)
            _poll_visible(spark, path, seen, lambda s=seen, n=last: n not in s, deadline=60)  # type: ignore[misc]
            query.stop()
            delays = sorted(seen[o] - acked[o] for o in acked if o in seen)
            figures.fresh_p50 = statistics.median(delays)
            figures.fresh_p95 = delays[int(0.95 * (len(delays) - 1))]
            # Per-batch costs in steady state (the catch-up run is one batch that creates tables).
            figures.jobs_per_batch, figures.add_batch_ms = _batch_costs(spark, query)
            rss = _rss(spark)
            figures.rss_mb, figures.peak_rss_mb = rss[0], max(rss[1], figures.peak_rss_mb)
    _report(base, hub, args, ceiling)
    if args.same_columns:
        _report_same_columns(columns, hub)
    if args.profile:
        _report_profiles(base, hub, profiles)


def _fill(bootstrap: str, api_url: str, topic: str, records: int) -> None:
    create_topic(bootstrap, topic, partitions=2)
    schema_id = register(api_url, "unused-auth-is-off", f"{topic}-value", SCHEMA)
    print(f"publishing {records} records to {topic}", flush=True)
    for first in range(0, records, 10_000):
        values = [
            {"n": n, "page": f"/p/{n % 50}", "sent_ms": 0}
            for n in range(first, min(first + 10_000, records))
        ]
        produce_avro(bootstrap, topic, schema_id, SCHEMA, values)


def _durations(query: StreamingQuery) -> str:
    """Where the catch-up's one batch spent its time, as the query's progress reports it."""
    progress = last_progress(query) or {}
    parts: dict[str, int] = progress.get("durationMs", {})
    return ", ".join(f"{name} {ms / 1000:.1f} s" for name, ms in sorted(parts.items()))


def _consume_ceiling(bootstrap: str, topic: str, records: int) -> float:
    """Records/s of one confluent-kafka consumer reading `topic` from the start to `records`."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-ceiling-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.subscribe([topic])
        seen = 0
        began = None
        while seen < records:
            messages = consumer.consume(num_messages=10_000, timeout=1.0)
            if began is None and messages:
                began = time.monotonic()  # the group's join is not reading
            seen += sum(1 for m in messages if m.error() is None)
        assert began is not None
        return records / (time.monotonic() - began)
    finally:
        consumer.close()


def _hub(
    spark: SparkSession,
    settings: LoaderSettings,
    home: Path,
    kafka: KafkaSettings,
    topic: str,
    once: bool,
    run: int,
) -> tuple[StreamingQuery, str]:
    """The loader landing `topic` anew (`_drop_bronze` first, if it landed it before)."""
    own = settings.model_copy(
        update={
            "topic_pattern": topic.replace(".", "\\."),
            "checkpoint_dir": home / "checkpoints" / f"hub-{topic}-{run}",
        }
    )
    query = BronzeLoader(spark, own, kafka).start(available_now=once)
    return query, str(_bronze_path(settings, topic))


def _bronze_path(settings: LoaderSettings, topic: str) -> Location:
    return settings.warehouse_dir / "bronze.db" / topic.replace(".", "_")


def _drop_bronze(spark: SparkSession, settings: LoaderSettings, topic: str) -> None:
    """Drop the bronze table of `topic` an earlier run landed, and its files."""
    spark.sql(f"DROP TABLE IF EXISTS bronze.{topic.replace('.', '_')}")
    shutil.rmtree(str(_bronze_path(settings, topic)), ignore_errors=True)


def _records(spark: SparkSession, kafka: KafkaSettings, topic: str) -> DataFrame:
    """A hand-written job's Kafka source: `topic` from its earliest offset."""
    return (
        spark.readStream.format("kafka")
        .options(**spark_options(kafka))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def _decoded() -> Column:
    """A hand-written job's decoding: the header stripped, `from_avro` with the fixed schema."""
    return from_avro(F.expr("substring(value, 6)"), json.dumps(SCHEMA)).alias("v")


def _minimal(
    spark: SparkSession,
    home: Path,
    kafka: KafkaSettings,
    topic: str,
    once: bool,
    run: int,
    keep_table: bool = False,
) -> tuple[StreamingQuery, str]:
    """A hand-written job landing `topic` in a table of its run's own, or with `keep_table` in
    the one table of the topic (a checkpoint of its run's own either way)."""
    path = str(home / "minimal" / (topic if keep_table else f"{topic}-{run}"))
    stream = (
        _records(spark, kafka, topic)
        .select(
            _decoded(),
            F.col("partition").alias("_hub_partition"),
            F.col("offset").alias("_hub_offset"),
        )
        .select("v.*", "_hub_partition", "_hub_offset")
        .writeStream.format("delta")
        .option("checkpointLocation", str(home / "checkpoints" / f"minimal-{topic}-{run}"))
    )
    trigger = {"availableNow": True} if once else {"processingTime": "1 second"}
    return stream.trigger(**trigger).start(path), path


def _same_columns(
    spark: SparkSession,
    home: Path,
    kafka: KafkaSettings,
    topic: str,
    run: int,
    keep_table: bool = False,
) -> tuple[StreamingQuery, str]:
    """The minimal job writing the columns a bronze table has, partitioned as bronze is: the
    Kafka key, partition, offset and timestamp, a schema id, the request id and idempotency key
    (null, as in these records), the landing time and its date. What the loader does beyond
    this job is its own cost; what this job does beyond `_minimal` is bronze's columns'.
    `keep_table` as for `_minimal`."""
    path = str(home / "same-columns" / (topic if keep_table else f"{topic}-{run}"))
    stream = (
        _records(spark, kafka, topic)
        .select(
            _decoded(),
            F.col("key").alias("_hub_key"),
            F.col("partition").alias("_hub_partition"),
            F.col("offset").alias("_hub_offset"),
            F.col("timestamp").alias("_hub_timestamp"),
            F.lit(1).alias("_hub_schema_id"),
            F.lit(None).cast("string").alias("_hub_request_id"),
            F.lit(None).cast("string").alias("_hub_idempotency_key"),
            F.current_timestamp().alias("_hub_ingested_at"),
            F.current_date().alias("_hub_ingest_date"),
        )
        .select("v.*", *BRONZE_METADATA)
        .writeStream.format("delta")
        .partitionBy("_hub_ingest_date")
        .option("checkpointLocation", str(home / "checkpoints" / f"same-columns-{topic}-{run}"))
    )
    return stream.trigger(availableNow=True).start(path), path


def _publish_steadily(
    bootstrap: str, topic: str, schema_id: int, rate: int, duration: int, acked: dict[int, float]
) -> None:
    """`rate` records a second in ten bursts a second; note each offset's acknowledgement time."""
    burst = max(1, rate // 10)
    n = 0
    end = time.monotonic() + duration
    while time.monotonic() < end:
        tick = time.monotonic()
        values = [
            {"n": n + i, "page": "/", "sent_ms": int(time.time() * 1000)} for i in range(burst)
        ]
        positions = produce_avro(bootstrap, topic, schema_id, SCHEMA, values)
        now = time.monotonic()
        acked.update({offset: now for _, offset in positions})
        n += burst
        time.sleep(max(0.0, 0.1 - (time.monotonic() - tick)))


def _poll_visible(
    spark: SparkSession,
    path: str,
    seen: dict[int, float],
    going: Callable[[], bool],
    *,
    deadline: float = 3600,
) -> None:
    """Note in `seen` {offset: first time seen} while `going()`; one partition, in order."""
    highest = max(seen, default=-1)
    stop = time.monotonic() + deadline
    while going() and time.monotonic() < stop:
        try:
            row = spark.read.format("delta").load(path).agg(F.max("_hub_offset")).first()
        except Exception:  # the table does not exist before the first batch
            row = None
        now = time.monotonic()
        top = row[0] if row is not None and row[0] is not None else -1
        for offset in range(highest + 1, top + 1):
            seen[offset] = now
        highest = max(highest, top)
        time.sleep(0.2)


def _batch_costs(spark: SparkSession, query: StreamingQuery) -> tuple[float, float]:
    """(Spark jobs per micro-batch, median addBatch ms) of a query's recent batches."""
    batches = [p for p in recent_progress(query) if p.get("numInputRows", 0) > 0]
    if not batches:
        return 0.0, 0.0
    jobs = spark.sparkContext.statusTracker().getJobIdsForGroup(str(query.runId))
    add = [p["durationMs"].get("addBatch", 0) for p in batches]
    _print_job_names(spark, str(query.runId), len(batches))
    return len(jobs) / len(batches), statistics.median(add)


def _print_job_names(spark: SparkSession, run_id: str, batches: int) -> None:
    """Which Spark jobs the batches ran, by name, with their summed wall time, from the Spark
    UI's REST API (a profile)."""
    api = _ui_api(spark)
    if api is None:
        return
    jobs = _query_jobs(api, run_id)
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = {}
    for job in jobs:
        name = job["name"].split(" at ")[0] or "(unnamed)"
        counts[name] += 1
        if job.get("completionTime"):
            took = _ui_time(job["completionTime"]) - _ui_time(job["submissionTime"])
            seconds[name] = seconds.get(name, 0.0) + took
    print(
        f"  jobs of {batches} batches: "
        + ", ".join(f"{n} x {job} {seconds.get(job, 0):.1f} s" for job, n in counts.most_common())
    )


def _executor_cpu_s(spark: SparkSession, run_id: str) -> float:
    """Executor CPU seconds of a query's jobs, from the Spark UI's REST API: what the records
    cost, steadier than wall time on a shared machine."""
    api = _ui_api(spark)
    if api is None:
        return 0.0
    time.sleep(0.5)  # the listener bus reports a job's stages a moment after it ends
    nanos = 0
    for stage_id in {s for job in _query_jobs(api, run_id) for s in job["stageIds"]}:
        for attempt in httpx.get(f"{api}/stages/{stage_id}", timeout=10).json():
            nanos += attempt.get("executorCpuTime", 0)
    return nanos / 1e9


def _ui_api(spark: SparkSession) -> str | None:
    """The Spark UI's REST API of this application; None when the UI is off."""
    context = spark.sparkContext
    if not context.uiWebUrl:
        return None
    return f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}"


def _query_jobs(api: str, run_id: str) -> list[dict[str, Any]]:
    """The Spark jobs a streaming query's run started (its run id is their job group)."""
    jobs: list[dict[str, Any]] = httpx.get(f"{api}/jobs", timeout=10).json()
    return [job for job in jobs if job.get("jobGroup") == run_id]


def _ui_time(text: str) -> float:
    """Seconds since the epoch of the UI's `2026-01-02T03:04:05.678GMT`."""
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%Z").timestamp()


def _rss(spark: SparkSession) -> tuple[float, float]:
    """(current, peak) resident memory of the Spark driver JVM in MB."""
    pid = spark_driver_pid(spark)
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _report(base: Figures, hub: Figures, args: argparse.Namespace, ceiling: float) -> None:
    print()
    print(
        f"bronze loader vs minimal job: {args.records} records (median of {args.repeats}) "
        f"{'into existing tables' if args.into_existing else 'into new tables'}, "
        f"freshness at {args.rate}/s"
    )
    print(
        f"{'job':<20}{'records/s':>12}{'fresh p50 s':>13}{'fresh p95 s':>13}"
        f"{'jobs/batch':>12}{'addBatch ms':>13}{'RSS MB':>9}{'peak MB':>9}"
    )
    for f in (base, hub):
        print(
            f"{f.name:<20}{f.throughput:>12.0f}{f.fresh_p50:>13.2f}{f.fresh_p95:>13.2f}"
            f"{f.jobs_per_batch:>12.1f}{f.add_batch_ms:>13.0f}{f.rss_mb:>9.0f}{f.peak_rss_mb:>9.0f}"
        )
    print(f"{'raw consume ceiling':<20}{ceiling:>12.0f}")
    print(f"throughput ratio (hub / minimal): {hub.throughput / base.throughput:.2f}")
    print(
        f"executor CPU per catch-up (median): minimal {base.cpu_s:.2f} s, hub {hub.cpu_s:.2f} s, "
        f"ratio {hub.cpu_s / base.cpu_s if base.cpu_s else 0:.2f} (hub / minimal)"
    )
    print(
        f"freshness ratio p50 {hub.fresh_p50 / base.fresh_p50:.2f}, "
        f"p95 {hub.fresh_p95 / base.fresh_p95:.2f} (hub / minimal; at most 1.0 is the target)"
    )


def _report_same_columns(columns: Figures, hub: Figures) -> None:
    print(
        f"{columns.name}: {columns.throughput:.0f} records/s, executor CPU {columns.cpu_s:.2f} s; "
        f"throughput ratio (hub / it) {hub.throughput / columns.throughput:.2f}, "
        f"CPU ratio {hub.cpu_s / columns.cpu_s if columns.cpu_s else 0:.2f}"
    )


def _report_profiles(base: Figures, hub: Figures, profiles: dict[str, Profile]) -> None:
    """Executor CPU seconds per catch-up by part, from the recordings (`bench/jfr.py`)."""
    mine, theirs = profiles[hub.name], profiles[base.name]
    print()
    print("executor CPU per catch-up by part (JFR samples, mean of the measured catch-ups)")
    print(f"{'part':<34}{'minimal s':>11}{'hub s':>9}{'hub - minimal s':>17}")
    for part in [name for name, _ in PARTS] + ["other"]:
        ours, peer = mine.seconds(part), theirs.seconds(part)
        print(f"{part:<34}{peer:>11.2f}{ours:>9.2f}{ours - peer:>17.2f}")
    ours, peer = mine.total_s(), theirs.total_s()
    print(f"{'all':<34}{peer:>11.2f}{ours:>9.2f}{ours - peer:>17.2f}")


if __name__ == "__main__":
    main()
