"""Analysts query bronze tables while the loader writes them: over JDBC/ODBC and with `hub sql`.

The loader here is this test session's own streaming query (`BronzeLoader` on the `spark`
fixture); the analysts' side runs as separate processes, `hub analyst serve` and `hub sql`, on
the same metastore server: the setup the hub's users run. The Thrift server checks logins with
the session's API (HUB_ANALYST_AUTH=hub-keys, the default): the password is a hub API key.
"""

import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from impala.dbapi import connect
from impala.error import HiveServer2Error, OperationalError
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from thrift.transport.TTransport import TTransportException

from hub_cli import demo
from hub_core.naming import TopicName, bronze_table
from hub_kafka.settings import KafkaSettings
from spark_loaders.bronze import BronzeLoader
from spark_loaders.lifecycle import stop_between_batches
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.loader import live_count
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

TEAM = "analysts"
STATEMENT_TIMEOUT_S = 45
# A statement refused before it runs fails the ExecuteStatement call itself (impyla's
# HiveServer2Error); one refused while it runs fails its operation (OperationalError).
REFUSED = (HiveServer2Error, OperationalError)


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

    def publish_views(self, count: int) -> list[dict[str, Any]]:
        views = [demo.page_view(self.rng) for _ in range(count)]
        response = publish(
            self.api_url, self.key, self.topic, [{"key": v["view_id"], "value": v} for v in views]
        )
        assert response.status_code == 200, response.text
        return views


@pytest.fixture(scope="module")
def landing(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Landing]:
    """A page-view feed and a loader that keeps landing it until the module's tests are done."""
    key = team_key(TEAM)
    topic = unique_topic(TEAM)
    create_feed(api_url, key, topic=topic, schema=demo.schema_text("demo.page_views"), owner=TEAM)
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path_factory.mktemp("analyst-checkpoints"),
            "topic_pattern": f"^{re.escape(topic)}$",
        }
    )
    query = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap)).start()
    try:
        yield Landing(
            api_url, key, topic, bronze_table(TopicName(topic)), query, settings, random.Random(7)
        )
    finally:
        stop_between_batches(query)


def _analyst_env(settings: LoaderSettings) -> dict[str, str]:
    """The environment of a process on the same metastore and warehouse as the loader."""
    return {
        **os.environ,
        "HUB_LOADER_MASTER": "local[1]",
        "HUB_LOADER_DRIVER_MEMORY": "512m",
        "HUB_LOADER_SHUFFLE_PARTITIONS": "1",
        "HUB_LOADER_WAREHOUSE_DIR": str(settings.warehouse_dir),
        "HUB_LOADER_METASTORE_DIR": str(settings.metastore_dir),
        "HUB_LOADER_METASTORE_PORT": str(settings.metastore_port),
        "HUB_LOADER_METASTORE_JARS_DIR": str(settings.metastore_jars_dir),
        "HUB_LOADER_JARS_DIR": str(settings.jars_dir),
    }


@dataclass
class AnalystServer:
    """A running `hub analyst serve`: its port and its log (stdout and stderr)."""

    port: int
    log_path: Path


