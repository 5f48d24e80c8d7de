"""Silver and gold next to the bronze loader, in the same Spark application.

Changelog topics appear while the loader runs (a feed gets its first records, a CDC connector
starts), so a background thread looks for new changelog bronze tables at every interval and
starts a silver stream for each; with warehouse models (several teams may each have one) it
also rebuilds their star schemas, each table on its own (`spark_loaders.warehouse.build`).
A one-shot build (`hub warehouse build`, `build_model`) first catches silver up with bronze the
same way. Silver and the warehouse know nothing of each other: this module joins them.
"""

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from spark_loaders.runtime.lifecycle import BatchMark, batch_marks, stop_between_batches
from spark_loaders.runtime.scheduling import Pool, use_pool
from spark_loaders.runtime.work_progress import WorkProgress, no_progress
from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.loader import start_silver
from spark_loaders.tables.openlineage import run_events
from spark_loaders.warehouse.build import BuildReport, WarehouseBuilder
from spark_loaders.warehouse.model import load_model
from spark_loaders.warehouse.status import GoldStatusBook

log = logging.getLogger(__name__)

JOB_GROUP = "hub-downstream"


class Downstream:
    """Follows bronze with silver streams, and rebuilds the warehouse models given."""

    def __init__(
        self,
        spark: SparkSession,
        settings: LoaderSettings,
        *,
        warehouse: Sequence[Path] = (),
        interval_s: float = 10.0,
    ) -> None:
        self._spark = spark
        self._settings = settings
        self._warehouse = list(warehouse)
        self._interval_s = interval_s
        self._queries: dict[str, StreamingQuery] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hub-downstream", daemon=True)
        self._stopper: threading.Thread | None = None
        self._marks: dict[StreamingQuery, BatchMark] = {}
        self._lock = threading.Lock()
        for path in self._warehouse:
            load_model(path)  # a bad model fails the start, not a later pass

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        """Begin stopping: no new pass starts, a warehouse build under way is cancelled, and
        the silver streams stop after their current batches, while bronze stops too.

        A cancelled build is safe: each table's write is one atomic Delta commit, and the next
        build recomputes whatever the cancelled one did not write.
        """
        self._stop.set()
        self._spark.sparkContext.cancelJobGroup(JOB_GROUP)
        with self._lock:
            if self._stopper is None:
                self._marks = batch_marks(list(self._queries.values()))
                self._stopper = threading.Thread(
                    target=self._stop_streams, name="hub-silver-stop", daemon=True
                )
                self._stopper.start()

    def stop(self) -> None:
        """Stop the thread, then the silver streams after their current batches."""
        self.request_stop()
        if self._stopper is not None:
            self._stopper.join()

    def _stop_streams(self) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout=30)  # no stream starts after this
        stop_between_batches(*self._queries.values(), since=self._marks)

    def catch_up(self) -> None:
        """Bring silver (and the models) up to date with bronze once, then return."""
        if self._warehouse:
            build_models(self._spark, self._settings, self._warehouse)  # silver first
        else:
            catch_up_silver(self._spark, self._settings)

    def _run(self) -> None:
        statuses = GoldStatusBook.in_checkpoints(self._settings.state_dir)
        events = run_events(self._settings)
        builders = [
            WarehouseBuilder(
                self._spark, load_model(path), source=str(path), statuses=statuses, events=events
            )
            for path in self._warehouse
        ]
        # Spark jobs of this thread carry one group, so that shutdown can cancel them at once.
        self._spark.sparkContext.setJobGroup(JOB_GROUP, "hub silver and warehouse passes", True)
        use_pool(self._spark, Pool.DOWNSTREAM)  # the silver queries started here too
        while not self._stop.wait(self._interval_s):
            try:
                for query in start_silver(self._spark, self._settings, running=self._queries):
                    log.info("silver stream %s started", query.name)
                # A table's own failure stays with it (and the facts it keys); only a
                # dependency that stays away, or the loader failing, ends the pass here.
                for path, builder in zip(self._warehouse, builders, strict=True):
                    report = builder.build(stop=self._stop)
                    log.info("warehouse %s rebuilt: %s", path, report.describe())
            except Exception:
                if self._stop.is_set():
                    log.info("silver/warehouse pass interrupted by shutdown")
                    return
                log.warning("silver/warehouse pass failed; retrying", exc_info=True)


def catch_up_silver(
    spark: SparkSession, settings: LoaderSettings, *, progress: WorkProgress = no_progress
) -> None:
    """Bring every silver table up to date with bronze once; `progress` hears of each stream."""
    running: dict[str, StreamingQuery] = {}
    queries = start_silver(spark, settings, running=running, available_now=True)
    for done, query in enumerate(queries):
        progress(f"catching silver up with bronze: {query.name}", done, len(queries))
        query.awaitTermination()
        if query.exception() is not None:
            raise query.exception()  # type: ignore[misc]
    progress("caught silver up with bronze", len(queries), len(queries))


def build_models(
    spark: SparkSession,
    settings: LoaderSettings,
    paths: Sequence[Path],
    *,
    progress: WorkProgress = no_progress,
) -> list[BuildReport]:
    """Catch silver up with bronze, then build each model at `paths` once.

    Every model is built, whatever another's tables did; then the first table not built, if
    any, is raised, so that a one-shot build exits non-zero. `progress` hears of each silver
    stream caught up, then of each model's tables.
    """
    models = [(path, load_model(path)) for path in paths]
    catch_up_silver(spark, settings, progress=progress)
    statuses = GoldStatusBook.in_checkpoints(settings.state_dir)
    events = run_events(settings)
    reports = []
    for path, model in models:
        builder = WarehouseBuilder(spark, model, source=str(path), statuses=statuses, events=events)
        report = builder.build(progress=progress)
        log.info("warehouse built from %s: %s", path, report.describe())
        reports.append(report)
    for report in reports:
        report.raise_first()
    return reports


def build_model(
    spark: SparkSession,
    settings: LoaderSettings,
    path: Path,
    *,
    progress: WorkProgress = no_progress,
) -> BuildReport:
    """Catch silver up with bronze, then build the model at `path` once."""
    return build_models(spark, settings, [path], progress=progress)[0]
