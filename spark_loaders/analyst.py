"""The Spark Thrift Server: the hub's tables over HiveServer2 (JDBC, ODBC, Python clients).

It runs inside a Spark session built like the loader's (`build_session`), so it sees the same
metastore, reads Delta tables with the same Delta version, and answers each statement with the
newest committed version of each table while the loader keeps writing.
"""

import logging
import socket
import time

from pyspark.sql import SparkSession

from spark_loaders.analyst_settings import AnalystSettings
from spark_loaders.errors import LoaderError
from spark_loaders.session import SAFE_CONF

log = logging.getLogger(__name__)

_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def thrift_conf(settings: AnalystSettings) -> dict[str, str]:
    """Spark settings for the Thrift server, given to `build_session`."""
    return {
        "spark.hadoop.hive.server2.thrift.bind.host": settings.host,
        "spark.hadoop.hive.server2.thrift.port": str(settings.port),
        "spark.hadoop.hive.server2.transport.mode": "binary",
        # Each JDBC connection gets its own session (current database, temporary views).
        "spark.sql.hive.thriftServer.singleSession": "false",
        # Statements are never rewritten before parsing: `${env:...}` stays text. Sessions of
        # new connections take their defaults from the SparkConf these settings go into.
        "spark.hadoop.hive.variable.substitute": "false",
        **SAFE_CONF,
    }


class ThriftServer:
    """HiveServer2 on a running session; start it once, stop it before the session."""

    def __init__(self, spark: SparkSession, settings: AnalystSettings) -> None:
        self._spark = spark
        self._settings = settings
        self._server: object | None = None

    def start(self) -> None:
        """Start serving and wait until the port accepts connections."""
        if self._settings.host not in _LOOPBACK:
            log.warning(
                "the Thrift server binds to %s without authentication: anyone who reaches "
                "that address can read every table",
                self._settings.host,
            )
        if _accepts(self._settings.host, self._settings.port):
            raise LoaderError(
                f"Port {self._settings.port} on {self._settings.host} is already in use; set "
                "HUB_ANALYST_PORT (or --port) to a free port."
            )
        jvm = self._spark.sparkContext._jvm
        assert jvm is not None, "the session has no JVM"
        server_object = jvm
        for part in _SERVER_CLASS.split("."):
            server_object = getattr(server_object, part)
        log.info("starting the Thrift server on %s:%d", self._settings.host, self._settings.port)
        self._server = server_object.startWithContext(self._spark._jsparkSession.sqlContext())
        deadline = time.monotonic() + self._settings.start_timeout_seconds
        while not _accepts(self._settings.host, self._settings.port):
            if time.monotonic() > deadline:
                raise LoaderError(
                    f"The Thrift server did not accept connections on {self._settings.host}:"
                    f"{self._settings.port} within {self._settings.start_timeout_seconds:.0f}s; "
                    "see the Spark log above."
                )
            time.sleep(0.2)
        log.info(
            "the Thrift server is ready; connect with `beeline -u %s` or any HiveServer2 client",
            self._settings.jdbc_url,
        )

    def stop(self) -> None:
        """Stop accepting connections and close the open sessions."""
        if self._server is not None:
            log.info("stopping the Thrift server")
            self._server.stop()  # type: ignore[attr-defined]
            self._server = None


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
