"""The bronze loader on a local Spark standalone cluster: one worker against two, and `local[2]`.

Lands one topic of N records (default 100,000, 4 partitions) with `hub load run --once`, each
run a process of its own with a fresh warehouse and checkpoint, on:

- `local[2]`: the baseline, Spark inside the loader's process with two task threads;
- a standalone cluster of one worker (1 core, 1g), then of two workers (one executor each).

For each it prints the wall time of the whole run (driver start-up included), the records
landed (from the Delta log's commit metrics, so no Spark session is needed to count them) and
records per second, and the ratio to the baseline. On a 2-core machine the cluster's workers
share the cores with the driver and Kafka: the ratio between one and two workers says how the
job spreads, not what a real cluster would do.

    .venv/bin/python bench/spark_cluster.py                  # about 6 minutes on 2 cores
    .venv/bin/python bench/spark_cluster.py --records 20000
"""

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import kafka_and_api, print_peak_rss  # noqa: E402
from spark_loaders.services.cluster import LocalCluster  # noqa: E402
from spark_loaders.services.cluster_settings import ClusterSettings  # noqa: E402
from tests.support.loader import create_topic, produce_avro, register  # noqa: E402
from tests.support.loader_process import LoaderProcess, loader_env  # noqa: E402
from tests.support.ports import free_port, free_ports_in_a_row  # noqa: E402

SCHEMA = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "n", "type": "long"}, {"name": "page", "type": "string"}],
}
JARS = REPO / ".hub" / "jars"
TOPIC = "bench.clicks"


@dataclass
class Run:
    name: str
    seconds: float
    landed: int

    @property
    def rate(self) -> float:
        return self.landed / self.seconds if self.seconds else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hub-bench-cluster-") as tmp:
        home = Path(tmp)
        with kafka_and_api(home) as (bootstrap, api_url):
            create_topic(bootstrap, TOPIC, partitions=4)
            schema_id = register(api_url, "unused-auth-is-off", f"{TOPIC}-value", SCHEMA)
            _publish(bootstrap, schema_id, args.records)
            runs = [_land(home / "local", api_url, bootstrap, "local[2]", "local[2]")]
            for workers in (1, 2):
                with _cluster(home / f"cluster-{workers}", workers) as master:
                    name = f"{workers} worker{'s' if workers > 1 else ''}"
                    runs.append(
                        _land(home / name.replace(" ", "-"), api_url, bootstrap, master, name)
                    )
    _report(runs, args.records)


def _publish(bootstrap: str, schema_id: int, count: int) -> None:
    chunk = 10_000
    for start in range(0, count, chunk):
        values: list[dict[str, Any]] = [
            {"n": n, "page": f"/p/{n % 1000}"} for n in range(start, min(start + chunk, count))
        ]
        produce_avro(bootstrap, TOPIC, schema_id, SCHEMA, values)


def _land(home: Path, api_url: str, bootstrap: str, master: str, name: str) -> Run:
    """`hub load run --once` on `master`, timed from process start to exit."""
    home.mkdir(parents=True)
    env = loader_env(home, api_url, bootstrap, TOPIC)
    env["HUB_LOADER_MAX_OFFSETS_PER_TRIGGER"] = "50000"
    started = time.monotonic()
    with LoaderProcess(env, home / "loader.log", "--once", "--master", master) as loader:
        if loader.process.wait(timeout=1800) != 0:
            raise SystemExit(f"the loader on {master} failed: {loader.text()[-3000:]}")
    seconds = time.monotonic() - started
    table = home / "warehouse" / "bronze.db" / TOPIC.replace(".", "_")
    return Run(name, seconds, _rows_written(table))


def _rows_written(table: Path) -> int:
    """Rows the table's commits added, from `numOutputRows` in the Delta log."""
    total = 0
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            info = json.loads(line).get("commitInfo")
            if info:
                total += int(info.get("operationMetrics", {}).get("numOutputRows", 0))
    return total


@contextmanager
def _cluster(home: Path, workers: int) -> Iterator[str]:
    cluster = LocalCluster(
        ClusterSettings(
            home=home,
            master_port=free_port(),
            master_webui_port=free_port(),
            worker_webui_port=free_ports_in_a_row(workers),
            workers=workers,
        )
    )
    cluster.start()
    try:
        yield cluster.master_url
        status = cluster.status()
        print_peak_rss(
            {"Spark master": status.pid}
            | {f"Spark worker {i + 1}": w.pid for i, w in enumerate(status.workers)}
        )
    finally:
        cluster.stop()


def _report(runs: list[Run], records: int) -> None:
    baseline = runs[0]
    print(f"\n{records} records, 4 partitions, on {os.cpu_count()} cores")
    print(f"{'master':<12} {'seconds':>8} {'landed':>8} {'records/s':>10} {'vs local[2]':>12}")
    for run in runs:
        ratio = run.rate / baseline.rate if baseline.rate else 0.0
        print(
            f"{run.name:<12} {run.seconds:>8.1f} {run.landed:>8} {run.rate:>10.0f} {ratio:>11.2f}x"
        )
    if any(run.landed != records for run in runs):
        print("WARNING: a run did not land every record once; see its loader.log")


if __name__ == "__main__":
    main()
