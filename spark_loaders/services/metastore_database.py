"""A Hive metastore database on PostgreSQL: checked before Spark starts, its schema made once.

Spark's built-in Hive client (2.3) creates the metastore's tables itself only on Derby. On
PostgreSQL the hub turns the same mechanism on (DataNucleus' `datanucleus.schema.autoCreateAll`,
see `spark_conf` below), because Hive's own schema scripts ship only in Hive's binary
distribution, not in any jar `make jars` fetches (docs/adr/0025).

Two processes starting at once on a fresh database would both create the tables, the default
database and the admin roles, and one of them fails half-way. So the first creation is
serialised: every process connects from Python before its Spark session starts and takes a
PostgreSQL advisory lock; the one that finds no schema keeps the lock until its session has
made the schema (`create_schema`), the others wait and then find it made. The same connection
turns a wrong password or an unreachable database into a coded error before any JVM starts.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qsl, unquote, urlsplit

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import make_conninfo
from pyspark.sql import SparkSession

from spark_loaders.errors import MetastoreDatabaseUnreachable, MetastoreError
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)

POSTGRESQL_PREFIX = "jdbc:postgresql:"

# The advisory lock key of the metastore schema's creation: "hub-meta" in ASCII, a bigint that
# no other hub lock uses. Advisory locks are per database, so two metastores never wait on
# each other.
SCHEMA_LOCK_KEY = 0x6875622D6D657461
# How long a process waits for another one to finish creating the schema.
_SCHEMA_LOCK_TIMEOUT = "10min"
_CONNECT_TIMEOUT_S = "10"

# pgjdbc URL parameters that mean the same to libpq; the other ones tune the JDBC driver alone.
_LIBPQ_PARAMETERS = {
    "user": "user",
    "password": "password",
    "sslmode": "sslmode",
    "sslcert": "sslcert",
    "sslkey": "sslkey",
    "sslrootcert": "sslrootcert",
    "ApplicationName": "application_name",
}


def uses_postgresql(settings: LoaderSettings) -> bool:
    """Whether the settings select a metastore database on PostgreSQL (not a service)."""
    return (
        not settings.metastore_uris
        and settings.metastore_url is not None
        and settings.metastore_url.startswith(POSTGRESQL_PREFIX)
    )


# Every class of Hive 2.3's metastore model that has a table of its own (`package.jdo` in the
# hive-metastore jar, less its embedded-only classes).
_MODEL_CLASSES = tuple(
    f"org.apache.hadoop.hive.metastore.model.{name}"
    for name in (
        "MDatabase", "MType", "MTable", "MConstraint", "MSerDeInfo", "MColumnDescriptor",
        "MStringList", "MStorageDescriptor", "MPartition", "MIndex", "MRole", "MRoleMap",
        "MGlobalPrivilege", "MDBPrivilege", "MTablePrivilege", "MPartitionPrivilege",
        "MTableColumnPrivilege", "MPartitionColumnPrivilege", "MPartitionEvent", "MMasterKey",
        "MDelegationToken", "MTableColumnStatistics", "MPartitionColumnStatistics",
        "MVersionTable", "MFunction", "MNotificationLog", "MNotificationNextId",
    )
)  # fmt: skip


def spark_conf() -> dict[str, str]:
    """Spark settings that let Hive create its schema on PostgreSQL, as Spark does on Derby.

    Schema verification is off, as it must be for DataNucleus to create tables; the version
    Hive records is what `schema_creation` looks for. DataNucleus creates a table when a
    class is first used, and left alone it would create `TBL_PRIVS` in the middle of the
    first CREATE TABLE: its foreign key then waits for the lock that the same process' open
    transaction holds on `TBLS`, forever. Naming every class at start makes all tables at once.
    """
    return {
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.datanucleus.autoStartMechanism": "Classes",
        "spark.hadoop.datanucleus.autoStartClassNames": ",".join(_MODEL_CLASSES),
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.hadoop.hive.metastore.schema.verification.record.version": "true",
    }


def connection_parameters(settings: LoaderSettings) -> dict[str, str]:
    """psycopg's keywords for the JDBC URL in `metastore_url`, with the user and password.

    Parameters in the URL win over HUB_LOADER_METASTORE_USER and _PASSWORD, as in pgjdbc.
    """
    url = settings.metastore_url or ""
    parts = urlsplit(url.removeprefix("jdbc:"))
    if not url.startswith(POSTGRESQL_PREFIX) or not parts.netloc:
        raise MetastoreError(
            "HUB_LOADER_METASTORE_URL must look like jdbc:postgresql://host[:port]/database"
            "[?parameters] for a PostgreSQL metastore: it names no host."
        )
    hosts = [_host_and_port(address) for address in parts.netloc.split(",")]
    parameters = {
        "host": ",".join(host for host, _ in hosts),
        "port": ",".join(port for _, port in hosts),
        "dbname": unquote(parts.path.lstrip("/")) or "postgres",
        "connect_timeout": _CONNECT_TIMEOUT_S,
    }
    if settings.metastore_user:
        parameters["user"] = settings.metastore_user
    if settings.metastore_password:
        parameters["password"] = settings.metastore_password.get_secret_value()
    for name, value in parse_qsl(parts.query):
        if name in _LIBPQ_PARAMETERS:
            parameters[_LIBPQ_PARAMETERS[name]] = value
        elif name == "currentSchema":
            parameters["options"] = f"-c search_path={value}"
    return parameters


def _host_and_port(address: str) -> tuple[str, str]:
    host, _, port = address.partition(":")
    return host, port or "5432"


@contextmanager
def schema_creation(settings: LoaderSettings, *, where: str) -> Iterator[bool]:
    """Yield True when the caller must create the schema (`create_schema`), holding the lock.

    Yields False at once for other metastores, and for a PostgreSQL database whose schema is
    made. `where` names the metastore in messages (`metastore.describe`, password masked).
    """
    if not uses_postgresql(settings):
        yield False
        return
    connection = _connect(settings, where=where)
    try:
        _lock_schema(connection, where=where)
        must_create = not _schema_made(connection)
        if must_create:
            log.info("the metastore database is empty; creating Hive's schema in %s", where)
        else:
            connection.close()  # releases the lock: other processes need not wait for ours
        yield must_create
    finally:
        connection.close()


def create_schema(session: SparkSession) -> None:
    """Make the session's Hive client initialise the metastore (tables, version, `default`)."""
    session.catalog.listDatabases()
    log.info("the metastore schema is ready")


