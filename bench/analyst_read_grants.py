"""What read grants cost a statement on the analysts' server: a team's key against an admin's.

A real `hub analyst serve` checks logins and read grants with a real `hub api serve` (SQLite, no
Kafka: only keys and feeds are asked). It serves two Delta tables built from two feeds, as the
loader makes them: a fact of `--rows` rows from a restricted feed that grants the team, and a
small dimension from a public feed. Each statement below runs `--rounds` times, taking turns,
over impyla, logged in with:

- an admin key: the allow-list runs, read grants are skipped (admins read every table);
- a team key: the allow-list runs, then every table's `hub.feeds` and every feed's readers are
  checked. Answers are kept 5 seconds, so most statements use kept answers and one in a few
  asks the catalog (a Delta snapshot) and the API (an HTTP request per feed) again.

It prints the median round trip of each (execute and fetch, rows included) and their ratio; the
difference is the read check's cost, which grows with the tables and feeds a statement names,
not with rows. Connections are opened once per key, as a BI tool's pool does.

    .venv/bin/python bench/analyst_read_grants.py      # about three minutes on 2 cores
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from impala.dbapi import connect  # noqa: E402

from bench.servers import api_server, local_loader_settings  # noqa: E402
from catalog.feeds import FeedStore  # noqa: E402
from catalog.types import Feed, FeedKind, TeamName  # noqa: E402
from hub_core.database import create_database_engine  # noqa: E402
from tests.support.analyst import serve_analyst  # noqa: E402
from tests.support.hub_client import create_key  # noqa: E402

OWNER, READER = TeamName("sales"), TeamName("marketing")
FEEDS = {"bench.views": "sales.views", "bench.devices": "sales.devices"}
STATEMENTS = {
    "point query": "SELECT * FROM bench.views WHERE view_id = 42",
    "join and aggregate": (
        "SELECT d.name, count(*), avg(v.duration_ms) FROM bench.views v "
        "JOIN bench.devices d ON v.device = d.device GROUP BY d.name ORDER BY 2 DESC"
    ),
    "subquery over both": (
        "SELECT count(*) FROM bench.views WHERE device IN "
        "(SELECT device FROM bench.devices WHERE name <> 'Tablet')"
    ),
    "describe": "DESCRIBE bench.views",
}


def feeds_and_keys(database_url: str) -> tuple[str, str]:
    """The two feeds (the fact's restricted, granting READER) and an admin and a team key."""
    admin = create_key(database_url, team=None)
    create_key(database_url, team=OWNER)
    team = create_key(database_url, team=READER)
    engine = create_database_engine(database_url)
    try:
        feeds = FeedStore(engine)
        for table, topic in FEEDS.items():
            feeds.register(
                feed=Feed(
                    topic=topic, owner=OWNER, kind=FeedKind.EVENT, partitions=1, key_fields=(),
                    retention_ms=None, description="", created_at=datetime.now(UTC),
                    read_public=table != "bench.views",
                )
            )  # fmt: skip
        feeds.grant(topic=FEEDS["bench.views"], team=READER)
    finally:
        engine.dispose()
    return admin, team


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the fact table")
    parser.add_argument("--rounds", type=int, default=40, help="rounds, taking turns")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="hub-bench-read-grants-"))
    print("writing the tables", file=sys.stderr)
    prepare = (
        "import sys; from pathlib import Path; from bench.analyst_allowlist import prepare; "
        f"prepare(Path(sys.argv[1]), {args.rows}, {FEEDS!r})"
    )
    subprocess.run([sys.executable, "-c", prepare, str(home)], check=True, cwd=REPO)
    database_url = f"sqlite:///{home / 'registry.db'}"
    settings = local_loader_settings(home, registry_url="http://127.0.0.1:1")
    with api_server(database_url, auth="required") as api:
        admin_key, team_key = feeds_and_keys(database_url)
        print("starting the analysts' server", file=sys.stderr)
        with serve_analyst(
            settings,
            api_url=api.base_url,
            log_path=home / "analyst.log",
            env={"HUB_ANALYST_AUTH_CACHE_SECONDS": "60"},
        ) as server:
            times = measure(server.port, {"admin": admin_key, "team": team_key}, args.rounds)

    # The first rounds warm the JIT and the caches; the medians take the second half.
    print(f"{'statement':<20} {'admin ms':>9} {'team ms':>8} {'team / admin':>13}")
    for name, ways in times.items():
        half = args.rounds // 2
        admin_ms = statistics.median(ways["admin"][half:]) * 1000
        team_ms = statistics.median(ways["team"][half:]) * 1000
        print(f"{name:<20} {admin_ms:>9.2f} {team_ms:>8.2f} {team_ms / admin_ms:>13.2f}")


def measure(port: int, keys: dict[str, str], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Round trips of every statement for every key, taking turns, in seconds."""
    connections = {
        who: connect(host="127.0.0.1", port=port, auth_mechanism="PLAIN", user=who, password=key)
        for who, key in keys.items()
    }
    cursors: dict[str, Any] = {who: c.cursor() for who, c in connections.items()}
    times: dict[str, dict[str, list[float]]] = {n: {w: [] for w in keys} for n in STATEMENTS}
    try:
        for round_number in range(rounds):
            order = list(keys) if round_number % 2 == 0 else list(reversed(keys))
            for name, statement in STATEMENTS.items():
                for who in order:
                    start = time.perf_counter()
                    cursors[who].execute(statement)
                    cursors[who].fetchall()
                    times[name][who].append(time.perf_counter() - start)
            print(f"round {round_number + 1}/{rounds}", file=sys.stderr)
    finally:
        for who, connection in connections.items():
            cursors[who].close()
            connection.close()
    return times


if __name__ == "__main__":
    main()
