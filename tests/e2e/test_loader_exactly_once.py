"""Exactly once across crashes: the loader runs as its own process and is SIGKILLed mid-stream.

100,000 small records flow into a topic while `hub load run` lands them; the loader is killed
at random points three times and restarted each time, then run to catch-up with `--once`. The
Delta table, read by path, must hold every Kafka record once: the same (partition, offset) set
and the same values.
"""

import random
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.hub_client import unique_topic
from tests.support.loader import LoaderTopic, create_topic, produce_avro, register
from tests.support.loader_process import LoaderProcess, loader_env

pytestmark = pytest.mark.e2e

COUNT = 100_000
KILLS = 3
SCHEMA = {
    "type": "record",
    "name": "Tick",
    "fields": [{"name": "n", "type": "long"}, {"name": "tag", "type": "string"}],
}


def test_killed_and_restarted_loader_lands_each_record_exactly_once(
    api_url: str, admin_key: str, kafka_bootstrap: str, spark: SparkSession, tmp_path: Path
) -> None:
    topic = unique_topic("kill")
    create_topic(kafka_bootstrap, topic, partitions=3)
    schema_id = register(api_url, admin_key, f"{topic}-value", SCHEMA)
    env = {
        **loader_env(tmp_path, api_url, kafka_bootstrap, topic),
        "HUB_LOADER_MAX_OFFSETS_PER_TRIGGER": "15000",
    }
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"kill points drawn with seed {seed}")

    placed: dict[tuple[int, int], int] = {}
    producer = threading.Thread(
        target=_publish_paced, args=(kafka_bootstrap, topic, schema_id, placed), daemon=True
    )
    producer.start()
    location = tmp_path / "warehouse" / "bronze.db" / topic.replace(".", "_")
    for attempt in range(KILLS):
        with LoaderProcess(env, tmp_path / f"run{attempt}.log") as loader:
            # The first kill falls in the first batch (creating the table); the others just
            # after a batch was written, around its checkpoint commit or in the next batch.
            loader.wait_for("landing topics matching" if attempt == 0 else "batch ")
            time.sleep(rng.uniform(0.5, 5.0) if attempt == 0 else rng.uniform(0.0, 6.0))
            loader.kill()
    producer.join(timeout=600)
    assert len(placed) == COUNT, "the producer did not get every record acknowledged"
    landed_before = spark.read.format("delta").load(str(location)).count()
    assert landed_before > 0  # the killed runs did land batches

    with LoaderProcess(env, tmp_path / "final.log", "--once") as loader:
        assert loader.process.wait(timeout=600) == 0, loader.text()[-3000:]

    location = tmp_path / "warehouse" / "bronze.db" / topic.replace(".", "_")
    rows = (
        spark.read.format("delta")
        .load(str(location))
        .select("_hub_partition", "_hub_offset", "n", "tag", "_hub_schema_id")
    )
    landed = [(r[0], r[1], r[2], r[3], r[4]) for r in rows.collect()]
    assert len(landed) == COUNT
    by_position = {(p, o): (n, tag, sid) for p, o, n, tag, sid in landed}
    assert len(by_position) == COUNT  # no record twice
    assert set(by_position) == set(placed)  # no record missing, none invented
    for position, n in placed.items():
        assert by_position[position] == (n, f"t{n % 97}", schema_id)


def test_a_reset_checkpoint_lands_the_topic_again_instead_of_skipping_it(
    spark: SparkSession, loader_topic: Callable[..., LoaderTopic]
) -> None:
    reset = loader_topic("reset", partitions=1)
    schema_id = reset.register(SCHEMA)
    reset.produce(schema_id, SCHEMA, [{"n": n, "tag": "x"} for n in range(30)])
    for _ in range(2):
        reset.land(spark)
        # The operator resets the checkpoint: batch ids restart at 0.
        for path in sorted(reset.settings.checkpoint_dir.glob("hub-bronze*")):
            subprocess.run(["rm", "-rf", str(path)], check=True)
    table = reset.table
    counts = spark.sql(f"SELECT _hub_offset, count(*) AS c FROM {table} GROUP BY 1").collect()
    assert sorted((r["_hub_offset"], r["c"]) for r in counts) == [(n, 2) for n in range(30)]


def _publish_paced(
    bootstrap: str, topic: str, schema_id: int, placed: dict[tuple[int, int], int]
) -> None:
    """Publish COUNT records in chunks over about a minute, so they arrive during the kills."""
    chunk = 2_000
    for start in range(0, COUNT, chunk):
        values = [{"n": n, "tag": f"t{n % 97}"} for n in range(start, start + chunk)]
        positions = produce_avro(bootstrap, topic, schema_id, SCHEMA, values)
        placed.update(zip(positions, (v["n"] for v in values), strict=True))
        time.sleep(1.0)
