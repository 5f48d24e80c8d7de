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

from hub_kafka.settings import KafkaSettings
from spark_loaders.bronze import BronzeLoader
from spark_loaders.lifecycle import stop_between_batches
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)

StreamStarter = Callable[[SparkSession, LoaderSettings, KafkaSettings, bool], StreamingQuery]


def start_bronze(
    spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings, available_now: bool
) -> StreamingQuery:
    """The bronze query: every hub topic into `bronze.<topic>`."""
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
) -> list[StreamingQuery]:
    """Run the queries until SIGTERM/SIGINT (or, with `available_now`, until caught up).

    `on_stop` is called as stopping begins, so that other work can wind down meanwhile.
    Returns the queries, stopped; a query's `exception()` tells whether it failed.
    """
    queries = [start(spark, settings, kafka, available_now) for start in (streams or STREAMS)]
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, lambda *_: stop.set())
    try:
        while not stop.is_set() and all(q.isActive for q in queries):
            stop.wait(1.0)
    finally:
        log.info("stopping the loader after its current batch")
        if on_stop is not None:
            on_stop()
        stop_between_batches(*queries)
    return queries
