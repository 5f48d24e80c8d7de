"""The classes of generated code Spark keeps between a bronze loader's batches, by cache size.

A loader lands `--topics` topics of distinct columns, one record per topic per round, with a 1 s
trigger. It runs once with Spark's default code cache (`spark.sql.codegen.cache.maxEntries`,
100 classes) and once with the hub's (`HUB_LOADER_CODEGEN_CACHE_ENTRIES`, 1000), each in a
Spark JVM of its own: the cache's size is fixed when a JVM first generates code. The two take
turns `--repeats` times, on one local Kafka broker and API.

Figures of each run, after `--warmup` rounds: the classes Spark compiled per round (its
`CodegenMetrics`), the time of a round's batches (their `addBatch`, summed), medians over the
rounds, and the driver JVM's peak RSS.

    .venv/bin/python bench/code_cache.py                 # 8 topics, 16 rounds; about 12 minutes
    .venv/bin/python bench/code_cache.py --topics 4 --rounds 10 --repeats 1
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import (  # noqa: E402
    kafka_and_api,
    local_loader_settings,
    peak_rss_mb,
    self_peak_rss_mb,
    spark_driver_pid,
)

SPARK_DEFAULT = 100
RESULT = "result: "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=8, help="topics the loader lands")
    parser.add_argument("--rounds", type=int, default=16, help="rounds of one record per topic")
    parser.add_argument("--warmup", type=int, default=4, help="first rounds left out")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each cache size")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one run, in its own process
    args = parser.parse_args()
    if args.run:
        _one_run(json.loads(args.run))
        return
    from spark_loaders.settings import LoaderSettings

    hub_entries = LoaderSettings.model_fields["codegen_cache_entries"].default
    home = Path(tempfile.mkdtemp(prefix="hub-bench-code-cache-"))
    try:
        with kafka_and_api(home) as (bootstrap, api_url):
            results: dict[int, list[dict[str, Any]]] = {SPARK_DEFAULT: [], hub_entries: []}
            for repeat in range(args.repeats):
                for entries in results:
                    print(f"run {repeat + 1}: cache of {entries} classes", flush=True)
                    run = {
                        "entries": entries,
                        "topics": args.topics,
                        "rounds": args.rounds,
                        "warmup": args.warmup,
                        "bootstrap": bootstrap,
                        "api_url": api_url,
                        "home": str(home / f"run-{entries}-{repeat}"),
                        "prefix": f"cache{entries}r{repeat}",
                    }
                    results[entries].append(_spawn(run))
            _report(results, args, hub_entries)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _spawn(run: dict[str, Any]) -> dict[str, Any]:
    """Run `_one_run` in a Python (and so a Spark JVM) of its own; its progress passes through."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--run", json.dumps(run)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    result: dict[str, Any] | None = None
    for line in process.stdout:
        if line.startswith(RESULT):
            result = json.loads(line[len(RESULT) :])
        else:
            print(f"  {line}", end="", flush=True)
    if process.wait() != 0 or result is None:
        raise SystemExit(f"the run with a cache of {run['entries']} classes failed")
    return result


def _schema(topic: int) -> dict[str, Any]:
    """Topic `topic`'s record: its own name and fields, so its batches need code of their own."""
    fields = [{"name": f"f{topic}_{i}", "type": "string"} for i in range(topic % 4 + 1)]
    return {
        "type": "record",
        "name": f"Row{topic}",
        "fields": [{"name": "n", "type": "long"}, *fields],
    }