def _connect(settings: LoaderSettings, *, where: str) -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(make_conninfo(**connection_parameters(settings)), autocommit=True)
    except psycopg.OperationalError as exc:
        # libpq's message names the host and the cause (refused, timeout, password
        # authentication failed, no such database), never the password.
        reason = " ".join(line.strip() for line in str(exc).splitlines()) or type(exc).__name__
        raise MetastoreDatabaseUnreachable(
            f"Cannot connect to the {where} ({reason}). Check HUB_LOADER_METASTORE_URL, "
            "HUB_LOADER_METASTORE_USER and HUB_LOADER_METASTORE_PASSWORD, and that the database "
            "accepts connections from this host."
        ) from None


def _lock_schema(connection: psycopg.Connection[tuple[object, ...]], *, where: str) -> None:
    connection.execute(f"SET lock_timeout = '{_SCHEMA_LOCK_TIMEOUT}'")
    try:
        connection.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
    except pg_errors.LockNotAvailable:
        raise MetastoreError(
            f"Another process has been creating the metastore schema in the {where} for "
            f"{_SCHEMA_LOCK_TIMEOUT}; it holds advisory lock {SCHEMA_LOCK_KEY}. Stop it, or "
            "find it in pg_locks, then start again."
        ) from None


def _schema_made(connection: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether Hive has recorded its schema version, which it does as it first makes the schema.

    (It writes the row with `hive.metastore.schema.verification.record.version`, which
    `spark_conf` sets.) The process that made it released the lock only once its Hive client
    had also created the `default` database and the roles.
    """
    row = connection.execute("""SELECT to_regclass('"VERSION"') IS NOT NULL""").fetchone()
    if not row or not row[0]:
        return False
    counted = connection.execute('SELECT count(*) FROM "VERSION"').fetchone()
    return bool(counted and counted[0])
