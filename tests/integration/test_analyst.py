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
from impala.error import OperationalError
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
            env={**_analyst_env(landing.settings), "HUB_ANALYST_API_URL": landing.api_url},
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


def _thrift_rows(port: int, statement: str, *, key: str) -> list[tuple[Any, ...]]:
    """Run `statement` as a client would, logging in with the API key `key` as the password."""
    connection = connect(
        host="127.0.0.1", port=port, auth_mechanism="PLAIN", user=TEAM, password=key
    )
    try:
        cursor = connection.cursor()
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

    with pytest.raises(OperationalError, match="read-only") as refused:
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
    with pytest.raises(OperationalError, match=r"TABLE_OR_VIEW_NOT_FOUND|UNSUPPORTED_DATASOURCE"):
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
