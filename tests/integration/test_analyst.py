"""Analysts query bronze tables while the loader writes them: over JDBC/ODBC and with `hub sql`.

The loader here is this test session's own streaming query (`BronzeLoader` on the `spark`
fixture); the analysts' side runs as separate processes, `hub analyst serve` and `hub sql`, on
the same metastore server: the setup the hub's users run. The Thrift server checks logins with
the session's API (HUB_ANALYST_AUTH=hub-keys, the default): the password is a hub API key.
"""

import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from impala.error import HiveServer2Error, OperationalError
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from thrift.transport.TTransport import TTransportException

from hub_cli import demo
from hub_core.naming import TopicName, bronze_table
from hub_kafka.settings import KafkaSettings
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.runtime.lifecycle import stop_between_batches
from spark_loaders.settings import LoaderSettings
from tests.support.analyst import (
    REFUSED,
    AnalystServer,
    analyst_env,
    serve_analyst,
    thrift_rows,
)
from tests.support.analyst_statements import (
    ESCAPES,
    HIDDEN_READS,
    QUERIES,
    SESSION_SETTINGS,
    WRITES,
)
from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.loader import live_count
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TEAM = "analysts"
FINANCE = "finance"
STATEMENT_TIMEOUT_S = 45


@dataclass
class Landing:
    """A feed and the running loader that lands it in bronze."""

    api_url: str
    key: str
    topic: str
    table: str
    query: StreamingQuery
    settings: LoaderSettings
    rng: random.Random
    # A second feed, of team `finance`, that only its owner and the teams it grants read.
    private_key: str
    private_topic: str
    private_table: str

    def publish_views(self, count: int) -> list[dict[str, Any]]:
        views = [demo.page_view(self.rng) for _ in range(count)]
        response = publish(
            self.api_url, self.key, self.topic, [{"key": v["view_id"], "value": v} for v in views]
        )
        assert response.status_code == 200, response.text
        return views

    def publish_private(self, count: int) -> None:
        views = [demo.page_view(self.rng) for _ in range(count)]
        records = [{"key": v["view_id"], "value": v} for v in views]
        response = publish(self.api_url, self.private_key, self.private_topic, records)
        assert response.status_code == 200, response.text


@pytest.fixture(scope="module")
def landing(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Landing]:
    """A page-view feed every team reads, one only team `finance` reads, and a loader that
    keeps landing both until the module's tests are done."""
    key = team_key(TEAM)
    topic = unique_topic(TEAM)
    schema = demo.schema_text("demo.page_views")
    create_feed(api_url, key, topic=topic, schema=schema, owner=TEAM)
    private_key = team_key(FINANCE)
    private_topic = unique_topic(FINANCE)
    create_feed(
        api_url, private_key, topic=private_topic, schema=schema, owner=FINANCE, read_public=False
    )
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path_factory.mktemp("analyst-checkpoints"),
            "topic_pattern": f"^({re.escape(topic)}|{re.escape(private_topic)})$",
        }
    )
    query = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap)).start()
    try:
        yield Landing(
            api_url,
            key,
            topic,
            bronze_table(TopicName(topic)),
            query,
            settings,
            random.Random(7),
            private_key,
            private_topic,
            bronze_table(TopicName(private_topic)),
        )
    finally:
        stop_between_batches(query)


@pytest.fixture(scope="module")
def analyst_server(
    landing: Landing, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AnalystServer]:
    """`hub analyst serve` on a free port, in its own process, checking keys with the API."""
    with serve_analyst(
        landing.settings,
        api_url=landing.api_url,
        log_path=tmp_path_factory.mktemp("analyst-server") / "serve.log",
        # Small bounds, so that the tests reach them cheaply; the module's own statements stay
        # far below both.
        env={
            "HUB_ANALYST_STATEMENT_TIMEOUT_SECONDS": str(STATEMENT_TIMEOUT_S),
            "HUB_ANALYST_MAX_RESULT_MB": "4",
        },
    ) as server:
        yield server


def _wait_for_rows(spark: SparkSession, table: str, count: int) -> None:
    """Wait until the loader has landed `count` rows in `table` (as this session reads it)."""
    wait_until(
        lambda: live_count(spark, table) >= count,
        timeout_s=240,
        interval_s=1.0,
        what=f"the loader to land {count} rows in {table}",
    )
    assert live_count(spark, table) == count


def _thrift_count(port: int, table: str, *, key: str) -> int:
    tables = {row[1] for row in thrift_rows(port, "SHOW TABLES IN bronze", key=key)}
    if table.split(".", 1)[1] not in tables:
        return 0
    return int(thrift_rows(port, f"SELECT count(*) FROM {table}", key=key)[0][0])


