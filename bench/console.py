"""How long the web console's pages take to answer, against `/healthz` on the same server.

A local Kafka broker and `hub api serve` (its own process, auth off) are started; the demo
feeds are created and a few hundred demo records published through the gateway, a few of them
refused into each feed's dead-letter topic. Then each page is fetched `--rounds` times after a
warm-up, one request at a time, and its median and 95th percentile are printed next to the
baseline's. The server knows no loader (HUB_API_LOADER_URL unset): the pages show no loader
figures, and the tables page costs the feeds' list only. Nothing is landed either: the lineage
page is timed empty and answering a Kafka position no table holds (404 on the page, after the
lineage index's look at the warehouse).

    .venv/bin/python bench/console.py               # 30 rounds
    .venv/bin/python bench/console.py --rounds 100
"""

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import kafka_and_api  # noqa: E402
from hub_cli import demo  # noqa: E402

_BATCHES = 60


def _seed(http: httpx.Client) -> None:
    demo.create_feeds(str(http.base_url), "bench")
    rng = random.Random(7)
    for n, (topic, records) in enumerate(demo.batches(rng)):
        if n >= _BATCHES:
            break
        http.post(f"/v1/feeds/{topic}/records", json={"records": records}).raise_for_status()
        bad = [{"value": {"not_a_field": n}}]
        http.post(f"/v1/feeds/{topic}/records", params={"on_error": "dlq"}, json={"records": bad})


def _timed(http: httpx.Client, path: str, rounds: int) -> tuple[float, float]:
    expected = 404 if "offset=" in path else 200  # a position nothing landed holds
    for _ in range(3):
        assert http.get(path).status_code == expected, path
    took = []
    for _ in range(rounds):
        started = time.perf_counter()
        response = http.get(path)
        took.append((time.perf_counter() - started) * 1000)
        assert response.status_code == expected, path
    took.sort()
    return statistics.median(took), took[max(0, int(len(took) * 0.95) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="hub-bench-console-"))
    # The demo feeds' owner team exists before they are created.
    with kafka_and_api(home, teams=[demo.TEAM]) as (_bootstrap, api_url):
        _measure(api_url, args.rounds)


def _measure(api_url: str, rounds: int) -> None:
    # Auth is off in the benchmark's server: every caller is an admin, signed in or not.
    with httpx.Client(base_url=api_url, timeout=30) as http:
        _seed(http)
        pages = ["/healthz", "/console/feeds", "/console/tables", "/console/connectors"]
        pages += [f"/console/feeds/{topic}" for topic in demo.FEEDS]
        first = next(iter(demo.FEEDS))
        pages += ["/console/lineage", f"/console/lineage?topic={first}&partition=0&offset=0"]
        width = max(40, *(len(p) for p in pages))
        print(f"{'page':<{width}} {'median ms':>10} {'p95 ms':>8}")
        for path in pages:
            median, p95 = _timed(http, path, rounds)
            print(f"{path:<{width}} {median:>10.1f} {p95:>8.1f}")


if __name__ == "__main__":
    main()
