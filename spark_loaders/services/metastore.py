"""The Hive metastore that the loader, `hub sql` and the Thrift server share.

Three ways to reach one, in order of precedence:

- an external Hive metastore service (`HUB_LOADER_METASTORE_URIS`, `thrift://...`), as in
  production;
- a metastore database of our choosing (`HUB_LOADER_METASTORE_URL`, a JDBC URL): PostgreSQL in
  production, its schema made by Hive on first use (`metastore_database`, docs/adr/0025);
- by default, the local Derby network server managed here (`hub metastore start|stop|status`),
  run from the jars `make jars` fetched, on 127.0.0.1:`HUB_LOADER_METASTORE_PORT`.

Embedded Derby would admit one Spark process at a time; the network server lets the loader and
the analysts' processes use one metastore at once (see docs/adr/0010).
"""

import contextlib
import fcntl
import logging
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum, unique
from pathlib import Path

from hub_core.environment import child_environment
from hub_core.processes import BackgroundProcess, java_command, port_open
from spark_loaders.errors import MetastoreError
from spark_loaders.runtime.jars import required_jar
from spark_loaders.services import metastore_database
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)

DERBY_CLIENT_DRIVER = "org.apache.derby.jdbc.ClientDriver"
POSTGRESQL_DRIVER = "org.postgresql.Driver"
# Longest prefix first: `jdbc:derby://` is the network client, `jdbc:derby:` embedded Derby.
_DRIVERS = (
    ("jdbc:derby://", DERBY_CLIENT_DRIVER),
    ("jdbc:derby:", "org.apache.derby.jdbc.EmbeddedDriver"),
    ("jdbc:postgresql:", POSTGRESQL_DRIVER),
    ("jdbc:mysql:", "com.mysql.cj.jdbc.Driver"),
    ("jdbc:mariadb:", "org.mariadb.jdbc.Driver"),
)
_SERVER_CLASS = "org.apache.derby.drda.NetworkServerControl"
_JARS_DIR = "HUB_LOADER_METASTORE_JARS_DIR"
_SERVER_HEAP = "256m"  # the metastore's tables hold table definitions only: a few MB
_SECRET_PARAMETER = re.compile(r"(?i)(password=)[^;&]*")


@unique
class MetastoreKind(StrEnum):
    LOCAL_SERVER = "local Derby server"
    DATABASE = "metastore database"
    SERVICE = "Hive metastore service"


def metastore_kind(settings: LoaderSettings) -> MetastoreKind:
    """Which of the three metastore setups the settings select."""
    if settings.metastore_uris:
        return MetastoreKind.SERVICE
    if settings.metastore_url:
        return MetastoreKind.DATABASE
    return MetastoreKind.LOCAL_SERVER


def local_server_url(settings: LoaderSettings) -> str:
    """JDBC URL of the local Derby server's metastore database."""
    return f"jdbc:derby://127.0.0.1:{settings.metastore_port}/metastore_db;create=true"


def describe(settings: LoaderSettings) -> str:
    """Where the metastore is, for logs and messages (passwords in URLs masked)."""
    kind = metastore_kind(settings)
    if kind is MetastoreKind.SERVICE:
        return f"{kind} {settings.metastore_uris}"
    if kind is MetastoreKind.DATABASE:
        masked = _SECRET_PARAMETER.sub(r"\1***", settings.metastore_url or "")
        return f"{kind} {masked}"
    return f"{kind} 127.0.0.1:{settings.metastore_port} (data in {settings.metastore_dir})"


def spark_conf(settings: LoaderSettings) -> dict[str, str]:
    """Spark settings that connect a session's Hive catalog to the configured metastore."""
    if settings.metastore_uris:
        return {"spark.hadoop.hive.metastore.uris": settings.metastore_uris}
    url = settings.metastore_url or local_server_url(settings)
    driver = settings.metastore_driver or _infer_driver(url)
    conf = {
        "spark.hadoop.javax.jdo.option.ConnectionURL": url,
        "spark.hadoop.javax.jdo.option.ConnectionDriverName": driver,
    }
    if settings.metastore_user:
        conf["spark.hadoop.javax.jdo.option.ConnectionUserName"] = settings.metastore_user
    if settings.metastore_password:
        conf["spark.hadoop.javax.jdo.option.ConnectionPassword"] = (
            settings.metastore_password.get_secret_value()
        )
    if driver == DERBY_CLIENT_DRIVER:
        # pyspark ships Derby's driver front (derbytools) on the JVM's class path; the network
        # client behind it must sit on the same class path, not in the spark.jars loader.
        conf["spark.driver.extraClassPath"] = str(_jar(settings, "derbyclient", "Derby client"))
    if driver == POSTGRESQL_DRIVER:
        # Hive's client (spark.sql.hive.metastore.jars=builtin) loads the driver through
        # DataNucleus from the JVM's class path; spark.jars are not seen there.
        conf["spark.driver.extraClassPath"] = str(_jar(settings, "postgresql", "PostgreSQL JDBC"))
        conf.update(metastore_database.spark_conf())
    return conf