def test_the_thrift_server_returns_the_rows_the_running_loader_lands(
    landing: Landing, analyst_server: AnalystServer, spark: SparkSession
) -> None:
    before = live_count(spark, landing.table)
    sent = landing.publish_views(40)
    _wait_for_rows(spark, landing.table, before + 40)
    assert _thrift_count(analyst_server.port, landing.table, key=landing.key) == before + 40
    # The server has read the table; the loader writes on, and each statement is answered
    # from the newest version the loader committed.
    sent += landing.publish_views(25)
    _wait_for_rows(spark, landing.table, before + 65)

    rows = thrift_rows(
        analyst_server.port,
        f"SELECT view_id, user_id, url, device, duration_ms FROM {landing.table}",
        key=landing.key,
    )

    assert landing.query.isActive, "the loader stopped while the analysts queried"
    assert len(rows) == before + 65
    landed = {row[0]: tuple(row[1:]) for row in rows}
    assert {v["view_id"]: landed.get(v["view_id"]) for v in sent} == {
        v["view_id"]: (v["user_id"], v["url"], v["device"], v["duration_ms"]) for v in sent
    }


def test_a_key_of_any_team_logs_in_and_reads_a_public_feeds_table(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    spark: SparkSession,
) -> None:
    before = live_count(spark, landing.table)
    landing.publish_views(3)
    _wait_for_rows(spark, landing.table, before + 3)

    # Tables are the organization's shared read surface: not only the owner team reads them.
    count = _thrift_count(analyst_server.port, landing.table, key=team_key("marketing"))

    assert count == before + 3


@pytest.mark.parametrize(
    "password",
    ["hub_000000000000_not-a-key-the-hub-made", "", "anything"],
    ids=["unknown-key", "no-key", "not-a-key"],
)
def test_a_login_without_a_valid_api_key_is_refused(
    analyst_server: AnalystServer, password: str
) -> None:
    # The server answers the SASL exchange with a refusal (it does not just drop the connection).
    with pytest.raises(TTransportException, match="Error validating the login"):
        thrift_rows(analyst_server.port, "SELECT 1", key=password)


