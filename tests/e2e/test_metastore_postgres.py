"""The loader, `hub sql` and the Thrift server share one Hive metastore on PostgreSQL.

Production's setup (docs/production.md): each of the three runs as its own process, as a user
runs them, on a fresh PostgreSQL database that none of them was told to prepare. The loader
and `hub sql` start at the same moment, so both find the database empty. The Thrift server
logs in as the chart has it log in, as a user that may only read (docs/deployment.md).
"""

import os
import random
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from impala.dbapi import connect
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import ProgrammingError

from hub_cli import demo
from hub_core.naming import TopicName, bronze_table
from tests.conftest import JARS
from tests.support.cli import hub
from tests.support.hub_client import create_feed, publish, unique_topic
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

TEAM = "warehouse"
# The trust-authenticated test server accepts any password; the processes get this one all
# the same, so the test can look for it where it must never be.
PASSWORD = "metastore-secret-3f9a1c"


def _jdbc_url(sqlalchemy_url: str) -> tuple[str, str]:
    """The JDBC URL and user of a `postgresql+psycopg://user@host:port/db` database."""
    url = make_url(sqlalchemy_url)
    return f"jdbc:postgresql://{url.host}:{url.port}/{url.database}", str(url.username)


def _environment(
    home: Path, database: str, *, bootstrap: str, api_url: str, topic: str
) -> dict[str, str]:
    """What every process gets: the PostgreSQL metastore, one warehouse, small Spark."""
    jdbc_url, user = _jdbc_url(database)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update(
        {
            "HUB_HOME": str(home),
            "HUB_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "HUB_LOADER_MASTER": "local[1]",
            "HUB_LOADER_DRIVER_MEMORY": "512m",
            "HUB_LOADER_SHUFFLE_PARTITIONS": "1",
            "HUB_LOADER_WAREHOUSE_DIR": str(home / "warehouse"),
            "HUB_LOADER_CHECKPOINT_DIR": str(home / "checkpoints"),
            "HUB_LOADER_JARS_DIR": str(JARS / "spark"),
            "HUB_LOADER_METASTORE_JARS_DIR": str(JARS / "metastore"),
            "HUB_LOADER_METASTORE_URL": jdbc_url,
            "HUB_LOADER_METASTORE_USER": user,
            "HUB_LOADER_METASTORE_PASSWORD": PASSWORD,
            "HUB_LOADER_REGISTRY_URL": api_url,
            "HUB_LOADER_TOPIC_PATTERN": topic.replace(".", "\\."),
            "HUB_ANALYST_API_URL": api_url,
        }
    )
    return env


def _start_hub(args: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "hub_cli.main", *args],
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # a kill takes the Spark JVM along
        )


def _finish(process: subprocess.Popen[bytes], log: Path) -> str:
    """Wait for a `hub` command and return its output; it must succeed."""
    try:
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text(errors="replace")
    assert process.returncode == 0, output[-4000:]
    return output


@contextmanager
def _thrift_server(env: Mapping[str, str], log: Path) -> Iterator[int]:
    """`hub analyst serve` on a free port until the block ends."""
    port = free_port()
    server = _start_hub(["analyst", "serve", "--port", str(port)], env, log)
    try:
        wait_until(
            lambda: server.poll() is not None or "Thrift server is ready" in log.read_text(),
            timeout_s=300,
            what=f"`hub analyst serve` to accept connections (log: {log})",
        )
        assert server.poll() is None, log.read_text()[-4000:]
        yield port
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _thrift_rows(port: int, statement: str, *, key: str) -> list[tuple[Any, ...]]:
    connection = connect(
        host="127.0.0.1", port=port, auth_mechanism="PLAIN", user=TEAM, password=key
    )
    try:
        cursor = connection.cursor()
        cursor.execute(statement)
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        cursor.close()
        return rows
    finally:
        connection.close()


