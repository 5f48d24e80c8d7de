"""Spark loaders: PySpark Structured Streaming from Kafka topics into Delta tables.

The only hub package that imports PySpark.
"""

from spark_loaders.bronze import BronzeLoader
from spark_loaders.lifecycle import stop_between_batches
from spark_loaders.session import build_session, spark_session
from spark_loaders.settings import LoaderSettings

__all__ = [
    "BronzeLoader",
    "LoaderSettings",
    "build_session",
    "spark_session",
    "stop_between_batches",
]
