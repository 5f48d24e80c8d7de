"""Table maintenance: a day of micro-batches stays as fast to read as one batch.

A loader on a 1 s trigger commits a few small files per table every second: tens of thousands
a day, and a query then spends its time opening files. Three tools keep tables compact, each
where it cannot get in a writer's way:

- **Auto compaction** (`delta.autoOptimize.autoCompact`, tables of `auto_compact_layers`,
  silver and gold by default): after a commit leaves enough small files, Delta compacts them
  right away, in the writer's own thread, so it never races the writer. Set when a table is
  created (`new_table_properties`), or by `hub load maintain` on older tables.
- **OPTIMIZE** on a schedule (`maintenance_seconds`, tables of `maintenance_layers`, bronze by
  default) and on demand (`hub load maintain`): bin-packs small files into large ones. Its
  commits change no data (`dataChange=false`): streams reading the table skip them, and bronze's
  appends never conflict with it. Silver and gold change by MERGE, which fails when a
  concurrent OPTIMIZE removed a file it read; they are on the schedule only when asked for.
- **VACUUM** deletes the files no table version of the last `vacuum_retention_hours` needs.
  Readers (a lagging silver stream, an analyst's long query) and time travel reach back that
  far. New tables keep their log and removed files for exactly that long (`session_conf`),
  so Delta's own retention check agrees with VACUUM; the hub refuses less than 24 hours.
  VACUUM lists the table's files with Spark jobs of `vacuum_listing_tasks` tasks each (by
  default one per core). Delta takes that number from Spark's partition discovery setting,
  whose default of 10,000 gave every VACUUM of a small bronze table about 170,000 tasks and
  21 s on two cores; with one task per core it took 1.58 s (`bench/vacuum.py`).

Each table is maintained on its own: one that fails is logged and retried at the next run,
and the others go on.
"""

import contextlib
import logging
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from spark_loaders.runtime.scheduling import Pool, use_pool
from spark_loaders.runtime.work_progress import WorkProgress, no_progress
from spark_loaders.settings import LoaderSettings, check_layers

log = logging.getLogger(__name__)

AUTO_COMPACT = "delta.autoOptimize.autoCompact"
# The session conf that tells table creators which layers compact automatically.
AUTO_COMPACT_LAYERS_CONF = "spark.hub.autoCompactLayers"
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# How many tasks each of VACUUM's file listing jobs has (Spark's default: 10,000).
_LISTING_TASKS = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
_DELTA_DEFAULT_RETENTION_HOURS = 168.0
# Delta gives every table a session creates the properties named by these defaults.
_TABLE_DEFAULTS = "spark.databricks.delta.properties.defaults."


def session_conf(settings: LoaderSettings) -> dict[str, str]:
    """The Spark session's share of maintenance: which layers compact automatically, and the
    history new tables keep.

    A table keeps its log (`delta.logRetentionDuration`, Delta's default 30 days) and its
    removed files (`delta.deletedFileRetentionDuration`, 7 days) for `vacuum_retention_hours`:
    time travel needs both, so a longer log buys nothing, and every query lists the log (a 1 s
    trigger commits 86,400 times a day). VACUUM then keeps exactly that history without
    overriding Delta's retention check.
    """
    hours = settings.vacuum_retention_hours
    interval = (
        f"interval {hours:g} hours" if hours.is_integer() else f"interval {hours * 60:.0f} minutes"
    )
    return {
        AUTO_COMPACT_LAYERS_CONF: ",".join(settings.layers("auto_compact_layers")),
        f"{_TABLE_DEFAULTS}logRetentionDuration": interval,
        f"{_TABLE_DEFAULTS}deletedFileRetentionDuration": interval,
    }


def new_table_properties(spark: SparkSession, table: str) -> dict[str, str]:
    """Table properties for a table being created, as writer options (`delta.*` options become
    the new table's properties): auto compaction for the layers configured for it."""
    layers = (spark.conf.get(AUTO_COMPACT_LAYERS_CONF, "") or "").split(",")
    return {AUTO_COMPACT: "true"} if table.split(".", 1)[0] in layers else {}


@dataclass(frozen=True)
class Maintained:
    """What maintenance did to one table."""

    table: str
    files_before: int
    files_after: int
    bytes_after: int
    seconds: float
    error: str | None = None


