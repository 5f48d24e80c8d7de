"""The Spark Thrift Server: the hub's tables over HiveServer2 (JDBC, ODBC, Python clients).

It runs inside a Spark session built like the loader's (`build_session`), so it sees the same
metastore, reads Delta tables with the same Delta version, and answers each statement with the
newest committed version of each table while the loader keeps writing.

Logins are checked by HiveServer2's CUSTOM authentication with the hub's own provider,
`org.integrationhub.thrift.HubKeyAuthenticator` (jvm/thrift-auth): the password of a login must
be a hub API key, which the provider checks with the hub API. The provider is configured once,
before the server starts, from these settings; nothing a session sends can change it.

The server is started by `org.integrationhub.thrift.AnalystThriftServer` (same jar), whose front
door refuses session settings outside a short allow-list (the schema, a fetch size) and runs a
statement only when `StatementAllowlist` allows every plan node and function in it (queries over
the catalog's tables, SHOW, DESCRIBE, EXPLAIN, USE, SET to read a setting, temporary views). The
Spark SQL extension `org.integrationhub.thrift.ReadOnlySql` refuses writes and escapes in every
plan of the session as a second line. Each statement is bounded in time and in result size.
Tables change only through the loader (and an admin's `hub sql`). See docs/security.md and
docs/adr/0061-the-analysts-door-hardened-not-kyuubi.md.
"""

import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from spark_loaders.errors import AnalystAuthRequired, LoaderError
from spark_loaders.runtime.jars import required_jar
from spark_loaders.services import metastore
from spark_loaders.services.analyst_settings import AnalystAuth, AnalystSettings
from spark_loaders.services.session import DELTA_EXTENSION, SAFE_CONF
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)

_SERVER_CLASS = "org.integrationhub.thrift.AnalystThriftServer"
AUTHENTICATOR_CLASS = "org.integrationhub.thrift.HubKeyAuthenticator"
READ_ONLY_EXTENSION = "org.integrationhub.thrift.ReadOnlySql"
_CUSTOM_CLASS_PROPERTY = "hive.server2.custom.authentication.class"


def require_safe_exposure(settings: AnalystSettings) -> None:
    """Refuse to serve every table without authentication beyond this machine."""
    if settings.auth is AnalystAuth.NONE and not settings.on_loopback:
        raise AnalystAuthRequired(
            f"The Thrift server would bind to {settings.host} with HUB_ANALYST_AUTH=none: "
            "anyone who reaches that address could read every table. Set "
            "HUB_ANALYST_AUTH=hub-keys (the default; logins then need a hub API key as the "
            "password, checked by the API at HUB_ANALYST_API_URL), or bind to 127.0.0.1."
        )


def authenticator_jar(loader: LoaderSettings) -> Path:
    """The jar of `HubKeyAuthenticator` and `ReadOnlySql`, built by `make jars`."""
    return required_jar(
        loader.jars_dir,
        "hub-thrift-auth-*.jar",
        what="Thrift server authenticator and read-only guard",
        setting="HUB_LOADER_JARS_DIR",
    )


def thrift_conf(settings: AnalystSettings, loader: LoaderSettings) -> dict[str, str]:
    """Spark settings for the Thrift server, given to `build_session` with `loader`'s."""
    custom = settings.auth is AnalystAuth.HUB_KEYS
    return {
        "spark.hadoop.hive.server2.authentication": "CUSTOM" if custom else "NONE",
        **_guard_conf(loader),
        **(_authenticator_conf() if custom else {}),
        # Read-only, whatever the login: the tables change only through the loader.
        "spark.sql.extensions": f"{DELTA_EXTENSION},{READ_ONLY_EXTENSION}",
        "spark.hadoop.hive.server2.thrift.bind.host": settings.host,
        "spark.hadoop.hive.server2.thrift.port": str(settings.port),
        "spark.hadoop.hive.server2.transport.mode": "binary",
        # Each JDBC connection gets its own session (current database, temporary views).
        "spark.sql.hive.thriftServer.singleSession": "false",
        # Statements are never rewritten before parsing: `${env:...}` stays text. Sessions of
        # new connections take their defaults from the SparkConf these settings go into.
        "spark.hadoop.hive.variable.substitute": "false",
        # No `SELECT ... FROM text.`/path``: analysts read tables, not the server's files.
        "spark.sql.runSQLOnFiles": "false",
        **statement_bounds_conf(settings),
        **staleness_conf(settings),
        **SAFE_CONF,
    }


def statement_bounds_conf(settings: AnalystSettings) -> dict[str, str]:
    """Bound each statement: its run time, and the size of the result the driver collects.

    A statement past `statement_timeout_seconds` is cancelled (its Spark jobs interrupted) and
    the client told it timed out; a result larger than `max_result_mb` fails the statement with
    Spark's `spark.driver.maxResultSize` error instead of filling the server's memory. A session
    cannot raise either: it may not change settings (docs/security.md).
    """
    return {
        "spark.sql.thriftServer.queryTimeout": f"{settings.statement_timeout_seconds}s",
        "spark.sql.thriftServer.interruptOnCancel": "true",
        "spark.driver.maxResultSize": f"{settings.max_result_mb}m",
    }


