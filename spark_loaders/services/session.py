"""Building a SparkSession with Delta Lake, the Hive metastore and the hub's local jars."""

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from spark_loaders.runtime import scheduling
from spark_loaders.runtime.jars import required_jar
from spark_loaders.services import metastore, metastore_database
from spark_loaders.settings import LoaderSettings
from spark_loaders.tables import maintenance

log = logging.getLogger(__name__)

# Spark substitutes `${env:...}`, `${system:...}` and `${var}` in SQL text by default: an
# environment variable (a password) could reach a table through a statement that embeds user
# text, and a schema's `doc` would not round-trip. No hub session substitutes anything.
SAFE_CONF = {"spark.sql.variable.substitute": "false"}

# Spark shows settings and source options whose name or value matches this pattern as redacted
# (UI, event log, plans): its default, plus the client key a secured loader passes inline in
# its Kafka options (`kafka.ssl.keystore.key`, hub_kafka/security.py). The S3 keys
# (`spark.hadoop.fs.s3a.secret.key`, `...access.key`, spark_loaders/runtime/storage.py) match
# `secret` and `access[.]?key`.
REDACTION_REGEX = r"(?i)secret|password|token|access[.]?key|keystore[.]key|private key"

# Delta's SQL (MERGE, OPTIMIZE, DESCRIBE HISTORY, ...); a session adding its own extensions
# (the Thrift server's) lists this one first.
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"

# Delta's log store for tables on a local file system or volume (jvm/delta-log-store): Delta's
# own, but listing a table's log by name before reading any file's attributes, so the listing
# before each query does not grow with the log (docs/loaders.md#reading-a-table-of-many-commits).
# Object stores keep Delta's stores.
LOCAL_LOG_STORE_CONF = "spark.delta.logStore.file.impl"
LOCAL_LOG_STORE = "org.integrationhub.delta.NameFirstLogStore"
LOCAL_LOG_STORE_JAR = "hub-delta-log-store-*.jar"
# Delta's S3 log store lists an `s3a://` table's log from a name (S3's `start-after`) instead of
# the whole folder, when this is on; Delta leaves it off because it needs S3A, which the hub uses.
FAST_S3A_LISTING_CONF = "spark.hadoop.delta.enableFastS3AListFrom"
_JARS_DIR = "HUB_LOADER_JARS_DIR"


def build_session(
    settings: LoaderSettings,
    *,
    app_name: str = "hub-loader",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session on the shared metastore with Delta and the Kafka/Avro sources, local jars only.

    The local metastore server is started first when it is the one selected and not running,
    so the loader, `hub sql` and the Thrift server can each be the first to need it; a
    PostgreSQL metastore is reached first, and its schema made when it has none.
    """
    required_jar(settings.jars_dir, "delta-spark*.jar", what="Delta jar", setting=_JARS_DIR)
    required_jar(settings.jars_dir, LOCAL_LOG_STORE_JAR, what="Delta log store", setting=_JARS_DIR)
    jars = sorted(settings.jars_dir.glob("*.jar"))
    jars += _s3a_jars(settings)
    if isinstance(settings.warehouse_dir, Path):  # a bucket's folders need no making
        settings.warehouse_dir.mkdir(parents=True, exist_ok=True)
    settings.metastore_dir.mkdir(parents=True, exist_ok=True)
    conf = session_conf(settings, jars=jars, extra_conf=extra_conf)
    metastore.ensure_metastore(settings)
    builder = SparkSession.builder.appName(app_name).master(settings.master).enableHiveSupport()
    for key, value in conf.items():
        builder = builder.config(key, value)
    where = metastore.describe(settings)
    # A PostgreSQL metastore is reached before any JVM starts; on a fresh one, one process at
    # a time makes Hive's schema.
    with metastore_database.schema_creation(settings, where=where) as must_create:
        log.info(
            "starting Spark (%s) with %d local jars on the %s", settings.master, len(jars), where
        )
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        if must_create:
            metastore_database.create_schema(session)
    lock_down(session)
    return session


def _s3a_jars(settings: LoaderSettings) -> list[Path]:
    """hadoop-aws and the AWS SDK bundle when a location is s3a://, else none: the bundle is
    over 500 MB, and a cluster's executors would each fetch it for nothing."""
    if not settings.uses_object_storage:
        return []
    required_jar(
        settings.s3a_jars_dir,
        "hadoop-aws-*.jar",
        what="hadoop-aws jar for s3a:// locations",
        setting="HUB_LOADER_S3A_JARS_DIR",
    )
    jars = sorted(settings.s3a_jars_dir.glob("*.jar"))
    return jars


def session_conf(
    settings: LoaderSettings, *, jars: list[Path], extra_conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Every Spark setting `build_session` gives its session; `SAFE_CONF` always wins."""
    # Spark's own Derby (the Thrift server's in-memory execution catalog) logs here, not in cwd.
    derby_log = settings.metastore_dir / "derby-spark.log"
    return {
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.driver.memory": settings.driver_memory,
        "spark.executor.memory": settings.executor_memory,
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # In `spark.jars` beside Delta's storage classes, which it extends: Delta loads a
        # store by name through the same class loader as its own default.
        LOCAL_LOG_STORE_CONF: LOCAL_LOG_STORE,
        FAST_S3A_LISTING_CONF: "true",
        "spark.sql.warehouse.dir": str(settings.warehouse_dir),
        "spark.driver.extraJavaOptions": f"-Dderby.stream.error.file={derby_log}",
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
        # Delta rebuilds table state with this many tasks (default 50): far too many for the
        # small, frequent commits of a streaming loader.
        "spark.databricks.delta.snapshotPartitions": str(settings.shuffle_partitions),
        # The loaders cache a micro-batch for the length of the batch only; compressing the
        # cache's columns cost a third of the bronze batch's first job (`bench/loader.py`).
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        "spark.sql.session.timeZone": "UTC",
        # A batch runs the classes the batch before it compiled only while Spark keeps them:
        # a loader of eight topics needs about 95, and with the 100 Spark keeps by default it
        # compiled 12-15 of them again every batch (`bench/code_cache.py`).
        "spark.sql.codegen.cache.maxEntries": str(settings.codegen_cache_entries),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.redaction.regex": REDACTION_REGEX,
        **maintenance.session_conf(settings),
        **scheduling.session_conf(),
        **metastore.spark_conf(settings),
        **settings.spark_s3_conf(),
        **(extra_conf or {}),
        **SAFE_CONF,
    }


def lock_down(session: SparkSession) -> None:
    """Apply `SAFE_CONF` to a session the hub did not build (spark-submit's), or built earlier."""
    for key, value in SAFE_CONF.items():
        session.conf.set(key, value)


@contextmanager
def spark_session(
    settings: LoaderSettings,
    *,
    app_name: str = "hub-loader",
    extra_conf: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """`build_session`'s session for the length of a `with` block, stopped however it ends."""
    session = build_session(settings, app_name=app_name, extra_conf=extra_conf)
    try:
        yield session
    finally:
        session.stop()
