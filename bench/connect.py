"""Records per second of the log file and JDBC connectors, against the publish path's ceiling.

For each source, a connector runs in this process (a `Worker` thread); once it is running, the
workload is written (access-log lines appended to a file, rows inserted into a SQLite table) and
the clock runs until the feed's topic holds every record. The baseline publishes the same
records, in batches of the same size, straight through `Publisher` into a feed with the same
schema: what the connector adds on top (reading, parsing, committing positions) is the gap.

    .venv/bin/python bench/connect.py                   # 50,000 records, 3 runs each
    .venv/bin/python bench/connect.py --records 10000 --runs 1
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import create_engine, text

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.cdc import Stack, end_offset, progress, wait  # noqa: E402
from bench.servers import print_peak_rss  # noqa: E402
from catalog.types import FeedKind, TeamName  # noqa: E402
from connectors.config import load  # noqa: E402
from connectors.logfile.config import LogfileSource  # noqa: E402
from connectors.logfile.formats import LineParser  # noqa: E402
from connectors.settings import ConnectSettings  # noqa: E402
from connectors.worker import ConnectServices, Worker, connect_services  # noqa: E402
from hub_kafka.settings import KafkaSettings  # noqa: E402
from publish.feeds import FeedSpec  # noqa: E402
from publish.publisher import IncomingRecord  # noqa: E402
from registry.settings import RegistrySettings  # noqa: E402

LINE = (
    '203.0.113.{n} - - [10/Oct/2024:13:55:{s:02d} +0000] "GET /item/{n} HTTP/1.1" 200 {n} '
    '"https://shop.example/" "Mozilla/5.0 (bench)"\n'
)


@contextmanager
def worker(stack: Stack, config: dict[str, Any], settings: ConnectSettings) -> Iterator[None]:
    path = stack.root / f"{config['name']}.yaml"
    path.write_text(yaml.safe_dump(config))
    services = _services(stack, settings)
    running = Worker([load(path)], services=services, settings=settings)
    stop = threading.Event()
    thread = threading.Thread(target=running.run, args=(stop,))
    thread.start()
    try:
        wait(lambda: running.status(config["name"]) == "RUNNING", timeout_s=120, what="RUNNING")
        yield
    finally:
        stop.set()
        thread.join(60)
        services.close()


def _services(stack: Stack, settings: ConnectSettings) -> ConnectServices:
    kafka = KafkaSettings(bootstrap_servers=stack.bootstrap)
    return connect_services(RegistrySettings(database_url=stack.registry_url), kafka, settings)


def _timed(stack: Stack, topic: str, records: int, write: Callable[[], None]) -> float:
    start = time.monotonic()
    write()
    wait(lambda: end_offset(stack.bootstrap, topic) >= records, timeout_s=900, what=topic)
    elapsed = time.monotonic() - start
    progress(f"  {topic}: {records} records in {elapsed:.1f}s")
    return records / elapsed


def run_logfile(stack: Stack, run: int, records: int, settings: ConnectSettings) -> float:
    log_file = stack.root / f"access{run}.log"
    log_file.touch()
    topic = f"bench.logfile{run}"
    config = {
        "name": f"logfile{run}",
        "type": "logfile",
        "owner": "bench",
        "topic": topic,
        "source": {"paths": [str(log_file)], "format": "apache_combined", "poll_seconds": 0.2},
    }

    def write() -> None:
        with log_file.open("a") as handle:
            handle.writelines(LINE.format(n=n % 250, s=n % 60) for n in range(records))

    with worker(stack, config, settings):
        return _timed(stack, topic, records, write)


def run_jdbc(stack: Stack, run: int, records: int, settings: ConnectSettings) -> float:
    url = f"sqlite:///{stack.root / f'app{run}.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            text("CREATE TABLE orders (id INTEGER PRIMARY KEY, customer VARCHAR(40) NOT NULL, "
                 "amount NUMERIC(10, 2) NOT NULL, updated_at DATETIME NOT NULL)")
        )  # fmt: skip
    topic = f"bench.jdbc{run}.orders"
    config = {
        "name": f"jdbc{run}",
        "type": "jdbc",
        "owner": "bench",
        "topic_prefix": f"bench.jdbc{run}",
        "source": {"url": url, "mode": "incrementing", "incrementing_column": "id",
                   "tables": ["orders"], "poll_seconds": 0.2},
    }  # fmt: skip

    def write() -> None:
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO orders VALUES (:id, :customer, :amount, :updated_at)"),
                [{"id": n, "customer": f"c{n % 997}", "amount": f"{n % 5000}.25",
                  "updated_at": "2024-05-01 12:00:00.000000"} for n in range(1, records + 1)],
            )  # fmt: skip

    with worker(stack, config, settings):
        rate = _timed(stack, topic, records, write)
    engine.dispose()
    return rate


def run_baseline(stack: Stack, run: int, records: int, settings: ConnectSettings) -> float:
    """The same parsed access-log records through Publisher, 500 per call, no connector."""
    source = LogfileSource(paths=["-"], format="apache_combined")
    parser = LineParser(source)
    values = [parser.parse(LINE.format(n=n % 250, s=n % 60).rstrip("\n")) for n in range(records)]
    services = _services(stack, settings)
    topic = f"bench.baseline{run}"
    schema = {"type": "record", "name": "LogLine", "fields": parser.avro_fields()}
    services.publish.feeds.create(
        FeedSpec(topic=topic, owner=TeamName("bench"), kind=FeedKind.EVENT,
                 value_schema=json.dumps(schema))
    )  # fmt: skip
    feed = services.publish.feeds.get(topic)

    def write() -> None:
        for start in range(0, records, 500):
            batch = [IncomingRecord(value=v) for v in values[start : start + 500]]
            outcome = services.publish.publisher.publish(feed, batch)
            assert outcome.accepted == len(batch)

    try:
        return _timed(stack, topic, records, write)
    finally:
        services.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hub-bench-connect-"))
    root.chmod(0o755)
    scenarios = {"publisher": run_baseline, "logfile": run_logfile, "jdbc": run_jdbc}
    results: dict[str, list[float]] = {name: [] for name in scenarios}
    os.environ.setdefault("HUB_LOG_LEVEL", "WARNING")
    try:
        with Stack(root).running() as stack:
            for run in range(1, args.runs + 1):
                settings = ConnectSettings(
                    offsets_topic=f"_bench_offsets_{run}",
                    configs_topic=f"_bench_configs_{run}",
                    status_topic=f"_bench_status_{run}",
                )
                for name, scenario in scenarios.items():
                    progress(f"run {run}: {name}")
                    results[name].append(scenario(stack, run, args.records, settings))
            # The connectors and the publisher run in this process.
            print_peak_rss({"Kafka broker": stack.broker.status().pid})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nRecords into Kafka, {args.records} per run, median of {args.runs} run(s)")
    medians = {name: statistics.median(rates) for name, rates in results.items()}
    for name, rate in medians.items():
        runs = ", ".join(f"{r:,.0f}" for r in results[name])
        ratio = rate / medians["publisher"]
        print(f"  {name:10s} {rate:10,.0f} records/s  {ratio:5.2f} x publisher   (runs: {runs})")


if __name__ == "__main__":
    main()