class TableMaintenance:
    """OPTIMIZE and VACUUM of the tables of some layers, one table at a time."""

    def __init__(self, spark: SparkSession, settings: LoaderSettings) -> None:
        self._spark = spark
        self._settings = settings
        self._auto_compact = set(settings.layers("auto_compact_layers"))

    def tables(self, layers: Iterable[str]) -> list[str]:
        """The tables of `layers` in the metastore, layer by layer, by name."""
        found: list[str] = []
        for layer in layers:
            check_layers([layer])
            if not self._spark.catalog.databaseExists(layer):
                continue
            names = sorted(t.name for t in self._spark.catalog.listTables(layer))
            found.extend(f"{layer}.{name}" for name in names)
        return found

    def maintain(
        self, table: str, *, vacuum: bool = True, progress: WorkProgress = no_progress
    ) -> Maintained:
        """Compact `table`, then vacuum it; a failure is reported in the result, not raised.

        `progress` hears of OPTIMIZE and VACUUM, a step each.
        """
        steps = 2 if vacuum else 1
        started = time.monotonic()
        before = 0
        progress(f"OPTIMIZE {table}", 0, steps)
        try:
            before = self._files(table)
            if table.split(".", 1)[0] in self._auto_compact:
                self._ensure_auto_compaction(table)
            self._spark.sql(f"OPTIMIZE {table}")
            if vacuum:
                progress(f"VACUUM {table}", 1, steps)
                self._vacuum(table)
        except Exception as error:
            log.warning("maintenance of %s failed, retried at the next run: %s", table, error)
            return Maintained(table, before, before, 0, time.monotonic() - started, str(error))
        after, size = self._detail(table)
        progress(f"maintained {table}", steps, steps)
        result = Maintained(table, before, after, size, time.monotonic() - started)
        log.info(
            "maintained %s: %d files -> %d (%.1f MB) in %.1f s",
            table,
            before,
            after,
            size / 1e6,
            result.seconds,
        )
        return result

    def run(
        self, layers: Iterable[str], *, stop: threading.Event | None = None
    ) -> list[Maintained]:
        """Maintain every table of `layers`; between tables, stop early when `stop` is set."""
        results = []
        for table in self.tables(layers):
            if stop is not None and stop.is_set():
                break
            results.append(self.maintain(table))
        return results

    def _vacuum(self, table: str) -> None:
        hours = self._settings.vacuum_retention_hours
        tasks = self._settings.vacuum_listing_tasks or self._spark.sparkContext.defaultParallelism
        conf = {_LISTING_TASKS: str(tasks)}
        if hours < _DELTA_DEFAULT_RETENTION_HOURS and not self._keeps_at_most(table, hours):
            # A table created before the retention was lowered still says 7 days, and Delta's
            # check refuses to vacuum below its property; the setting's own floor (24 hours)
            # stands in.
            conf[_RETENTION_CHECK] = "false"
        with _session_conf(self._spark, conf):
            self._spark.sql(f"VACUUM {table} RETAIN {hours:g} HOURS")

    def _keeps_at_most(self, table: str, hours: float) -> bool:
        """Whether `table`'s own deleted-file retention is `hours` or less."""
        properties = self._properties(table)
        prop = properties.get("delta.deletedFileRetentionDuration")
        return prop is not None and interval_hours(prop) <= hours

    def _properties(self, table: str) -> dict[str, str]:
        rows = self._spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
        return {row["key"]: row["value"] for row in rows}

    def _ensure_auto_compaction(self, table: str) -> None:
        if self._properties(table).get(AUTO_COMPACT) != "true":
            self._spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('{AUTO_COMPACT}' = 'true')")

    def _files(self, table: str) -> int:
        return self._detail(table)[0]

    def _detail(self, table: str) -> tuple[int, int]:
        detail = self._spark.sql(f"DESCRIBE DETAIL {table}").first()
        assert detail is not None
        return int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)


@contextlib.contextmanager
def _session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """`conf` set on the session for the block, then as it was. Only the maintenance thread
    sets these, and only VACUUM reads them."""
    previous: dict[str, str | None] = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, before in previous.items():
            if before is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)


_UNIT_HOURS = {"week": 168.0, "day": 24.0, "hour": 1.0, "minute": 1 / 60, "second": 1 / 3600}


def interval_hours(interval: str) -> float:
    """Hours of a Delta interval property such as `interval 7 days`; infinite when unreadable,
    so an unknown retention is never taken for a short one."""
    parts = interval.lower().removeprefix("interval").split()
    if len(parts) != 2:
        return float("inf")
    amount, unit = parts
    try:
        return float(amount) * _UNIT_HOURS[unit.rstrip("s")]
    except (KeyError, ValueError):
        return float("inf")


class ScheduledMaintenance:
    """The running loader's maintenance: every `maintenance_seconds`, the tables of
    `maintenance_layers`, in a thread of its own next to the streaming queries."""

    def __init__(self, spark: SparkSession, settings: LoaderSettings) -> None:
        self._spark = spark
        self._maintenance = TableMaintenance(spark, settings)
        self._interval = settings.maintenance_seconds
        self._layers = settings.layers("maintenance_layers")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="table-maintenance", daemon=True)

    def start(self) -> None:
        if self._interval > 0 and self._layers:
            log.info(
                "table maintenance of %s every %.0f s",
                ", ".join(self._layers),
                self._interval,
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop between tables. A table's OPTIMIZE under way when the loader exits is simply
        not committed: it commits whole or not at all."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)

    def _loop(self) -> None:
        use_pool(self._spark, Pool.MAINTENANCE)
        while not self._stop.wait(self._interval):
            self._maintenance.run(self._layers, stop=self._stop)