def test_the_server_log_never_holds_the_keys_of_logins(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    refused = "hub_0123456789ab_a-secret-that-was-never-issued"
    with pytest.raises(TTransportException, match="Error validating the login"):
        thrift_rows(analyst_server.port, "SELECT 1", key=refused)
    assert thrift_rows(analyst_server.port, "SELECT 1", key=landing.key) == [(1,)]

    log_text = analyst_server.log_path.read_text()

    # The log says who logged in, by user and key id, and which login was refused.
    key_id = landing.key.split("_")[1]
    assert f"user '{TEAM}' logged in with key {key_id} (team {TEAM})" in log_text
    assert f"refused a login of user '{TEAM}': the hub API does not accept the key" in log_text
    for key in (landing.key, refused):
        secret = key.split("_", 2)[2]
        assert secret not in log_text


def test_a_team_key_reads_and_describes_a_public_feeds_table(
    landing: Landing, analyst_server: AnalystServer, team_key: Callable[[str], str]
) -> None:
    key = team_key("marketing")
    name = landing.table.split(".", 1)[1]

    tables = {row[1] for row in thrift_rows(analyst_server.port, "SHOW TABLES IN bronze", key=key)}
    columns = {
        row[0] for row in thrift_rows(analyst_server.port, f"DESCRIBE {landing.table}", key=key)
    }
    explained = thrift_rows(analyst_server.port, f"EXPLAIN SELECT * FROM {landing.table}", key=key)

    assert name in tables
    assert {"view_id", "url", "_hub_offset"} <= columns
    assert "Scan" in explained[0][0]


@pytest.mark.parametrize(("statement", "kind"), list(WRITES.values()), ids=list(WRITES))
def test_a_team_key_cannot_change_any_table(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    spark: SparkSession,
    statement: str,
    kind: str,
) -> None:
    key = team_key("marketing")
    before = live_count(spark, landing.table)
    if before == 0:
        landing.publish_views(2)
        _wait_for_rows(spark, landing.table, 2)
        before = 2

    with pytest.raises(REFUSED, match="read-only") as refused:
        thrift_rows(analyst_server.port, statement.format(table=landing.table), key=key)

    assert kind in str(refused.value)
    # The table is still there, with the rows the loader landed and its own properties.
    assert _thrift_count(analyst_server.port, landing.table, key=key) == before
    assert live_count(spark, landing.table) == before
    properties = thrift_rows(analyst_server.port, f"SHOW TBLPROPERTIES {landing.table}", key=key)
    assert "taken_by" not in {row[0] for row in properties}
    tables = {row[1] for row in thrift_rows(analyst_server.port, "SHOW TABLES IN bronze", key=key)}
    assert "made_by_an_analyst" not in tables


def test_a_team_key_cannot_read_the_servers_files_as_tables(
    analyst_server: AnalystServer, team_key: Callable[[str], str]
) -> None:
    with pytest.raises(REFUSED, match=r"TABLE_OR_VIEW_NOT_FOUND|UNSUPPORTED_DATASOURCE"):
        thrift_rows(
            analyst_server.port, "SELECT * FROM text.`/etc/hostname`", key=team_key("marketing")
        )


def test_hub_sql_reads_a_table_while_the_loader_keeps_landing(
    landing: Landing, spark: SparkSession
) -> None:
    before = live_count(spark, landing.table)
    landing.publish_views(10)
    _wait_for_rows(spark, landing.table, before + 10)

    result = subprocess.run(
        [sys.executable, "-m", "hub_cli.main", "sql", f"SELECT count(*) AS n FROM {landing.table}"],
        env=analyst_env(landing.settings),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(rf"\|\s*{before + 10}\s*\|", result.stdout), result.stdout
    # The loader was not locked out of the metastore by the second process: it keeps landing.
    landing.publish_views(5)
    _wait_for_rows(spark, landing.table, before + 15)
    assert landing.query.isActive


@pytest.mark.parametrize(("statement", "construct"), list(ESCAPES.values()), ids=list(ESCAPES))
def test_a_statement_that_would_reach_the_server_itself_is_refused_naming_the_construct(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    statement: str,
    construct: str,
) -> None:
    with pytest.raises(REFUSED, match="read-only") as refused:
        thrift_rows(
            analyst_server.port, statement.format(table=landing.table), key=team_key("marketing")
        )

    message = str(refused.value)
    assert construct in message
    # Nothing of the server's process came back.
    assert "uid=" not in message
    assert "PATH=" not in message
    assert "/root" not in message


@pytest.mark.parametrize("query", QUERIES)
def test_an_analysts_ordinary_query_runs_through_the_guard(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    spark: SparkSession,
    query: str,
) -> None:
    if live_count(spark, landing.table) == 0:
        landing.publish_views(3)
        _wait_for_rows(spark, landing.table, 3)

    rows = thrift_rows(
        analyst_server.port, query.format(table=landing.table), key=team_key("marketing")
    )

    assert rows


@pytest.mark.parametrize(
    ("name", "value"), list(SESSION_SETTINGS.values()), ids=list(SESSION_SETTINGS)
)
def test_a_session_cannot_change_the_servers_settings_when_it_opens(
    landing: Landing, analyst_server: AnalystServer, name: str, value: str
) -> None:
    with pytest.raises(
        HiveServer2Error, match=r"refuses the (value of the )?session setting"
    ) as refused:
        thrift_rows(analyst_server.port, "SELECT 1", key=landing.key, settings={name: value})
    assert name in str(refused.value)

    # The login check is as it was: a password that is not a key is still refused.
    with pytest.raises(TTransportException, match="Error validating the login"):
        thrift_rows(analyst_server.port, "SELECT 1", key="not-a-key")
    assert thrift_rows(analyst_server.port, "SELECT '${env:HOME}'", key=landing.key) == [
        ("${env:HOME}",)
    ]


def test_a_session_may_start_in_a_schema_of_its_choice(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    rows = thrift_rows(
        analyst_server.port,
        "SELECT current_database()",
        key=landing.key,
        settings={"use:database": "bronze"},
    )

    assert rows == [("bronze",)]


def test_a_statement_past_the_time_limit_is_cancelled_with_an_error_that_says_so(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    with pytest.raises(OperationalError, match="time limit") as refused:
        thrift_rows(
            analyst_server.port, "SELECT count(*) FROM range(1000000000000)", key=landing.key
        )

    assert f"{STATEMENT_TIMEOUT_S}s" in str(refused.value)
    # The server is free again: the cancelled statement's tasks stopped.
    assert thrift_rows(analyst_server.port, "SELECT 1", key=landing.key) == [(1,)]


def test_a_result_larger_than_the_limit_fails_instead_of_filling_the_server(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    with pytest.raises(OperationalError, match=r"spark\.driver\.maxResultSize"):
        thrift_rows(
            analyst_server.port,
            # About 19 MB of hashes, which compress to well over the server's 4 MB.
            "SELECT id, sha2(cast(id AS STRING), 512), sha2(cast(id + 1 AS STRING), 512), "
            "sha2(cast(id + 2 AS STRING), 512) FROM range(50000)",
            key=landing.key,
        )

    assert thrift_rows(analyst_server.port, "SELECT 1", key=landing.key) == [(1,)]


def _land_private(landing: Landing, spark: SparkSession) -> None:
    """Make sure both feeds' tables exist and hold rows."""
    if live_count(spark, landing.private_table) == 0:
        landing.publish_private(3)
        _wait_for_rows(spark, landing.private_table, 3)
    if live_count(spark, landing.table) == 0:
        landing.publish_views(3)
        _wait_for_rows(spark, landing.table, 3)


def _reads(port: int, table: str, key: str) -> bool:
    """Whether `key` reads `table` now; False when the server refuses it for read grants."""
    try:
        return bool(thrift_rows(port, f"SELECT count(*) FROM {table}", key=key))
    except REFUSED as refused:
        assert "may not read" in str(refused), refused
        return False


def test_a_restricted_feeds_table_is_read_by_its_owner_the_teams_it_grants_and_admins(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    admin_key: str,
    spark: SparkSession,
) -> None:
    _land_private(landing, spark)
    port, table, topic = analyst_server.port, landing.private_table, landing.private_topic
    marketing = team_key("marketing")
    statement = f"SELECT count(*) FROM {table}"

    assert thrift_rows(port, statement, key=landing.private_key)[0][0] >= 3
    assert thrift_rows(port, statement, key=admin_key)[0][0] >= 3
    with pytest.raises(REFUSED, match="Team marketing may not read") as refused:
        thrift_rows(port, statement, key=marketing)
    assert f"'{topic}' (team {FINANCE})" in str(refused.value)
    assert "hub feed grant <topic> marketing" in str(refused.value)
    # The login's user name is free: only the key says whose grants apply.
    with pytest.raises(REFUSED, match="may not read"):
        thrift_rows(port, statement, key=marketing, user=FINANCE)

    # A grant takes effect within the server's few seconds of caching, and so does a revocation.
    readers = f"{landing.api_url}/v1/feeds/{topic}/readers/marketing"
    granted = httpx.put(readers, headers=bearer(landing.private_key), timeout=30)
    assert granted.status_code == 200, granted.text
    try:
        wait_until(lambda: _reads(port, table, marketing), timeout_s=30, what="the grant")
    finally:
        revoked = httpx.delete(readers, headers=bearer(landing.private_key), timeout=30)
        assert revoked.status_code == 200, revoked.text
    wait_until(lambda: not _reads(port, table, marketing), timeout_s=30, what="the revocation")


@pytest.mark.parametrize("statement", list(HIDDEN_READS.values()), ids=list(HIDDEN_READS))
def test_no_statement_reaches_a_restricted_feeds_table_without_a_grant(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    spark: SparkSession,
    statement: str,
) -> None:
    _land_private(landing, spark)
    text = statement.format(public=landing.table, private=landing.private_table)

    with pytest.raises(REFUSED, match=f"Team marketing may not read {landing.private_table}"):
        thrift_rows(analyst_server.port, text, key=team_key("marketing"))
    # The owner runs the same statement.
    thrift_rows(analyst_server.port, text, key=landing.private_key, fetch="VIEW" not in text)


def test_names_of_restricted_tables_are_listed_to_every_team(
    landing: Landing, analyst_server: AnalystServer, team_key: Callable[[str], str]
) -> None:
    listed = thrift_rows(analyst_server.port, "SHOW TABLES IN bronze", key=team_key("marketing"))

    assert landing.private_table.split(".", 1)[1] in {row[1] for row in listed}


def test_a_table_that_names_no_feed_is_read_by_admins_only(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    admin_key: str,
    spark: SparkSession,
) -> None:
    table = "default.made_beside_the_loader"
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} USING delta AS SELECT 1 AS a")

    with pytest.raises(REFUSED, match=f"Only admins read {table}: it names no feed"):
        thrift_rows(analyst_server.port, f"SELECT * FROM {table}", key=team_key("marketing"))
    assert thrift_rows(analyst_server.port, f"SELECT * FROM {table}", key=admin_key) == [(1,)]


def test_hub_sql_with_a_key_reads_what_the_key_may_and_nothing_else(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    spark: SparkSession,
) -> None:
    _land_private(landing, spark)
    env = {
        **analyst_env(landing.settings),
        "HUB_ANALYST_PORT": str(analyst_server.port),
        "HUB_API_KEY": team_key("marketing"),
    }

    def hub_sql(statement: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hub_cli.main", "sql", statement],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    public = hub_sql(f"SELECT count(*) AS n FROM {landing.table}")
    private = hub_sql(f"SELECT count(*) AS n FROM {landing.private_table}")
    script = hub_sql("SELECT TRANSFORM('a') USING 'id' AS (o STRING)")

    assert public.returncode == 0, public.stderr[-3000:]
    assert re.search(r"\|\s*n\s*\|", public.stdout), public.stdout
    assert private.returncode == 2
    assert "42272" in private.stderr and "Team marketing may not read" in private.stderr
    assert script.returncode == 2 and "TRANSFORM" in script.stderr
