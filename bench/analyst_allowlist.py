"""What the analysts' server's statement check costs: its time against Spark's own planning.

A session built as `hub analyst serve` builds its own (the Thrift server's settings, the
read-only extension, the check's jar on the driver's class path) holds two Delta tables, a fact
of `--rows` rows and a small dimension. For each statement below, taking turns `--rounds` times,
it times:

- Spark's planning of the statement as the server runs it: parse, analyse, optimise and plan
  (`spark.sql(...)` then the executed plan), without running it;
- the check (`StatementAllowlist.refusal`): parse and analyse again in the same session, then
  walk the plan against the allow-lists.

Both are timed from Python around one call into the JVM each, so the call's own cost is in both.
It prints, per statement, the median of each, the check's time as a share of planning, and the
check's absolute cost; the check grows with the size of the analysed plan, not with the rows.

    .venv/bin/python bench/analyst_allowlist.py      # about a minute on 2 cores
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.servers import local_loader_settings  # noqa: E402
from spark_loaders.services.analyst import thrift_conf  # noqa: E402
from spark_loaders.services.analyst_settings import AnalystAuth, AnalystSettings  # noqa: E402
from spark_loaders.services.session import spark_session  # noqa: E402
from spark_loaders.tables.delta_tables import stamp_feeds  # noqa: E402

STATEMENTS = {
    "point query": "SELECT * FROM bench.views WHERE view_id = 42",
    "join and aggregate": (
        "SELECT d.name, count(*), avg(v.duration_ms), max(v.url) FROM bench.views v "
        "JOIN bench.devices d ON v.device = d.device GROUP BY d.name ORDER BY 2 DESC"
    ),
    "window": (
        "SELECT view_id, row_number() OVER (PARTITION BY device ORDER BY duration_ms DESC) AS rn, "
        "lag(duration_ms) OVER (PARTITION BY device ORDER BY view_id) FROM bench.views"
    ),
    "CTE and subqueries": (
        "WITH busy AS (SELECT device, count(*) AS n FROM bench.views GROUP BY device) "
        "SELECT * FROM bench.views v WHERE v.device IN (SELECT device FROM busy WHERE n > 10) "
        "AND v.duration_ms > (SELECT avg(duration_ms) FROM bench.views)"
    ),
    "wide projection": "SELECT "
    + ", ".join(
        f"upper(url) AS u{i}, coalesce(device, 'x') AS d{i}, "
        f"CASE WHEN duration_ms BETWEEN {i} AND {i + 100} THEN 1 ELSE 0 END AS b{i}"
        for i in range(30)
    )
    + " FROM bench.views",
}


def prepare(home: Path, rows: int, feeds: dict[str, str] | None = None) -> None:
    """Write the two tables, in a session of the loader's kind: the analysts' one cannot.

    `feeds` gives a table ({"bench.views": "sales.views"}) the feed it is built from, as the
    loader would (`hub.feeds`).
    """
    settings = local_loader_settings(home, registry_url="http://127.0.0.1:1")
    with spark_session(settings, app_name="bench-analyst-allowlist-tables") as spark:
        spark.sql("CREATE DATABASE bench")
        spark.range(rows).selectExpr(
            "id AS view_id",
            "concat('/page/', id % 97) AS url",
            "CASE id % 3 WHEN 0 THEN 'mobile' WHEN 1 THEN 'desktop' ELSE 'tablet' END AS device",
            "cast(id % 5000 AS INT) AS duration_ms",
        ).write.format("delta").saveAsTable("bench.views")
        spark.createDataFrame(
            [("mobile", "Phone"), ("desktop", "Desktop"), ("tablet", "Tablet")],
            "device STRING, name STRING",
        ).write.format("delta").saveAsTable("bench.devices")
        for table, feed in (feeds or {}).items():
            stamp_feeds(spark, table, [feed])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="rows of the fact table")
    parser.add_argument("--rounds", type=int, default=30, help="rounds, taking turns")
    parser.add_argument("--prepare", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        prepare(args.prepare, args.rows)
        return
    home = Path(tempfile.mkdtemp(prefix="hub-bench-allowlist-"))
    print("writing the tables", file=sys.stderr)
    # A process of its own: the analysts' session's class path is fixed when its JVM starts.
    subprocess.run(
        [sys.executable, __file__, "--prepare", str(home), "--rows", str(args.rows)], check=True
    )
    settings = local_loader_settings(home, registry_url="http://127.0.0.1:1")
    conf = thrift_conf(AnalystSettings(auth=AnalystAuth.NONE), settings)
    with spark_session(settings, app_name="bench-analyst-allowlist", extra_conf=conf) as spark:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        jspark = spark._jsparkSession
        check = jvm.org.integrationhub.thrift.StatementAllowlist

        def planning(statement: str) -> float:
            start = time.perf_counter()
            jspark.sql(statement).queryExecution().executedPlan()
            return time.perf_counter() - start

        def checking(statement: str) -> float:
            start = time.perf_counter()
            refused = check.refusal(jspark, statement)
            elapsed = time.perf_counter() - start
            assert refused is None, refused
            return elapsed

        times: dict[str, dict[str, list[float]]] = {
            name: {"planning": [], "check": []} for name in STATEMENTS
        }
        for round_number in range(args.rounds):
            for name, statement in STATEMENTS.items():
                # Taking turns, and the first of each pair alternating, so neither way always
                # runs on the warmer JIT.
                ways = [("planning", planning), ("check", checking)]
                for way, run in ways if round_number % 2 == 0 else reversed(ways):
                    times[name][way].append(run(statement))
            print(f"round {round_number + 1}/{args.rounds}", file=sys.stderr)

    # The first rounds warm the JIT; the medians take the second half.
    print(f"{'statement':<22} {'planning ms':>12} {'check ms':>9} {'check / planning':>17}")
    for name, kinds in times.items():
        half = args.rounds // 2
        plan_ms = statistics.median(kinds["planning"][half:]) * 1000
        check_ms = statistics.median(kinds["check"][half:]) * 1000
        print(f"{name:<22} {plan_ms:>12.2f} {check_ms:>9.2f} {check_ms / plan_ms:>17.2f}")


if __name__ == "__main__":
    main()
