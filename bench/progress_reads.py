"""Reading a streaming query's progress reports: PySpark's objects against their JSON text.

A query reading Spark's `rate` source into the `noop` sink, with a count observed per batch as the
bronze query observes its counts, runs with a 200 ms trigger in a session with the loader's jars,
until Spark keeps `--reports` of its progress reports. Then, taking
turns `--rounds` times, each way reads the last report `--reads` times and the kept reports
a tenth as often:

- PySpark's objects: `query.lastProgress`, `query.recentProgress`;
- their JSON text (`spark_loaders.runtime.progress`): one call per report, parsed in Python.

It prints the median time of a read of each kind (the driver's Python and JVM together, as the
loader's process spends it), their ratio, the classes Spark's code generator compiled while
each kind read (`CodegenMetrics`), and the peak RSS of the driver JVM and of this Python.

    .venv/bin/python bench/progress_reads.py      # about a minute on 2 cores
"""

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pyspark.sql import functions as F  # noqa: E402

from bench.servers import (  # noqa: E402
    local_loader_settings,
    peak_rss_mb,
    self_peak_rss_mb,
    spark_driver_pid,
)
from spark_loaders.runtime.progress import last_progress, recent_progress  # noqa: E402
from spark_loaders.services.session import spark_session  # noqa: E402
from tests.support.loader import compilations  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=20, help="reports kept before reading")
    parser.add_argument("--reads", type=int, default=50, help="reads of the last report a round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds, taking turns")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="hub-bench-progress-"))
    settings = local_loader_settings(home, registry_url="http://127.0.0.1:1")
    with spark_session(settings, app_name="bench-progress-reads") as spark:
        query = (
            spark.readStream.format("rate")
            .option("rowsPerSecond", 100)
            .load()
            .observe("counts", F.count(F.lit(1)).alias("rows"))
            .writeStream.format("noop")
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        print(f"waiting for {args.reports} progress reports", flush=True)
        while len(recent_progress(query)) < args.reports:
            time.sleep(0.5)
        ways: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
            "PySpark's objects": (lambda: query.lastProgress, lambda: query.recentProgress),
            "JSON text": (lambda: last_progress(query), lambda: recent_progress(query)),
        }
        compiled: dict[str, int] = {name: 0 for name in ways}
        last: dict[str, list[float]] = {name: [] for name in ways}
        recent: dict[str, list[float]] = {name: [] for name in ways}
        kept = 0
        for round_no in range(args.rounds):
            names = list(ways) if round_no % 2 == 0 else list(ways)[::-1]
            for name in names:
                read_last, read_recent = ways[name]
                before = compilations(spark)
                last[name].append(_timed(read_last, args.reads))
                recent[name].append(_timed(read_recent, max(1, args.reads // 10)))
                compiled[name] += compilations(spark) - before
            kept = len(recent_progress(query))
            print(f"round {round_no + 1}/{args.rounds} done", flush=True)
        driver_peak = peak_rss_mb(spark_driver_pid(spark))
        query.stop()
    objects, text = "PySpark's objects", "JSON text"
    print(f"\nreading a query's progress reports ({kept} kept), ms a read, median of {args.rounds}")
    print(f"{'read':<28}{objects:>20}{text:>14}{'ratio':>10}")
    for label, figures in (("last report", last), (f"all kept ({kept})", recent)):
        slow, fast = statistics.median(figures[objects]), statistics.median(figures[text])
        print(f"{label:<28}{slow:>20.2f}{fast:>14.2f}{fast / slow:>10.3f}")
    print(f"{'classes compiled, in all':<28}{compiled[objects]:>20}{compiled[text]:>14}")
    print(
        f"peak RSS: Spark driver {driver_peak:.0f} MB, "
        f"benchmark (Python) {self_peak_rss_mb():.0f} MB"
    )


def _timed(read: Callable[[], Any], times: int) -> float:
    """Mean milliseconds of `read()` over `times` calls, after one unmeasured call."""
    read()
    began = time.perf_counter()
    for _ in range(times):
        read()
    return (time.perf_counter() - began) / times * 1000


if __name__ == "__main__":
    main()
