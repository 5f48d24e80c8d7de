"""Producing Confluent-framed records straight to Kafka and running the bronze loader in tests."""

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import httpx
from confluent_kafka import Producer
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from registry.wire import frame
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import bearer, unique_topic

REGISTRY_MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


def create_topic(bootstrap: str, topic: str, *, partitions: int = 2) -> None:
    TopicAdmin(KafkaSettings(bootstrap_servers=bootstrap)).create(
        topic, partitions=partitions, config={}
    )


def register(api_url: str, admin_key: str, subject: str, schema: dict[str, Any]) -> int:
    """Register `schema` under `subject`; return its id (fails the test when refused)."""
    response = httpx.post(
        f"{api_url}/subjects/{subject}/versions",
        json={"schema": json.dumps(schema)},
        headers={**bearer(admin_key), "Content-Type": REGISTRY_MEDIA_TYPE},
    )
    assert response.status_code == 200, response.text
    schema_id: int = response.json()["id"]
    return schema_id


def encode(schema: dict[str, Any], value: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, fastavro.parse_schema(schema), value)
    return buffer.getvalue()


def produce(
    bootstrap: str, topic: str, values: list[bytes], *, keys: list[bytes] | None = None
) -> list[tuple[int, int]]:
    """Produce raw values (acks=all); return the (partition, offset) of each, in order."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20, "enable.idempotence": True}
    )
    placed: dict[int, tuple[int, int]] = {}

    def report(index: int) -> Any:
        def done(err: Any, msg: Any) -> None:
            assert err is None, err
            placed[index] = (msg.partition(), msg.offset())

        return done

    for index, value in enumerate(values):
        key = keys[index] if keys else str(index).encode()
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=report(index))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    return [placed[i] for i in range(len(values))]


def produce_avro(
    bootstrap: str, topic: str, schema_id: int, schema: dict[str, Any], values: list[dict[str, Any]]
) -> list[tuple[int, int]]:
    return produce(bootstrap, topic, [frame(schema_id, encode(schema, v)) for v in values])  # type: ignore[arg-type]


def land_once(spark: SparkSession, settings: LoaderSettings, kafka: KafkaSettings) -> None:
    """Run the bronze loader until it has landed what the topics hold now."""
    query = BronzeLoader(spark, settings, kafka).start(available_now=True)
    query.awaitTermination(600)
    assert query.exception() is None


@dataclass(frozen=True, slots=True)
class LoaderTopic:
    """A new topic, landed by a loader of its own (settings with their own checkpoints)."""

    name: str
    settings: LoaderSettings
    kafka: KafkaSettings
    api_url: str
    admin_key: str

    @classmethod
    def create(
        cls,
        domain: str,
        *,
        partitions: int,
        base: LoaderSettings,
        home: Path,
        api_url: str,
        admin_key: str,
        bootstrap: str,
    ) -> "LoaderTopic":
        name = unique_topic(domain)
        create_topic(bootstrap, name, partitions=partitions)
        # Only this topic, with checkpoints of its own, and schemas looked up at every batch.
        settings = base.model_copy(
            update={
                "checkpoint_dir": home / "checkpoints",
                "topic_pattern": name.replace(".", "\\."),
                "schema_refresh_seconds": 0.0,
            }
        )
        return cls(name, settings, KafkaSettings(bootstrap_servers=bootstrap), api_url, admin_key)

    @property
    def table(self) -> str:
        return f"bronze.{self.name.replace('.', '_')}"

    @property
    def quarantine(self) -> str:
        return f"quarantine.{self.name.replace('.', '_')}"

    def register(self, schema: dict[str, Any], *, subject: str | None = None) -> int:
        """Register `schema` under `subject` (default: the topic's value subject)."""
        return register(self.api_url, self.admin_key, subject or f"{self.name}-value", schema)

    def produce(
        self, schema_id: int, schema: dict[str, Any], values: list[dict[str, Any]]
    ) -> list[tuple[int, int]]:
        return produce_avro(self.kafka.bootstrap_servers, self.name, schema_id, schema, values)

    def land(self, spark: SparkSession) -> None:
        land_once(spark, self.settings, self.kafka)


def live_count(spark: SparkSession, table: str) -> int:
    """Rows in `table` as this session reads it now, 0 before the loader has created it.

    A running loader may change the table's schema (type widening) between this query's
    analysis and its execution; Delta then refuses the query, and it is asked again.
    """
    for _ in range(5):
        if not spark.catalog.tableExists(table):
            return 0
        try:
            return int(spark.sql(f"SELECT count(*) FROM {table}").collect()[0][0])
        except AnalysisException as error:
            if "DELTA_SCHEMA_CHANGE_SINCE_ANALYSIS" not in f"{error.getCondition()} {error}":
                raise
    raise AssertionError(f"{table} kept changing its schema while being counted")


def compilations(spark: SparkSession) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())