def _select_only_user(database: str) -> str:
    """A new user of `database` granted SELECT on the metastore's tables and nothing else."""
    user = f"reader_{uuid.uuid4().hex[:8]}"
    engine = create_engine(database, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f"CREATE ROLE {user} LOGIN"))
            conn.execute(text(f"GRANT USAGE ON SCHEMA public TO {user}"))
            conn.execute(text(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {user}"))
            # Before PostgreSQL 15 every user may create tables in `public`.
            conn.execute(text("REVOKE CREATE ON SCHEMA public FROM PUBLIC"))
    finally:
        engine.dispose()
    return user


def _as_user(database: str, user: str) -> str:
    return make_url(database).set(username=user).render_as_string(hide_password=False)


def _metastore_rows(database: str, statement: str) -> list[tuple[Any, ...]]:
    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(text(statement))]
    finally:
        engine.dispose()


def test_loader_sql_and_a_read_only_thrift_server_share_a_postgresql_metastore(
    api_url: str,
    kafka_bootstrap: str,
    team_key: Callable[[str], str],
    postgres_database: str,
    tmp_path: Path,
) -> None:
    key = team_key(TEAM)
    topic = unique_topic(TEAM)
    table = bronze_table(TopicName(topic))
    create_feed(api_url, key, topic=topic, schema=demo.schema_text("demo.page_views"), owner=TEAM)
    views = [demo.page_view(random.Random(n)) for n in range(3)]
    response = publish(api_url, key, topic, [{"key": v["view_id"], "value": v} for v in views])
    assert response.status_code == 200, response.text
    env = _environment(
        tmp_path / "home",
        postgres_database,
        bootstrap=kafka_bootstrap,
        api_url=api_url,
        topic=topic,
    )

    # Both processes find the database empty; one makes Hive's schema, the other waits for it.
    loader = _start_hub(["load", "run", "--once"], env, tmp_path / "loader.log")
    first_sql = _start_hub(["sql", "SHOW DATABASES"], env, tmp_path / "sql-1.log")
    logs = [_finish(loader, tmp_path / "loader.log"), _finish(first_sql, tmp_path / "sql-1.log")]

    landed = hub("sql", f"SELECT view_id FROM {table}", env=env)
    assert landed.returncode == 0, landed.stderr[-4000:]
    logs.append(landed.stdout + landed.stderr)
    for view in views:
        assert view["view_id"] in landed.stdout

    reader = _select_only_user(postgres_database)
    with _thrift_server(
        {**env, "HUB_LOADER_METASTORE_USER": reader}, tmp_path / "serve.log"
    ) as port:
        tables = {row[1] for row in _thrift_rows(port, "SHOW TABLES IN bronze", key=key)}
        counted = _thrift_rows(port, f"SELECT count(*) FROM {table}", key=key)
    logs.append((tmp_path / "serve.log").read_text(errors="replace"))

    assert table.split(".", 1)[1] in tables
    assert counted == [(3,)]
    # The Thrift server's user could read the definitions, and could change none of them.
    with pytest.raises(ProgrammingError, match="permission denied"):
        _metastore_rows(_as_user(postgres_database, reader), 'DELETE FROM "TBLS"')
    # One schema, made once: Hive's version recorded once, its databases in the one schema.
    assert _metastore_rows(postgres_database, 'SELECT "SCHEMA_VERSION" FROM "VERSION"') == [
        ("2.3.0",)
    ]
    databases = {row[0] for row in _metastore_rows(postgres_database, 'SELECT "NAME" FROM "DBS"')}
    assert {"default", "bronze"} <= databases
    assert sum("creating Hive's schema" in log for log in logs) == 1
    for log in logs:
        assert PASSWORD not in log


def test_an_unreachable_metastore_database_stops_a_process_with_a_coded_error(
    postgres_database: str, tmp_path: Path
) -> None:
    env = _environment(
        tmp_path,
        postgres_database,
        bootstrap="127.0.0.1:1",
        api_url="http://127.0.0.1:1",
        topic="a.b",
    )
    closed_port = free_port()
    jdbc_url, _ = _jdbc_url(postgres_database)
    unreachable = {
        **env,
        "HUB_LOADER_METASTORE_URL": jdbc_url.replace(
            f":{make_url(postgres_database).port}/", f":{closed_port}/"
        ),
    }
    unknown_user = {**env, "HUB_LOADER_METASTORE_USER": "no_such_role"}

    refused = hub("sql", "SHOW DATABASES", env=unreachable)
    rejected = hub("sql", "SHOW DATABASES", env=unknown_user)

    for result in (refused, rejected):
        output = result.stdout + result.stderr
        assert result.returncode != 0
        assert "Cannot connect to the metastore database" in output
        assert "HUB_LOADER_METASTORE_URL" in output
        assert "(error 50340)" in output
        assert "starting Spark" not in output  # stopped before any JVM started
        assert PASSWORD not in output
    assert "Connection refused" in refused.stdout + refused.stderr
    assert 'role "no_such_role" does not exist' in rejected.stdout + rejected.stderr