def _one_run(run: dict[str, Any]) -> None:
    from confluent_kafka import Producer

    from hub_kafka.settings import KafkaSettings
    from registry.types import SchemaId
    from registry.wire import frame
    from spark_loaders.bronze.loader import BronzeLoader
    from spark_loaders.services.session import spark_session
    from tests.support.loader import compilations, create_topic, encode, register

    prefix, topics = run["prefix"], run["topics"]
    settings = local_loader_settings(
        Path(run["home"]),
        registry_url=run["api_url"],
        trigger_seconds=1.0,
        topic_pattern=f"{prefix}\\..*",
        codegen_cache_entries=run["entries"],
    )
    names = [f"{prefix}.t{i}" for i in range(topics)]
    schema_ids = []
    for i, name in enumerate(names):
        create_topic(run["bootstrap"], name, partitions=1)
        schema_id = register(run["api_url"], "unused-auth-is-off", f"{name}-value", _schema(i))
        schema_ids.append(SchemaId(schema_id))
    producer = Producer({"bootstrap.servers": run["bootstrap"], "acks": "all"})
    with spark_session(settings, app_name="bench-code-cache") as spark:
        loader = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=run["bootstrap"]))
        stream = loader.start()
        counted: set[int] = set()
        per_round: list[int] = []
        batch_ms: list[int] = []
        before = compilations(spark)
        for round_no in range(run["rounds"]):
            # One flush for the round's records, so that one batch usually takes them all.
            for i, name in enumerate(names):
                value = {"n": round_no, **{f: "x" for f in _field_names(i)}}
                producer.produce(name, frame(schema_ids[i], encode(_schema(i), value)))
            assert producer.flush(30) == 0
            took, batches = _wait_for_round(stream, (round_no + 1) * topics, counted)
            now = compilations(spark)
            per_round.append(now - before)
            batch_ms.append(took)
            before = now
            print(f"round {round_no + 1}/{run['rounds']}: {per_round[-1]} classes compiled, "
                  f"{batches} batches, {took} ms", flush=True)  # fmt: skip
        stream.stop()
        steady = slice(run["warmup"], None)
        result = {
            "compiled": statistics.median(per_round[steady]),
            "batch_ms": statistics.median(batch_ms[steady]),
            "driver_peak_mb": peak_rss_mb(spark_driver_pid(spark)),
        }
    print(RESULT + json.dumps(result), flush=True)


def _field_names(topic: int) -> list[str]:
    return [field["name"] for field in _schema(topic)["fields"][1:]]


def _wait_for_round(stream: Any, landed: int, counted: set[int]) -> tuple[int, int]:
    """Wait until the query has read `landed` records in all and is between batches; return the
    `addBatch` milliseconds of the batches not `counted` yet (then counted), and how many."""
    from spark_loaders.runtime.progress import recent_progress

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        progress = [p for p in recent_progress(stream) if p["numInputRows"] > 0]
        read = sum(p["numInputRows"] for p in progress)
        if read >= landed and not stream.status["isTriggerActive"]:
            new = [p for p in progress if p["batchId"] not in counted]
            counted.update(p["batchId"] for p in new)
            return sum(int(p["durationMs"].get("addBatch", 0)) for p in new), len(new)
        if stream.exception() is not None:
            raise SystemExit(f"the loader failed: {stream.exception()}")
        time.sleep(0.1)
    raise SystemExit(f"the loader did not read {landed} records within 300 s")


def _report(results: dict[int, list[dict[str, Any]]], args: argparse.Namespace, hub: int) -> None:
    print(
        f"\nbronze loader, {args.topics} topics, one record each per round, {args.rounds} rounds "
        f"({args.warmup} left out), each cache size run {args.repeats} times taking turns"
    )
    print(f"{'code cache':<24}{'classes compiled/round':>24}{'batches/round ms':>18}"
          f"{'driver peak MB':>16}")  # fmt: skip
    medians = {}
    for entries, runs in results.items():
        name = f"{entries} (Spark's default)" if entries == SPARK_DEFAULT else f"{entries} (hub)"
        compiled = statistics.median(r["compiled"] for r in runs)
        batch_ms = statistics.median(r["batch_ms"] for r in runs)
        peak = max(r["driver_peak_mb"] for r in runs)
        medians[entries] = batch_ms
        print(f"{name:<24}{compiled:>24.1f}{batch_ms:>18.0f}{peak:>16.0f}")
        for r in runs:
            print(f"{'':<4}run: {r['compiled']:.1f} classes, {r['batch_ms']:.0f} ms, "
                  f"{r['driver_peak_mb']:.0f} MB")  # fmt: skip
    if medians[SPARK_DEFAULT]:
        ratio = medians[hub] / medians[SPARK_DEFAULT]
        print(f"batch time ratio (hub / Spark's default): {ratio:.2f}")
    print(f"benchmark's own Python: peak {self_peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
