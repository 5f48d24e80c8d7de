"""Publishing through a broker failure: latency and throughput before, during and after the
leader of a feed's partitions is SIGKILLed on a local 3-node cluster, next to a run with no kill
measured in the same process, on the same cluster, a moment before.

    .venv/bin/python bench/failover.py                    # 100,000 records per run, 4 clients
    .venv/bin/python bench/failover.py --records 20000    # a quicker look

Each run publishes `--records` records of a 3-partition feed (3 replicas, min.insync.replicas
2) from `--writers` threads in requests of `--batch`. The failover run kills the leader of
partition 0 once a third of the records are answered and starts it again at two thirds; the
writers wait while it starts (a JVM's start takes longer than the rest of a small run), so the
last third measures the cluster with all nodes back. A request counts as "while down" when it
was in flight at any moment between the kill and the node's return. Afterwards every
acknowledged record is checked to be in the topic once, where its answer said. The exit status
is 1 if any was not, or an answer carried no error code.
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.servers import print_peak_rss
from hub_kafka.local_cluster import LocalCluster
from hub_kafka.settings import KafkaSettings
from tests.support.api_server import serve_api
from tests.support.failover import (
    SCHEMA,
    Answers,
    duplicates,
    leader_of,
    misplaced,
    publish_concurrently,
    topic_ids,
)
from tests.support.hub_client import create_feed, create_key, unique_topic
from tests.support.ports import free_port
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[1]
JARS = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "jars" / "kafka"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=250)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hub-failover-") as home:
        cluster = LocalCluster(
            KafkaSettings(broker_home=Path(home) / "kafka", broker_jars_dir=JARS),
            brokers=3,
            ports=[(free_port(), free_port()) for _ in range(3)],
        )
        cluster.start()
        try:
            return _measure(cluster, Path(home), args)
        finally:
            cluster.stop()


def _measure(cluster: LocalCluster, home: Path, args: argparse.Namespace) -> int:
    database = f"sqlite:///{home / 'hub.db'}"
    with serve_api(
        database_url=database,
        bootstrap_servers=cluster.bootstrap_servers,
        delivery_timeout_ms=60_000,
    ) as api_url:
        key = create_key(database, team="bench")
        # Unmeasured: the API's and the brokers' first requests are slower (imports, JIT).
        warm_up = argparse.Namespace(**{**vars(args), "records": max(1, args.records // 5)})
        _run(api_url, key, cluster, warm_up, kill=False)
        baseline = _run(api_url, key, cluster, args, kill=False)
        failover = _run(api_url, key, cluster, args, kill=True)
        # The API and the clients run in this process; the killed node's figure is its restart's.
        print_peak_rss({f"broker {n.node.node_id}": n.status().pid for n in cluster.nodes})
    print(f"{args.records:,} records per run, {args.writers} clients, {args.batch} per request")
    killed, back = failover.killed, failover.restarted
    _report("no kill (baseline)", baseline, lambda started, ended: True)
    _report("before the kill", failover, lambda started, ended: ended <= killed)
    _report("while down", failover, lambda started, ended: started < back and ended > killed)
    _report("after the restart", failover, lambda started, ended: started >= back)
    print(f"node down for {failover.restarted - failover.killed:.1f}s (kill to ready again)")
    return 0 if baseline.sound and failover.sound else 1


class _Run:
    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.start = self.killed = self.restarted = self.end = time.monotonic()
        self.sound = False


def _run(
    api_url: str, key: str, cluster: LocalCluster, args: argparse.Namespace, *, kill: bool
) -> _Run:
    topic = unique_topic("bench")
    create_feed(api_url, key, topic=topic, schema=SCHEMA, owner="bench", partitions=3)
    run = _Run(Answers())
    back = threading.Event()
    if not kill:
        back.set()

    def pause() -> None:
        if run.answers.answered >= args.records * 2 // 3:
            back.wait()

    run.start = time.monotonic()
    writers = publish_concurrently(
        api_url, key, topic, writers=args.writers, records=args.records, batch=args.batch,
        answers=run.answers, pause=pause,
    )  # fmt: skip
    try:
        if kill:
            _kill_and_restart(cluster, topic, run, args.records)
    finally:
        back.set()  # whatever happened, the writers finish their share
        for writer in writers:
            writer.join()
    run.end = time.monotonic()
    run.sound = _check(cluster.bootstrap_servers, topic, run.answers)
    return run


def _kill_and_restart(cluster: LocalCluster, topic: str, run: _Run, records: int) -> None:
    """SIGKILL the leader of the topic's partition 0 at a third of the records, and start it
    again at two thirds, while the writers wait."""
    wait_until(lambda: run.answers.answered >= records // 3, timeout_s=600, what="1/3")
    victim = cluster.node(leader_of(cluster.bootstrap_servers, topic))
    pid = victim.status().pid
    if pid is not None:
        os.kill(pid, signal.SIGKILL)
    run.killed = time.monotonic()
    wait_until(lambda: run.answers.answered >= records * 2 // 3, timeout_s=600, what="2/3")
    # A node killed mid-write recovers its logs before it serves: on a busy 2-core machine
    # that can take minutes. Its log is named in the error if it does not come back.
    print(f"{victim.log_file}: starting that node again", flush=True)
    victim.start(timeout_s=300)
    run.restarted = time.monotonic()


def _check(bootstrap: str, topic: str, answers: Answers) -> bool:
    """Print and return whether every acknowledged record is in the topic once, where its
    answer said, and every other record got a coded error."""
    positions = topic_ids(bootstrap, topic, expected=len(answers.stored))
    wrong = misplaced(answers, positions)
    doubled = duplicates(positions)
    codes = sorted(set(answers.refused.values()))
    print(
        f"{topic}: {len(answers.stored):,} acknowledged, {len(answers.refused):,} refused "
        f"(codes {codes}), {len(answers.uncoded)} uncoded answers, {len(wrong)} acknowledged "
        f"but not found at their offset, {len(doubled)} doubled"
    )
    return not wrong and not doubled and not answers.uncoded


def _report(name: str, run: _Run, chosen_if: Callable[[float, float], bool]) -> None:
    """Latency percentiles of the requests for which `chosen_if(started, ended)` holds, and
    their records per second from the first one's start to the last one's end."""
    chosen = [
        (started, started + seconds, records)
        for started, seconds, records in run.answers.latencies
        if chosen_if(started, started + seconds)
    ]
    if not chosen:
        print(f"{name:>20}: no requests")
        return
    millis = sorted((ended - started) * 1000 for started, ended, _ in chosen)
    cuts = statistics.quantiles(millis * (2 if len(millis) == 1 else 1), n=100, method="inclusive")
    span = max(ended for _, ended, _ in chosen) - min(started for started, _, _ in chosen)
    rate = sum(records for _, _, records in chosen) / max(span, 1e-9)
    print(
        f"{name:>20}: {len(millis):5d} requests  p50 {cuts[49]:7.1f} ms  p95 {cuts[94]:7.1f} ms  "
        f"p99 {cuts[98]:7.1f} ms  max {millis[-1]:7.1f} ms  {rate:9,.0f} records/s"
    )


if __name__ == "__main__":
    sys.exit(main())
