"""Running the loader's streaming queries until a signal, shared by `hub load run` and
`python -m spark_loaders` (the spark-submit entry point).

`STREAMS` lists the queries a loader process starts, bronze first; a further layer (silver,
gold) adds its starter there and runs next to bronze in the same Spark application.
"""

import logging
import signal
import threading
from collections.abc import Callable

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from hub_core.health import HealthServer
from hub_kafka.settings import KafkaSettings
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.runtime.isolation import describe, stopped_on_dependency
from spark_loaders.runtime.lifecycle import batch_marks, stop_between_batches
from spark_loaders.runtime.metrics import LOADER_METRICS
from spark_loaders.runtime.progress import last_progress
from spark_loaders.runtime.scheduling import Pool, use_pool
from spark_loaders.settings import LoaderSettings
from spark_loaders.tables.maintenance import ScheduledMaintenance

log = logging.getLogger(__name__)

# Pause before restarting a query that stopped because a dependency stayed away.
RESTART_WAIT_S = 10.0

StreamStarter = Callable[[SparkSession, LoaderSettings, KafkaSettings, bool], StreamingQuery]


def start_bronze(
    spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings, available_now: bool
) -> StreamingQuery:
    """The bronze query: every hub topic into `bronze.<topic>`, in the scheduler's first pool."""
    use_pool(spark, Pool.BRONZE)
    return BronzeLoader(spark, settings, kafka).start(available_now=available_now)


STREAMS: list[StreamStarter] = [start_bronze]


def run_streams(
    spark: SparkSession,
    settings: LoaderSettings,
    kafka: KafkaSettings,
    *,
    available_now: bool = False,
    streams: list[StreamStarter] | None = None,
    on_stop: Callable[[], None] | None = None,
    health: HealthServer | None = None,
) -> list[StreamingQuery]:
    """Run the queries until SIGTERM/SIGINT (or, with `available_now`, until caught up).

    `on_stop` is called as stopping begins, so that other work can wind down meanwhile.
    Table maintenance (`spark_loaders.tables.maintenance`) runs on its schedule next to the queries.
    `health` hears, on every turn of the loop, whether every query runs (`/readyz`).
    A continuous query that failed because the registry or the metastore stayed away past its
    retries is restarted from its checkpoint (its failed batch is redone, nothing is lost).
    Returns the queries, stopped; a query's `exception()` tells whether it failed.
    """
    starters = streams or STREAMS
    health = health or HealthServer("", None, name="loader")
    queries = [start(spark, settings, kafka, available_now) for start in starters]
    maintenance = ScheduledMaintenance(spark, settings)
    if not available_now:
        maintenance.start()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, lambda *_: stop.set())
    try:
        while not stop.is_set():
            health.report(None if all(q.isActive for q in queries) else "a query stopped")
            LOADER_METRICS.follow(last_progress(q) for q in queries)
            for index, query in enumerate(queries):
                if not query.isActive and _restartable(query, available_now):
                    health.report(
                        f"query {query.name} waits to restart: " + describe(query.exception())  # type: ignore[arg-type]
                    )
                    log.warning(
                        "query %s stopped because a dependency is unavailable; restarting it "
                        "from its checkpoint in %.0f s: %s",
                        query.name,
                        RESTART_WAIT_S,
                        describe(query.exception()),  # type: ignore[arg-type]
                    )
                    if stop.wait(RESTART_WAIT_S):
                        break
                    queries[index] = starters[index](spark, settings, kafka, available_now)
            if not all(q.isActive for q in queries):
                break
            stop.wait(1.0)
    finally:
        # The batch each query runs now is its last, however long the rest takes to wind down.
        marks = batch_marks(queries)
        health.report("stopping")
        log.info("stopping the loader after its current batch")
        if on_stop is not None:
            on_stop()
        maintenance.stop()
        stop_between_batches(*queries, since=marks)
    return queries


def _restartable(query: StreamingQuery, available_now: bool) -> bool:
    failure = query.exception()
    return not available_now and failure is not None and stopped_on_dependency(failure)