def _infer_driver(url: str) -> str:
    for prefix, driver in _DRIVERS:
        if url.startswith(prefix):
            return driver
    known = ", ".join(prefix for prefix, _ in _DRIVERS)
    raise MetastoreError(
        f"Cannot tell the JDBC driver of HUB_LOADER_METASTORE_URL {url.split(':', 2)[:2]}; "
        f"known URL prefixes: {known}. Set HUB_LOADER_METASTORE_DRIVER to the driver class."
    )


def _jar(settings: LoaderSettings, artifact: str, what: str) -> Path:
    return required_jar(
        settings.metastore_jars_dir,
        f"{artifact}-*.jar",
        what=f"{what} jar",
        setting=_JARS_DIR,
        error=MetastoreError,
    )


@dataclass(frozen=True, slots=True)
class MetastoreStatus:
    running: bool
    pid: int | None
    address: str
    ready: bool


class MetastoreServer:
    """Start, stop and inspect the local Derby network server holding the metastore database.

    Its database, log and pid file live in `HUB_LOADER_METASTORE_DIR`; the database directory
    (`metastore_db`) is the one embedded Derby used there, so an existing metastore carries over.
    """

    def __init__(self, settings: LoaderSettings) -> None:
        self._settings = settings
        self.home = settings.metastore_dir
        self.port = settings.metastore_port
        self.address = f"127.0.0.1:{settings.metastore_port}"
        self._process = BackgroundProcess("metastore server", self.home / "server.pid")

    @property
    def log_file(self) -> Path:
        return self.home / "server.log"

    def start(self, *, timeout_s: float = 60.0) -> MetastoreStatus:
        """Start the server unless it runs, and wait until it accepts connections."""
        self.home.mkdir(parents=True, exist_ok=True)
        # Two processes starting at once (`hub up` and a `hub sql`) would race for the port.
        with self._start_lock():
            current = self.status()
            if current.running:
                self._wait_ready(timeout_s)
                return self.status()
            if port_open(self.port):
                raise MetastoreError(
                    f"Port {self.port} is taken by another process, not by the metastore server "
                    f"of {self.home}. Set HUB_LOADER_METASTORE_PORT to a free port."
                )
            log.info("starting the metastore server on %s (log: %s)", self.address, self.log_file)
            process = self._process.start(
                [*self._java(), "start", "-h", "127.0.0.1", "-p", str(self.port)],
                output=self.log_file,
                cwd=self.home,
            )
            try:
                self._wait_ready(timeout_s, process=process)
            except MetastoreError:
                self.stop()
                raise
        log.info("metastore server ready (pid %s)", process.pid)
        return self.status()

    def stop(self, *, timeout_s: float = 30.0) -> bool:
        """Shut the server down cleanly (Derby's shutdown command, then signals). True if it ran."""
        pid = self._process.pid()
        if pid is None:
            return False
        log.info("shutting down the metastore server (pid %s)", pid)
        # The shutdown command closes the database cleanly; a signal leaves Derby to recover
        # from its log at the next start, which is safe but slower.
        with contextlib.suppress(subprocess.TimeoutExpired, OSError):
            subprocess.run(
                [*self._java(), "shutdown", "-h", "127.0.0.1", "-p", str(self.port)],
                capture_output=True,
                timeout=timeout_s,
                check=False,
                env=child_environment(),
            )
        self._process.stop(timeout_s=timeout_s)  # signals, if the command did not stop it
        return True

    def status(self) -> MetastoreStatus:
        """Whether the server process runs and accepts connections."""
        pid = self._process.pid()
        return MetastoreStatus(
            running=pid is not None,
            pid=pid,
            address=self.address,
            ready=pid is not None and port_open(self.port),
        )

    def _java(self) -> list[str]:
        jars_dir = self._settings.metastore_jars_dir
        _jar(self._settings, "derbynet", "Derby server")
        options = [
            f"-Dderby.system.home={self.home}",
            f"-Dderby.stream.error.file={self.home / 'derby.log'}",
        ]
        return [
            *java_command(heap=_SERVER_HEAP, classpath=f"{jars_dir}/*", options=options),
            _SERVER_CLASS,
        ]

    def _wait_ready(
        self, timeout_s: float, *, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        self._process.wait_ready(
            lambda: port_open(self.port),
            address=self.address,
            logs=str(self.log_file),
            error=MetastoreError,
            timeout_s=timeout_s,
            interval_s=0.2,
            process=process,
        )

    @contextlib.contextmanager
    def _start_lock(self) -> Iterator[None]:
        with (self.home / "server.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_metastore(settings: LoaderSettings) -> None:
    """Start the local metastore server when the settings select it and it does not run.

    A server started here keeps running after the process that needed it ends, so that the
    loader and analysts' sessions come and go around it; `hub metastore stop` stops it.
    """
    if metastore_kind(settings) is not MetastoreKind.LOCAL_SERVER:
        return
    if port_open(settings.metastore_port):
        return  # ours, or a Derby server run by other means on the configured port
    status = MetastoreServer(settings).start()
    log.info(
        "the metastore server (pid %s) keeps running; `hub metastore stop` stops it", status.pid
    )