@pytest.fixture(scope="module")
def analyst_server(
    landing: Landing, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AnalystServer]:
    """`hub analyst serve` on a free port, in its own process, checking keys with the API."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("analyst-server") / "serve.log"
    with log_path.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, "-m", "hub_cli.main", "analyst", "serve", "--port", str(port)],
            env={
                **_analyst_env(landing.settings),
                "HUB_ANALYST_API_URL": landing.api_url,
                # Small bounds, so that the tests reach them cheaply; the module's own
                # statements stay far below both.
                "HUB_ANALYST_STATEMENT_TIMEOUT_SECONDS": str(STATEMENT_TIMEOUT_S),
                "HUB_ANALYST_MAX_RESULT_MB": "4",
            },
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until(
            lambda: server.poll() is not None or "Thrift server is ready" in log_path.read_text(),
            timeout_s=300,
            what=f"`hub analyst serve` to accept connections (log: {log_path})",
        )
        assert server.poll() is None, log_path.read_text()[-3000:]
        yield AnalystServer(port, log_path)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    assert "stopping the Thrift server" in log_path.read_text()


def _wait_for_rows(spark: SparkSession, table: str, count: int) -> None:
    """Wait until the loader has landed `count` rows in `table` (as this session reads it)."""
    wait_until(
        lambda: live_count(spark, table) >= count,
        timeout_s=240,
        interval_s=1.0,
        what=f"the loader to land {count} rows in {table}",
    )
    assert live_count(spark, table) == count


def _thrift_rows(
    port: int, statement: str, *, key: str, settings: dict[str, str] | None = None
) -> list[tuple[Any, ...]]:
    """Run `statement` as a client would, logging in with the API key `key` as the password.

    `settings` go into the session's handshake (OpenSession), as JDBC URL settings and beeline's
    `--hiveconf` do.
    """
    connection = connect(
        host="127.0.0.1", port=port, auth_mechanism="PLAIN", user=TEAM, password=key
    )
    try:
        cursor = connection.cursor(configuration=settings)
        try:
            cursor.execute(statement)
            rows: list[tuple[Any, ...]] = cursor.fetchall()
        finally:
            cursor.close()
        return rows
    finally:
        connection.close()


def _thrift_count(port: int, table: str, *, key: str) -> int:
    tables = {row[1] for row in _thrift_rows(port, "SHOW TABLES IN bronze", key=key)}
    if table.split(".", 1)[1] not in tables:
        return 0
    return int(_thrift_rows(port, f"SELECT count(*) FROM {table}", key=key)[0][0])


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

    rows = _thrift_rows(
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


def test_a_key_of_any_team_logs_in_and_reads_every_table(
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
        _thrift_rows(analyst_server.port, "SELECT 1", key=password)


def test_the_server_log_never_holds_the_keys_of_logins(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    refused = "hub_0123456789ab_a-secret-that-was-never-issued"
    with pytest.raises(TTransportException, match="Error validating the login"):
        _thrift_rows(analyst_server.port, "SELECT 1", key=refused)
    assert _thrift_rows(analyst_server.port, "SELECT 1", key=landing.key) == [(1,)]

    log_text = analyst_server.log_path.read_text()

    # The log says who logged in, by user and key id, and which login was refused.
    key_id = landing.key.split("_")[1]
    assert f"user '{TEAM}' logged in with key {key_id} (team {TEAM})" in log_text
    assert f"refused a login of user '{TEAM}': the hub API does not accept the key" in log_text
    for key in (landing.key, refused):
        secret = key.split("_", 2)[2]
        assert secret not in log_text


def test_a_team_key_reads_and_describes_every_table(
    landing: Landing, analyst_server: AnalystServer, team_key: Callable[[str], str]
) -> None:
    key = team_key("marketing")
    name = landing.table.split(".", 1)[1]

    tables = {row[1] for row in _thrift_rows(analyst_server.port, "SHOW TABLES IN bronze", key=key)}
    columns = {
        row[0] for row in _thrift_rows(analyst_server.port, f"DESCRIBE {landing.table}", key=key)
    }
    explained = _thrift_rows(analyst_server.port, f"EXPLAIN SELECT * FROM {landing.table}", key=key)

    assert name in tables
    assert {"view_id", "url", "_hub_offset"} <= columns
    assert "Scan" in explained[0][0]


# Each statement with the kind of statement the refusal names.
_WRITES = {
    "drop-table": ("DROP TABLE {table}", "DROP TABLE"),
    "insert": ("INSERT INTO {table} SELECT * FROM {table} LIMIT 1", "INSERT INTO"),
    "delete": ("DELETE FROM {table}", "DELETE FROM"),
    "create-table": ("CREATE TABLE bronze.made_by_an_analyst (a INT) USING delta", "CREATE"),
    "alter-table": (
        "ALTER TABLE {table} SET TBLPROPERTIES ('taken_by' = 'marketing')",
        "ALTER TABLE SET TBLPROPERTIES",
    ),
    "optimize": ("OPTIMIZE {table}", "OPTIMIZE"),
    "set": ("SET spark.sql.variable.substitute=true", "SET of a value"),
    "reflect": ("SELECT reflect('java.lang.System', 'getenv', 'PATH')", "reflect"),
    "cache": ("CACHE TABLE {table}", "CACHE TABLE"),
    "write-a-directory": (
        "INSERT OVERWRITE LOCAL DIRECTORY '/tmp/hub-analyst-out' USING text SELECT 'a'",
        "DIR",
    ),
}


@pytest.mark.parametrize(("statement", "kind"), list(_WRITES.values()), ids=list(_WRITES))
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
        _thrift_rows(analyst_server.port, statement.format(table=landing.table), key=key)

    assert kind in str(refused.value)
    # The table is still there, with the rows the loader landed and its own properties.
    assert _thrift_count(analyst_server.port, landing.table, key=key) == before
    assert live_count(spark, landing.table) == before
    properties = _thrift_rows(analyst_server.port, f"SHOW TBLPROPERTIES {landing.table}", key=key)
    assert "taken_by" not in {row[0] for row in properties}
    tables = {row[1] for row in _thrift_rows(analyst_server.port, "SHOW TABLES IN bronze", key=key)}
    assert "made_by_an_analyst" not in tables


def test_a_team_key_cannot_read_the_servers_files_as_tables(
    analyst_server: AnalystServer, team_key: Callable[[str], str]
) -> None:
    with pytest.raises(REFUSED, match=r"TABLE_OR_VIEW_NOT_FOUND|UNSUPPORTED_DATASOURCE"):
        _thrift_rows(
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
        env=_analyst_env(landing.settings),
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


# Statements that would reach the server's process, its files or its environment, each with
# what the refusal names.
_ESCAPES = {
    "script-transformation": ("SELECT TRANSFORM('a') USING 'id' AS (o STRING)", "TRANSFORM"),
    "script-reading-the-environment": (
        "SELECT TRANSFORM(view_id) USING 'cat /proc/self/environ' AS (o STRING) FROM {table}",
        "TRANSFORM",
    ),
    "java-method": ("SELECT java_method('java.lang.System', 'getenv', 'PATH')", "java_method"),
    "try-reflect": ("SELECT try_reflect('java.lang.System', 'getenv', 'HOME')", "reflect"),
    "reflection-in-a-subquery": (
        "SELECT * FROM {table} WHERE url = (SELECT reflect('java.lang.System', 'getenv', 'HOME'))",
        "reflect",
    ),
    "reflection-behind-a-cte": (
        "WITH q AS (SELECT java_method('java.lang.System', 'exit', 0)) SELECT * FROM q",
        "java_method",
    ),
    "temporary-view-hiding-a-script": (
        "CREATE TEMPORARY VIEW hidden AS SELECT TRANSFORM('a') USING 'id' AS (o STRING)",
        "TRANSFORM",
    ),
    "temporary-function": (
        "CREATE TEMPORARY FUNCTION f AS 'org.apache.hadoop.hive.ql.udf.UDFReflect'",
        "CREATE FUNCTION",
    ),
    "temporary-view-over-a-file": (
        "CREATE TEMPORARY VIEW etc USING text OPTIONS (path '/etc/hostname')",
        "CREATE TEMP VIEW USING",
    ),
    "file-names-of-a-table": ("SELECT input_file_name() FROM {table}", "input_file_name"),
    "xml-entities": ("SELECT xpath('<a><b>1</b></a>', 'a/b')", "xpath"),
    "execute-immediate": (
        "EXECUTE IMMEDIATE 'SELECT reflect(\\'java.lang.System\\', \\'getenv\\', \\'PATH\\')'",
        "reflect",
    ),
}


@pytest.mark.parametrize(("statement", "construct"), list(_ESCAPES.values()), ids=list(_ESCAPES))
def test_a_statement_that_would_reach_the_server_itself_is_refused_naming_the_construct(
    landing: Landing,
    analyst_server: AnalystServer,
    team_key: Callable[[str], str],
    statement: str,
    construct: str,
) -> None:
    with pytest.raises(REFUSED, match="read-only") as refused:
        _thrift_rows(
            analyst_server.port, statement.format(table=landing.table), key=team_key("marketing")
        )

    message = str(refused.value)
    assert construct in message
    # Nothing of the server's process came back.
    assert "uid=" not in message
    assert "PATH=" not in message
    assert "/root" not in message


# What analysts run every day: each must still run through the guard.
_QUERIES = [
    "SELECT device, count(*), avg(duration_ms), max(url) FROM {table} GROUP BY device",
    "SELECT a.view_id FROM {table} a JOIN {table} b ON a.view_id = b.view_id "
    "WHERE a.duration_ms >= 0",
    "SELECT view_id, row_number() OVER (PARTITION BY device ORDER BY duration_ms DESC) "
    "FROM {table}",
    "WITH v AS (SELECT * FROM {table} WHERE duration_ms >= 0) "
    "SELECT count(DISTINCT user_id) FROM v",
    "SELECT upper(url), coalesce(device, 'none'), date_trunc('HOUR', _hub_timestamp), "
    "CASE WHEN duration_ms BETWEEN 0 AND 100 THEN 'short' ELSE 'long' END FROM {table} LIMIT 5",
    "SELECT device, count(*) FROM {table} GROUP BY ROLLUP(device) ORDER BY 2 DESC LIMIT 3",
    "SELECT * FROM {table} WHERE view_id IN (SELECT view_id FROM {table} LIMIT 3)",
    "DESCRIBE EXTENDED {table}",
    "DESCRIBE HISTORY {table}",
    "SHOW TABLES IN bronze",
    "SHOW DATABASES",
]


@pytest.mark.parametrize("query", _QUERIES)
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

    rows = _thrift_rows(
        analyst_server.port, query.format(table=landing.table), key=team_key("marketing")
    )

    assert rows


_SESSION_SETTINGS = {
    "variable-substitution": ("set:hiveconf:spark.sql.variable.substitute", "true"),
    "login-provider": (
        "set:system:hive.server2.custom.authentication.class",
        "org.apache.hive.service.auth.AnonymousAuthenticationProviderImpl",
    ),
    "key-check-url": ("set:system:hub.analyst.api.url", "http://127.0.0.1:9/"),
    "a-spark-setting": ("spark.sql.runSQLOnFiles", "true"),
    "a-variable": ("set:hivevar:home", "${env:HOME}"),
    "a-schema-that-is-not-a-name": ("use:database", "bronze; DROP TABLE x"),
}


@pytest.mark.parametrize(
    ("name", "value"), list(_SESSION_SETTINGS.values()), ids=list(_SESSION_SETTINGS)
)
def test_a_session_cannot_change_the_servers_settings_when_it_opens(
    landing: Landing, analyst_server: AnalystServer, name: str, value: str
) -> None:
    with pytest.raises(
        HiveServer2Error, match=r"refuses the (value of the )?session setting"
    ) as refused:
        _thrift_rows(analyst_server.port, "SELECT 1", key=landing.key, settings={name: value})
    assert name in str(refused.value)

    # The login check is as it was: a password that is not a key is still refused.
    with pytest.raises(TTransportException, match="Error validating the login"):
        _thrift_rows(analyst_server.port, "SELECT 1", key="not-a-key")
    assert _thrift_rows(analyst_server.port, "SELECT '${env:HOME}'", key=landing.key) == [
        ("${env:HOME}",)
    ]


def test_a_session_may_start_in_a_schema_of_its_choice(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    rows = _thrift_rows(
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
        _thrift_rows(
            analyst_server.port, "SELECT count(*) FROM range(1000000000000)", key=landing.key
        )

    assert f"{STATEMENT_TIMEOUT_S}s" in str(refused.value)
    # The server is free again: the cancelled statement's tasks stopped.
    assert _thrift_rows(analyst_server.port, "SELECT 1", key=landing.key) == [(1,)]


def test_a_result_larger_than_the_limit_fails_instead_of_filling_the_server(
    landing: Landing, analyst_server: AnalystServer
) -> None:
    with pytest.raises(OperationalError, match=r"spark\.driver\.maxResultSize"):
        _thrift_rows(
            analyst_server.port,
            # About 19 MB of hashes, which compress to well over the server's 4 MB.
            "SELECT id, sha2(cast(id AS STRING), 512), sha2(cast(id + 1 AS STRING), 512), "
            "sha2(cast(id + 2 AS STRING), 512) FROM range(50000)",
            key=landing.key,
        )

    assert _thrift_rows(analyst_server.port, "SELECT 1", key=landing.key) == [(1,)]
