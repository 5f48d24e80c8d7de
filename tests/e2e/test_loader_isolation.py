"""One bad feed never stops the loader: a poisoned topic is set aside, a registry outage is
retried without quarantining anything, and a deleted topic does not stop the query."""

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from hub_cli.main import app
from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from registry.wire import frame
from spark_loaders.bronze.feed_status import FeedStatusBook
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.bronze.replay import replay
from spark_loaders.runtime.lifecycle import stop_between_batches
from spark_loaders.runtime.metrics import LOADER_METRICS
from spark_loaders.settings import LoaderSettings
from tests.support.hub_client import bearer, unique_topic
from tests.support.loader import create_topic, live_count, produce, produce_avro, register
from tests.support.waiting import wait_until

pytestmark = pytest.mark.e2e

EVENT = {
    "type": "record",
    "name": "Visit",
    "fields": [{"name": "page", "type": "string"}, {"name": "n", "type": "int"}],
}
# A linked list: Avro allows recursion, and the registry accepts it outside topic subjects
# (shared types). Spark cannot turn a recursive schema into columns, so a topic whose records
# carry this writer id, with no value schema of its own to read them as, cannot be landed.
NODE = {
    "type": "record",
    "name": "Node",
    "fields": [
        {"name": "value", "type": "int"},
        {"name": "next", "type": ["null", "Node"], "default": None},
    ],
}
# The fix the owning team registers as the topic's value schema: Node without the recursion.
NODE_VALUE = {"type": "record", "name": "Node", "fields": [{"name": "value", "type": "int"}]}


def _settings(base: LoaderSettings, home: Path, *topics: str, **changes: Any) -> LoaderSettings:
    """Loader settings landing exactly `topics`, with checkpoints of their own."""
    pattern = "|".join(t.replace(".", "\\.") for t in topics)
    return base.model_copy(
        update={
            "checkpoint_dir": home / "checkpoints",
            "topic_pattern": f"^({pattern})$",
            "schema_refresh_seconds": 0.0,
            **changes,
        }
    )


def _land_once(
    spark: SparkSession, settings: LoaderSettings, bootstrap: str
) -> BaseException | None:
    """Run the bronze loader to catch-up; return its failure (None when it landed)."""
    query = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=bootstrap)).start(
        available_now=True
    )
    try:
        query.awaitTermination(600)
    except StreamingQueryException as failure:
        return failure
    return None


def _table(kind: str, topic: str) -> str:
    return f"{kind}.{topic.replace('.', '_')}"


