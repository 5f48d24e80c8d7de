"""`python -m spark_loaders` / `spark-submit spark_loaders/__main__.py`: run the loader.

With `--submitted` the Spark session comes from spark-submit (master, jars and metastore as
the cluster configures them); otherwise it is built from HUB_LOADER_* as `hub load run` does.
`--once` lands what is in Kafka now and exits.
"""

import argparse
import logging
import sys
from contextlib import AbstractContextManager

from pyspark.sql import SparkSession

from hub_core.config_file import apply_config_file
from hub_core.health import HealthServer
from hub_kafka.settings import KafkaSettings
from spark_loaders.control.status import serve_status
from spark_loaders.runner.streams import run_streams
from spark_loaders.runtime.metrics import LOADER_METRICS
from spark_loaders.services.session import SAFE_CONF, lock_down, spark_session
from spark_loaders.settings import LoaderSettings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="spark_loaders", description=__doc__)
    parser.add_argument("--once", action="store_true", help="catch up, then exit")
    parser.add_argument("--submitted", action="store_true", help="use spark-submit's session")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    apply_config_file()  # HUB_CONFIG_FILE, as `hub load run` reads it
    settings = LoaderSettings()
    health = HealthServer(
        settings.health_host, settings.health_port, name="loader", metrics=LOADER_METRICS.registry
    )
    with health, _session(settings, submitted=args.submitted) as spark:
        status = serve_status(health, settings, spark)
        queries = run_streams(
            spark, settings, KafkaSettings(), available_now=args.once, health=health
        )
        status.stop()
        failures = [(q.name, q.exception()) for q in queries if q.exception() is not None]
    for name, error in failures:
        logging.getLogger("spark_loaders").error("%s failed: %s", name, error)
    return 1 if failures else 0


def _session(settings: LoaderSettings, *, submitted: bool) -> AbstractContextManager[SparkSession]:
    if submitted:
        # A SparkSession is a context manager of its own: leaving the block stops it.
        builder = SparkSession.builder.appName("hub-loader").enableHiveSupport()
        for key, value in SAFE_CONF.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        lock_down(session)  # when spark-submit's session existed before the builder ran
        return session
    return spark_session(settings)


if __name__ == "__main__":
    sys.exit(main())