def staleness_conf(settings: AnalystSettings) -> dict[str, str]:
    """Let queries read a table state up to `snapshot_staleness_seconds` old.

    Before each query Delta lists the table's log for new commits; a loader on a 1 s trigger
    leaves tens of thousands of commits there within the retention, and on a file system the
    listing reads every one of them. With a limit, a query reads the state Delta last loaded
    and a background refresh lists the log instead, unless that state is older than the limit.
    """
    seconds = settings.snapshot_staleness_seconds
    return {"spark.databricks.delta.stalenessLimit": f"{seconds * 1000:.0f}ms"} if seconds else {}


def _guard_conf(loader: LoaderSettings) -> dict[str, str]:
    """Put the authenticator and the read-only extension on the driver JVM's own class path.

    HiveServer2 loads the provider through the context class loader of the worker thread that
    takes the login. Those threads are reused for statements, which leave other loaders there,
    so a class only in `spark.jars` is found by some logins and not others; the JVM's class path
    is seen by all of them (as pyspark's own jars are). Spark reads this setting when the
    session's JVM starts, so it joins the metastore's class path rather than replacing it.
    """
    class_path = [
        metastore.spark_conf(loader).get("spark.driver.extraClassPath", ""),
        str(authenticator_jar(loader)),
    ]
    return {"spark.driver.extraClassPath": os.pathsep.join(p for p in class_path if p)}


def _authenticator_conf() -> dict[str, str]:
    """The provider's class in the session's settings, where an operator looks for it."""
    return {
        # Documents the provider in the session's settings; HiveServer2 itself reads the class
        # from the JVM's system properties (see `authenticator_properties`).
        f"spark.hadoop.{_CUSTOM_CLASS_PROPERTY}": AUTHENTICATOR_CLASS,
    }


def authenticator_properties(settings: AnalystSettings) -> dict[str, str]:
    """JVM system properties HiveServer2 reads at each login: the provider's class only.

    HiveServer2's `CustomAuthenticationProviderImpl` builds a fresh `HiveConf` for every login,
    which reads system properties but not the session's `spark.hadoop.*` settings. The provider's
    own settings are not system properties: `configure_authenticator` gives them to it once.
    No session can write a system property: the server refuses `set:system:` settings.
    """
    if settings.auth is not AnalystAuth.HUB_KEYS:
        return {}
    return {_CUSTOM_CLASS_PROPERTY: AUTHENTICATOR_CLASS}


def configure_authenticator(jvm: Any, settings: AnalystSettings) -> None:
    """Give `HubKeyAuthenticator` its settings, once per JVM, before the server starts."""
    if settings.auth is not AnalystAuth.HUB_KEYS:
        return
    jvm.org.integrationhub.thrift.HubKeyAuthenticator.configure(
        settings.api_url,
        round(settings.auth_timeout_seconds * 1000),
        settings.auth_cache_seconds,
    )


class ThriftServer:
    """HiveServer2 on a running session; start it once, stop it before the session."""

    def __init__(self, spark: SparkSession, settings: AnalystSettings) -> None:
        self._spark = spark
        self._settings = settings
        self._server: object | None = None

    def start(self) -> None:
        """Start serving and wait until the port accepts connections."""
        require_safe_exposure(self._settings)
        if _accepts(self._settings.host, self._settings.port):
            raise LoaderError(
                f"Port {self._settings.port} on {self._settings.host} is already in use; set "
                "HUB_ANALYST_PORT (or --port) to a free port."
            )
        jvm = self._spark.sparkContext._jvm
        assert jvm is not None, "the session has no JVM"
        for name, value in authenticator_properties(self._settings).items():
            jvm.java.lang.System.setProperty(name, value)
        configure_authenticator(jvm, self._settings)
        # Spark logs at WARN; the server's log should still say who logged in.
        log4j = jvm.org.apache.logging.log4j
        log4j.core.config.Configurator.setLevel("org.integrationhub", log4j.Level.INFO)
        server_object = jvm
        for part in _SERVER_CLASS.split("."):
            server_object = getattr(server_object, part)
        log.info(
            "starting the Thrift server on %s:%d, %s",
            self._settings.host,
            self._settings.port,
            _describe_auth(self._settings),
        )
        self._server = server_object.start(self._spark._jsparkSession)
        deadline = time.monotonic() + self._settings.start_timeout_seconds
        while not _accepts(self._settings.host, self._settings.port):
            if time.monotonic() > deadline:
                raise LoaderError(
                    f"The Thrift server did not accept connections on {self._settings.host}:"
                    f"{self._settings.port} within {self._settings.start_timeout_seconds:.0f}s; "
                    "see the Spark log above."
                )
            time.sleep(0.2)
        login = (
            " -n <your team> -p <a hub API key>"
            if self._settings.auth is AnalystAuth.HUB_KEYS
            else ""
        )
        log.info(
            "the Thrift server is ready; connect with `beeline -u %s%s` or any HiveServer2 client",
            self._settings.jdbc_url,
            login,
        )

    def stop(self) -> None:
        """Stop accepting connections and close the open sessions."""
        if self._server is not None:
            log.info("stopping the Thrift server")
            self._server.stop()  # type: ignore[attr-defined]
            self._server = None


def _describe_auth(settings: AnalystSettings) -> str:
    if settings.auth is AnalystAuth.HUB_KEYS:
        return f"logins need a hub API key as the password, checked by {settings.api_url}"
    return "without authentication (loopback only)"


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
