"""A broker dies under load: on a 3-node cluster, with a feed of 3 replicas and
`min.insync.replicas=2`, the leader of the feed's partitions is SIGKILLed while clients publish
through the gateway and a connector runs, and started again later. Nothing acknowledged is lost
or doubled, nothing refused goes unexplained, the connector leaves no gap and the loader lands
the topic exactly once."""

import io
import json
import os
import signal
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest
from confluent_kafka import KafkaException, Message
from confluent_kafka.admin import AdminClient, ConfigResource
from pyspark.sql import SparkSession

from hub_kafka.local_cluster import LocalCluster
from hub_kafka.settings import KafkaSettings
from spark_loaders.settings import LoaderSettings
from tests.support.api_server import serve_api
from tests.support.connect import connector_file, running_worker
from tests.support.failover import (
    SCHEMA,
    Answers,
    duplicates,
    leader_of,
    misplaced,
    publish_concurrently,
    topic_ids,
)
from tests.support.hub_client import create_feed, create_key, unique_topic
from tests.support.kafka import read_all
from tests.support.loader import land_once
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

RECORDS = int(os.environ.get("FAILOVER_RECORDS", "20000"))  # 100000: the full-size run
WRITERS = 4
LINES = 300  # log lines the connector carries, a third before, during and after the outage


def test_killing_a_broker_loses_and_doubles_nothing(
    kafka_cluster: LocalCluster,
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    kafka = KafkaSettings(bootstrap_servers=kafka_cluster.bootstrap_servers)
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    with serve_api(
        database_url=database,
        bootstrap_servers=kafka_cluster.bootstrap_servers,
        delivery_timeout_ms=60_000,
    ) as api_url:
        key = create_key(database, team="ticks")
        topic = unique_topic("ticks")
        create_feed(api_url, key, topic=topic, schema=SCHEMA, owner="ticks", partitions=3)
        # Replicated by the cluster's size, with nothing set: the feed and its DLQ alike.
        assert _replication(kafka.bootstrap_servers, topic) == (3, "2")
        assert _replication(kafka.bootstrap_servers, f"{topic}.dlq") == (3, "2")
        log_file = tmp_path / "app.log"
        connector = connector_file(
            tmp_path,
            kind="logfile",
            owner="ticks",
            source={
                "paths": [str(log_file)],
                "format": "json",
                "poll_seconds": 0.2,
                "fields": {"n": {"type": "long", "required": True}},
            },
        )
        _append(log_file, range(0, LINES // 3))
        answers = Answers()
        with running_worker(
            [connector.file],
            database_url=database,
            bootstrap="",
            kafka=kafka.model_copy(update={"delivery_timeout_ms": 60_000}),
        ):
            writers = publish_concurrently(
                api_url, key, topic, writers=WRITERS, records=RECORDS, batch=250, answers=answers
            )
            wait_until(lambda: answers.answered >= RECORDS // 4, timeout_s=300, what="publishing")
            victim = kafka_cluster.node(leader_of(kafka_cluster.bootstrap_servers, topic))
            pid = victim.status().pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            _append(log_file, range(LINES // 3, 2 * LINES // 3))
            wait_until(
                lambda: answers.answered >= RECORDS * 3 // 5,
                timeout_s=300,
                what="publishing with a broker down",
            )
            victim.start()
            _append(log_file, range(2 * LINES // 3, LINES))
            for writer in writers:
                writer.join(timeout=600)
                assert not writer.is_alive(), "a publishing client hung"
            wait_until(
                lambda: (
                    len(read_all(kafka.bootstrap_servers, connector.topic, expected=LINES)) >= LINES
                ),
                timeout_s=180,
                what="the connector's lines in Kafka",
            )

        # Every answer carries a code or a position; every record got one.
        assert answers.uncoded == []
        assert len(answers.stored) + len(answers.refused) == RECORDS
        assert set(answers.stored).isdisjoint(answers.refused)
        # What was acknowledged is in the topic, once, where the answer said.
        topic_ids_at = topic_ids(kafka.bootstrap_servers, topic, expected=len(answers.stored))
        assert duplicates(topic_ids_at) == []
        assert misplaced(answers, topic_ids_at) == {}

        # The connector resumed where it was: no line missing.
        lines = read_all(kafka.bootstrap_servers, connector.topic, expected=LINES)
        assert set(_line_numbers(api_url, lines)) == set(range(LINES))

        # The loader lands the topic exactly once: the table holds each Kafka record once.
        settings = loader_settings.model_copy(
            update={
                "registry_url": api_url,
                "checkpoint_dir": tmp_path / "checkpoints",
                "topic_pattern": topic.replace(".", "[.]"),
                "schema_refresh_seconds": 0.0,
            }
        )
        land_once(spark, settings, kafka)
        rows = spark.sql(
            f"SELECT _hub_partition, _hub_offset, id FROM bronze.{topic.replace('.', '_')}"
        ).collect()
        landed = [((r["_hub_partition"], r["_hub_offset"]), r["id"]) for r in rows]
        assert len(landed) == len(topic_ids_at)
        assert dict(landed) == topic_ids_at


def _replication(bootstrap: str, topic: str) -> tuple[int, str]:
    """Fewest replicas of any partition of `topic`, and its `min.insync.replicas`, once every
    broker knows the new topic (the one asked may not have its metadata yet)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs: list[dict[str, Any]] = []

    def described() -> bool:
        try:
            configs.append(admin.describe_configs([resource])[resource].result(30))
        except KafkaException:
            return False
        return True

    replicas: list[int] = []

    def listed() -> bool:
        # A broker that has not yet applied the topic's metadata lists it with no partitions.
        try:
            metadata = admin.list_topics(topic, timeout=10).topics.get(topic)
        except KafkaException:
            return False
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return False
        replicas.append(min(len(p.replicas) for p in metadata.partitions.values()))
        return True

    wait_until(described, timeout_s=60, what=f"the configuration of {topic}")
    wait_until(listed, timeout_s=60, what=f"the partitions of {topic}")
    return replicas[-1], configs[-1]["min.insync.replicas"].value


def _append(path: Path, numbers: range) -> None:
    with path.open("a") as handle:
        handle.writelines(json.dumps({"n": n}) + "\n" for n in numbers)


def _line_numbers(api_url: str, messages: list[Message]) -> list[int]:
    """`n` of each connector record, decoded with its writer schema from the registry."""
    schemas: dict[int, Any] = {}
    numbers = []
    for message in messages:
        framed = message.value() or b""
        schema_id = int.from_bytes(framed[1:5], "big")
        if schema_id not in schemas:
            answer = httpx.get(f"{api_url}/schemas/ids/{schema_id}", timeout=30)
            schemas[schema_id] = fastavro.parse_schema(json.loads(answer.json()["schema"]))
        value: Any = fastavro.schemaless_reader(io.BytesIO(framed[5:]), schemas[schema_id], None)
        numbers.append(int(value["n"]))
    return numbers
