"""Building a model's star schemas: dimensions first (with their silver tables), then facts.

Several teams' models are built one after another in a pass, and one table failing must not
stop the others (ADR 0022). Each table is built on its own and its failure is classified as
bronze's are (`spark_loaders.runtime.isolation`):

- a failure of the table itself (`FEED`: a Delta error of that table, Spark refusing its
  data) marks the table `failed` with one ERROR log line; the model's other tables are built,
  except the facts referencing a dimension that was not built, which are `skipped` for the
  pass: their dimension's surrogate keys may be wrong or missing. The next pass tries again;
- a source table or column that does not exist yet (40440) marks the table `waiting`;
- a dependency every table shares (metastore, storage, a concurrent commit) is retried with
  backoff, then fails the pass; the loader itself failing (cancelled, out of memory) fails it
  at once. The next pass starts over.

States are kept in `spark_loaders.warehouse.status`, shown by `hub load status`.

Every commit of a gold table carries a ledger entry of kind `gold` naming the source versions
its build read (a fact's, also the dimension versions it looked its keys up in), and each
table's build is an OpenLineage run of job `hub-gold-<table>`
(`spark_loaders.warehouse.snapshots`, ADRs 0041 and 0044).
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from hub_core.naming import TopicName, bronze_table
from hub_core.retries import Backoff, retry_transient_interruptibly
from spark_loaders.runtime.isolation import FailureKind, as_transient, classify, describe
from spark_loaders.runtime.work_progress import WorkProgress, no_progress
from spark_loaders.tables.lineage import commit_metadata, follow_conf, ledger_session
from spark_loaders.tables.openlineage import RunEvents
from spark_loaders.types import GoldState
from spark_loaders.warehouse.dimensions import DimensionBuilder, dim_table, history_table
from spark_loaders.warehouse.errors import WarehouseSourceNotFound
from spark_loaders.warehouse.facts import FactBuilder, fact_table
from spark_loaders.warehouse.model import Fact, WarehouseModel
from spark_loaders.warehouse.snapshots import GoldLedger, Snapshots, current_version
from spark_loaders.warehouse.status import BUILD_FAILED, DIMENSION_NOT_BUILT, GoldStatusBook

log = logging.getLogger(__name__)

# A dependency failing while one table is built is retried this long before the pass fails.
BUILD_BACKOFF = Backoff(initial_s=1.0, max_s=10.0, jitter_s=1.0, attempts=4, timeout_s=60.0)


class BuildStopped(Exception):
    """The loader began stopping: the pass ends between two tables, each written whole or not
    at all, and the next pass goes on from there."""


@dataclass
class BuildReport:
    """Rows per gold table built, members still inferred, and the tables not built."""

    rows: dict[str, int] = field(default_factory=dict)
    inferred: dict[str, int] = field(default_factory=dict)
    # gold table -> why it was not built in this pass
    failed: dict[str, Exception] = field(default_factory=dict)
    waiting: dict[str, WarehouseSourceNotFound] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        parts = []
        for table, count in self.rows.items():
            pending = self.inferred.get(table)
            parts.append(f"{table}: {count} rows" + (f" ({pending} inferred)" if pending else ""))
        parts += [f"{table}: failed" for table in self.failed]
        parts += [f"{table}: waiting for its source" for table in self.waiting]
        parts += [f"{table}: skipped" for table in self.skipped]
        return ", ".join(parts)

    def raise_first(self) -> None:
        """Raise why the first table not built was not, for one-shot builds that must fail."""
        for error in [*self.waiting.values(), *self.failed.values()]:
            raise error


class WarehouseBuilder:
    """Refreshes every dimension and fact table of one model from silver and bronze."""

    def __init__(
        self,
        spark: SparkSession,
        model: WarehouseModel,
        *,
        source: str,
        statuses: GoldStatusBook | None = None,
        events: RunEvents | None = None,
    ) -> None:
        # The ledger entry of each table is a conf of this session, never of `spark`, from
        # which the loader starts its streams (`lineage.ledger_session`).
        self._shared = spark
        self._spark = ledger_session(spark)
        self._model = model
        self._source = source
        self._statuses = statuses
        self._events = events or RunEvents(None, kafka_namespace="", table_namespace="")
        self._snapshots = Snapshots(self._spark)
        self._ledger = GoldLedger(self._spark)
        self._dimensions = {
            d.name: DimensionBuilder(
                self._spark, d, where=f"{source}: dimensions[{i}]", snapshots=self._snapshots
            )
            for i, d in enumerate(model.dimensions)
        }
        self._facts = [
            FactBuilder(
                self._spark,
                model,
                f,
                self._dimensions,
                where=f"{source}: facts[{i}]",
                snapshots=self._snapshots,
            )
            for i, f in enumerate(model.facts)
        ]

    def build(
        self, *, stop: threading.Event | None = None, progress: WorkProgress = no_progress
    ) -> BuildReport:
        """One incremental pass: only rows that changed are written; see the module docstring
        for what happens to a table that fails. Once `stop` is set, no other table starts
        (`BuildStopped`). `progress` hears of each table of the model, counted whether it is
        built, fails, waits or is skipped."""

        def go_on() -> None:
            if stop is not None and stop.is_set():
                raise BuildStopped()

        report = BuildReport()
        built: list[str] = []
        first_fact = len(self._model.dimensions)
        tables = first_fact + len(self._model.facts)
        # The loader sets some settings on its shared session after this builder was made
        # (silver's schema evolution, when its first stream starts).
        follow_conf(self._shared, self._spark)
        for done, dim in enumerate(self._model.dimensions):
            go_on()
            table = dim_table(dim)
            progress(f"building {table}", done, tables)
            dimension = self._dimensions[dim.name]
            refresh = self._recorded(
                table,
                [([history_table(dim.source)], dimension.refresh)],
                [table],
                prepare=dimension.ensure_table,
            )
            if self._contained(table, refresh, report):
                built.append(dim.name)
                log.info("dimension %s refreshed", dim.name)
        facts = zip(self._model.facts, self._facts, strict=True)
        for done, (fact, builder) in enumerate(facts, start=first_fact):
            go_on()
            table = fact_table(fact)
            progress(f"building {table}", done, tables)
            if self._skipped(fact, report):
                continue
            dimensions = (self._model.dimension(r.dimension) for r in fact.dimensions)
            keyed = list(dict.fromkeys(dim_table(d) for d in dimensions))
            # First the inferred members the fact's bronze records need, in its dimensions:
            # those commits name the bronze version alone. Then the facts, looked up in the
            # dimensions as that left them: their commits name bronze and those versions. No
            # dimension commit names a dimension, so a forward query never loops through them.
            refresh = self._recorded(
                table,
                [
                    ([bronze_table(TopicName(fact.source))], builder.add_inferred),
                    (keyed, partial(_write_fact, builder, table, report)),
                ],
                [table, *keyed],
            )
            if self._contained(table, refresh, report):
                log.info("fact %s refreshed", fact.name)
        for dim in self._model.dimensions:
            go_on()
            if dim.name in built:
                table = dim_table(dim)
                progress(f"counting the rows of {table}", tables, tables)
                report.rows[table], report.inferred[table] = self._counts(table)
        not_built = len(report.failed) + len(report.waiting) + len(report.skipped)
        progress(f"built {tables - not_built} of {tables} tables", tables, tables)
        return report

    def _counts(self, table: str) -> tuple[int, int]:
        """The rows of dimension `table` and how many of them are inferred, in one job."""
        counts = (
            self._spark.table(table)
            .agg(F.count(F.lit(1)).alias("rows"), F.count_if("is_inferred").alias("inferred"))
            .first()
        )
        assert counts is not None
        return int(counts["rows"]), int(counts["inferred"])

    def _recorded(
        self,
        table: str,
        phases: list[tuple[list[str], Callable[[], None]]],
        outputs: list[str],
        *,
        prepare: Callable[[], None] | None = None,
    ) -> Callable[[], None]:
        """The build of `table` as one OpenLineage run of `hub-gold-<table>`: each phase pins
        its sources' versions, then runs with its commits carrying the entry that names every
        source pinned so far. `prepare` runs first, without an entry: a dimension's new table
        holds only its unknown member, no data read from a source, so a forward query must
        not stop at it."""

        def run() -> None:
            pinned = self._snapshots.pin(phases[0][0])
            if prepare is not None:
                prepare()
            before = current_version(self._spark, table)
            sources = [source for tables, _ in phases for source in tables]
            job = f"hub-gold-{table.split('.', 1)[1]}"
            with self._events.run(job, read_tables=sources, tables=outputs):
                for n, (tables, phase) in enumerate(phases):
                    if n:
                        pinned = self._snapshots.pin(tables, keep=True)
                    with commit_metadata(self._spark, self._ledger.entry(table, pinned).encode()):
                        phase()
            # A build that changed nothing made no commit and left no entry (a MERGE that
            # matches nothing to change commits nothing).
            if current_version(self._spark, table) != before:
                self._ledger.committed(table, pinned)

        return run

    def _skipped(self, fact: Fact, report: BuildReport) -> bool:
        """Skip a fact whose dimensions were not all built: its keys would point wrong."""
        referenced = [dim_table(self._model.dimension(r.dimension)) for r in fact.dimensions]
        failed = [table for table in dict.fromkeys(referenced) if table in report.failed]
        waiting = [table for table in dict.fromkeys(referenced) if table in report.waiting]
        if not failed and not waiting:
            return False
        table = fact_table(fact)
        if failed:
            message = (
                f"not built in this pass: its dimension {', '.join(failed)} failed, and facts "
                "built without it would get wrong surrogate keys; it is built once it is"
            )
            report.skipped[table] = message
            self._record(table, GoldState.SKIPPED, DIMENSION_NOT_BUILT, message)
            log.warning("fact table %s of %s skipped: %s", table, self._source, message)
        else:
            absent = WarehouseSourceNotFound(
                f"{self._source}: {table} waits for its dimension {', '.join(waiting)}, whose "
                "source does not exist yet"
            )
            report.waiting[table] = absent
            self._record(table, GoldState.WAITING, absent.code.name, absent.message)
        return True

    def _contained(self, table: str, build: Callable[[], None], report: BuildReport) -> bool:
        """Build one table, keeping a failure of its own to it; whether it was built."""

        def attempt() -> None:
            try:
                return build()
            except WarehouseSourceNotFound:
                raise
            except Exception as error:
                if classify(error) is FailureKind.DEPENDENCY:
                    raise as_transient(error) from error
                raise

        try:
            retry_transient_interruptibly(attempt, backoff=BUILD_BACKOFF, sleep=time.sleep)
        except WarehouseSourceNotFound as error:
            # Tables appear as feeds get their first records; the next pass tries again.
            report.waiting[table] = error
            self._record(table, GoldState.WAITING, error.code.name, error.message)
            log.info("gold table %s waits for its source: %s", table, error.message)
            return False
        except Exception as error:
            if classify(error) is not FailureKind.FEED:
                raise
            report.failed[table] = error
            message = f"building {table} failed: {describe(error)}"
            self._record(table, GoldState.FAILED, BUILD_FAILED, message)
            log.error(
                "gold table %s of %s not built in this pass (the tables not depending on it "
                "are; the next pass tries again): %s",
                table,
                self._source,
                message,
            )
            return False
        self._record(table, GoldState.BUILT)
        return True

    def _record(
        self, table: str, state: GoldState, reason_code: str | None = None, message: str = ""
    ) -> None:
        if self._statuses is not None:
            self._statuses.record(
                table,
                state,
                model=self._source,
                reason_code=reason_code,
                message=message or None,
            )


def _write_fact(builder: FactBuilder, table: str, report: BuildReport) -> None:
    report.rows[table] = builder.write()