def test_a_poisoned_topic_is_quarantined_whole_while_the_other_topic_lands_in_the_same_batch(
    spark: SparkSession,
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    healthy, poisoned = unique_topic("iso"), unique_topic("iso")
    for topic in (healthy, poisoned):
        create_topic(kafka_bootstrap, topic, partitions=1)
    visit_id = register(api_url, admin_key, f"{healthy}-value", EVENT)
    produce_avro(
        kafka_bootstrap, healthy, visit_id, EVENT, [{"page": "/", "n": n} for n in range(5)]
    )
    node_id = register(api_url, admin_key, f"{poisoned}.node", NODE)
    chain = {"value": 1, "next": {"value": 2, "next": None}}
    placed = produce_avro(kafka_bootstrap, poisoned, node_id, NODE, [chain, {"value": 3}])
    settings = _settings(loader_settings, tmp_path, healthy, poisoned)

    assert _land_once(spark, settings, kafka_bootstrap) is None

    assert live_count(spark, _table("bronze", healthy)) == 5
    assert not spark.catalog.tableExists(_table("bronze", poisoned))
    held = spark.table(_table("quarantine", poisoned)).collect()
    assert sorted((r["_hub_partition"], r["_hub_offset"]) for r in held) == sorted(placed)
    assert {r["_hub_reason_code"] for r in held} == {"LANDING_FAILED"}
    assert "IncompatibleSchemaException" in held[0]["_hub_reason"]
    assert f"hub load replay {poisoned}" in held[0]["_hub_reason"]
    assert {r["_hub_schema_id"] for r in held} == {node_id}

    statuses = {s.topic: s for s in FeedStatusBook.in_checkpoints(settings.checkpoint_dir).list()}
    assert statuses[healthy].state == "landing"
    assert statuses[poisoned].state == "quarantining"
    assert statuses[poisoned].reason_code == "LANDING_FAILED"
    assert statuses[poisoned].batch_id == statuses[healthy].batch_id  # the same micro-batch
    shown = CliRunner().invoke(
        app, ["load", "status"], env={"HUB_LOADER_CHECKPOINT_DIR": str(settings.checkpoint_dir)}
    )
    assert shown.exit_code == 1, shown.output
    assert f"{poisoned}: quarantining" in shown.output and "LANDING_FAILED" in shown.output
    assert f"{healthy}: landing" in shown.output

    # Before a fix, replay keeps the records and says why; after it, lands them once.
    assert replay(spark, settings, poisoned).still_failing == {"LANDING_FAILED": 2}
    register(api_url, admin_key, f"{poisoned}-value", NODE_VALUE)
    for _ in range(2):
        replay(spark, settings, poisoned)
    landed = spark.table(_table("bronze", poisoned)).collect()
    assert sorted(r["value"] for r in landed) == [1, 3]
    assert spark.table(_table("quarantine", poisoned)).count() == 0

    # New records of the topic land now, and its status says so.
    produce_avro(kafka_bootstrap, poisoned, node_id, NODE, [{"value": 4}])
    assert _land_once(spark, settings, kafka_bootstrap) is None
    assert live_count(spark, _table("bronze", poisoned)) == 3
    book = FeedStatusBook.in_checkpoints(settings.checkpoint_dir)
    assert book.get(poisoned).state == "landing"  # type: ignore[union-attr]


def test_undecodable_payloads_are_counted_and_quarantined_while_the_rest_of_the_batch_lands(
    spark: SparkSession,
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    loader_settings: LoaderSettings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = unique_topic("iso")
    create_topic(kafka_bootstrap, topic, partitions=1)
    visit_id = register(api_url, admin_key, f"{topic}-value", EVENT)
    produce_avro(kafka_bootstrap, topic, visit_id, EVENT, [{"page": "/a", "n": 1}])
    # Framed with the topic's own writer id, but no Visit datum: a truncated string.
    broken = produce(kafka_bootstrap, topic, [frame(visit_id, b"\x10/a"), frame(visit_id, b"")])
    produce_avro(kafka_bootstrap, topic, visit_id, EVENT, [{"page": "/b", "n": 2}])
    settings = _settings(loader_settings, tmp_path, topic)
    caplog.set_level(logging.INFO, logger="spark_loaders.bronze.loader")
    table = _table("bronze", topic)

    def metric(name: str, **labels: str) -> float:
        return LOADER_METRICS.registry.get_sample_value(name, {"table": table, **labels}) or 0.0

    assert _land_once(spark, settings, kafka_bootstrap) is None

    assert sorted(r["page"] for r in spark.table(table).collect()) == ["/a", "/b"]
    held = spark.table(_table("quarantine", topic)).collect()
    assert sorted((r["_hub_partition"], r["_hub_offset"]) for r in held) == sorted(broken)
    assert {r["_hub_reason_code"] for r in held} == {"PAYLOAD_UNDECODABLE"}
    assert f"{table} <- 4 records: 2 landed, 2 quarantined" in caplog.text
    # The loader's metrics (served on its health port) count the same.
    assert metric("hub_loader_records_landed_total") == 2
    undecodable = {"reason": "PAYLOAD_UNDECODABLE"}
    assert metric("hub_loader_records_quarantined_total", **undecodable) == 2

    # A batch with nothing undecodable adds no commit to quarantine.
    quarantine_commits = spark.sql(f"DESCRIBE HISTORY {_table('quarantine', topic)}").count()
    produce_avro(kafka_bootstrap, topic, visit_id, EVENT, [{"page": "/c", "n": 3}])
    assert _land_once(spark, settings, kafka_bootstrap) is None
    assert live_count(spark, table) == 3
    assert f"{table} <- 1 records: 1 landed" in caplog.text
    history = spark.sql(f"DESCRIBE HISTORY {_table('quarantine', topic)}").count()
    assert history == quarantine_commits
    assert metric("hub_loader_records_landed_total") == 3
    assert metric("hub_loader_records_quarantined_total", **undecodable) == 2


class _FlakyRegistry:
    """A loopback HTTP proxy in front of the real registry that can answer 503 for a while."""

    def __init__(self, upstream: str) -> None:
        self.failures_left = 0  # requests still to refuse; -1: refuse all
        self.refused = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if proxy.failures_left != 0:
                    proxy.failures_left -= 1 if proxy.failures_left > 0 else 0
                    proxy.refused += 1
                    self._answer(
                        503, b'{"error_code": 50301, "message": "down"}', {"Retry-After": "1"}
                    )
                    return
                answer = httpx.get(f"{upstream}{self.path}", headers=dict(self.headers))
                self._answer(answer.status_code, answer.content, {})

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    @contextmanager
    def running(self) -> Iterator["_FlakyRegistry"]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()


def test_a_registry_outage_is_retried_not_quarantined_and_everything_lands_once_after_it(
    spark: SparkSession,
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    topic = unique_topic("outage")
    create_topic(kafka_bootstrap, topic, partitions=2)
    schema_id = register(api_url, admin_key, f"{topic}-value", EVENT)
    placed = produce_avro(
        kafka_bootstrap, topic, schema_id, EVENT, [{"page": "/a", "n": n} for n in range(10)]
    )
    with _FlakyRegistry(api_url).running() as registry:
        # An outage that outlasts the retries fails the batch: nothing lands, nothing is set
        # aside, and the checkpoint still holds the batch.
        registry.failures_left = -1
        outlasting = _settings(
            loader_settings, tmp_path, topic, registry_url=registry.url, registry_retry_seconds=2.0
        )
        failure = _land_once(spark, outlasting, kafka_bootstrap)
        assert failure is not None and "RegistryUnavailable" in str(failure)
        assert registry.refused > 1  # retried before giving up
        assert not spark.catalog.tableExists(_table("bronze", topic))
        assert not spark.catalog.tableExists(_table("quarantine", topic))
        status = FeedStatusBook.in_checkpoints(outlasting.checkpoint_dir).get(topic)
        assert status is None or status.state == "landing"

        # The registry comes back after a short blip: the restarted query redoes the batch.
        registry.failures_left, registry.refused = 2, 0
        back = outlasting.model_copy(update={"registry_retry_seconds": 60.0})
        assert _land_once(spark, back, kafka_bootstrap) is None
        assert registry.refused == 2

    rows = spark.table(_table("bronze", topic)).select("_hub_partition", "_hub_offset").collect()
    assert sorted((r[0], r[1]) for r in rows) == sorted(placed)  # each record once
    assert not spark.catalog.tableExists(_table("quarantine", topic))


def test_deleting_a_topic_while_the_loader_runs_does_not_stop_the_other_topics(
    spark: SparkSession,
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    loader_settings: LoaderSettings,
    tmp_path: Path,
) -> None:
    doomed, kept = unique_topic("gone"), unique_topic("gone")
    ids = {}
    for topic in (doomed, kept):
        create_topic(kafka_bootstrap, topic, partitions=2)
        ids[topic] = register(api_url, admin_key, f"{topic}-value", EVENT)
        produce_avro(kafka_bootstrap, topic, ids[topic], EVENT, [{"page": "/", "n": 1}] * 3)
    settings = _settings(loader_settings, tmp_path, doomed, kept)
    kafka = KafkaSettings(bootstrap_servers=kafka_bootstrap)

    query = BronzeLoader(spark, settings, kafka).start()
    try:
        for topic in (doomed, kept):
            wait_until(
                lambda t=topic: live_count(spark, _table("bronze", t)) == 3,  # type: ignore[misc]
                timeout_s=120,
                what=f"{topic} in bronze",
            )
        # The owning team deletes its feed: the topic, then its subject.
        assert TopicAdmin(kafka).delete(doomed)
        subject = f"{api_url}/subjects/{doomed}-value"
        assert httpx.delete(subject, headers=bearer(admin_key)).status_code == 200
        assert httpx.delete(f"{subject}?permanent=true", headers=bearer(admin_key)).is_success
        wait_until(lambda: not TopicAdmin(kafka).exists(doomed), timeout_s=60, what="deletion")

        produce_avro(kafka_bootstrap, kept, ids[kept], EVENT, [{"page": "/", "n": 2}] * 4)
        wait_until(
            lambda: live_count(spark, _table("bronze", kept)) == 7,
            timeout_s=120,
            what="records of the other topic after the deletion",
        )
        assert query.isActive and query.exception() is None
    finally:
        stop_between_batches(query)
    assert live_count(spark, _table("bronze", doomed)) == 3  # what was landed stays
