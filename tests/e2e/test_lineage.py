"""Lineage end to end: change events and a published record landed in bronze and silver, and a
real PostgreSQL CDC run through bronze, silver and gold, then traced both ways through the
ledger entries of their Delta commits (docs/lineage.md)."""

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import yaml
from confluent_kafka import KafkaException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from sqlalchemy import Engine, select

from catalog.lineage import LineageStore, LineageSync
from catalog.tables import LineageCommitRow
from hub_core.database import create_database_engine
from hub_kafka.settings import KafkaSettings
from migrations import migrate
from spark_loaders.bronze.loader import BronzeLoader
from spark_loaders.bronze.replay import replay
from spark_loaders.control.row_lookup import row_position
from spark_loaders.runner.downstream import build_model
from spark_loaders.settings import LoaderSettings
from spark_loaders.silver.changes import ChangelogSpec
from spark_loaders.silver.loader import SilverLoader
from spark_loaders.tables.lineage import USER_METADATA_CONF
from spark_loaders.warehouse.build import WarehouseBuilder
from spark_loaders.warehouse.model import parse_model
from tests.support.api_server import serve_api
from tests.support.cdc import CdcEnvironment, Event, libpq_url, wait_for
from tests.support.hub_client import bearer, create_feed, create_key, unique_topic
from tests.support.loader import LoaderTopic, land_once

pytestmark = pytest.mark.e2e

SOURCE = {
    "type": "record",
    "name": "Source",
    "fields": [
        {"name": "ts_ms", "type": "long"},
        {"name": "db", "type": "string"},
        {"name": "table", "type": "string"},
        {"name": "txId", "type": ["null", "long"], "default": None},
        {"name": "lsn", "type": ["null", "long"], "default": None},
    ],
}
ROW = {
    "type": "record",
    "name": "Row",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "shop.lineage",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Row"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "source", "type": SOURCE},
    ],
}


def _change(op: str, id_: int, name: str | None, *, lsn: int, tx: int) -> dict[str, Any]:
    row = {"id": id_, "name": name}
    return {
        "before": row if op in ("u", "d") else None,
        "after": None if op == "d" else row,
        "op": op,
        "ts_ms": lsn,
        "source": {"ts_ms": lsn, "db": "shop", "table": "customers", "txId": tx, "lsn": lsn},
    }


def _index(tmp_path: Path) -> Engine:
    url = f"sqlite:///{tmp_path / 'lineage.db'}"
    migrate.upgrade(url)
    return create_database_engine(url)


def _replay_last_batch(checkpoint: Path) -> None:
    """As if the loader was killed after its Delta commit and before its checkpoint's."""
    commits = sorted((checkpoint / "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    commits[-1].unlink()
    (commits[-1].parent / f".{commits[-1].name}.crc").unlink(missing_ok=True)


def _entries(engine: Engine, table: str) -> list[int | None]:
    """The batch ids of the table's indexed ledger entries."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(LineageCommitRow.batch_id).where(LineageCommitRow.table_name == table)
        ).all()
    return sorted((r[0] for r in rows), key=lambda b: -1 if b is None else b)


def test_changes_trace_from_row_to_lsn_and_from_lsn_to_every_version_after_a_replay(
    spark: SparkSession,
    loader_topic: Any,
    tmp_path: Path,
) -> None:
    topic: LoaderTopic = loader_topic("shop", partitions=1)
    schema_id = topic.register(ENVELOPE)
    settings: LoaderSettings = topic.settings
    first = [
        _change("c", 1, "ann", lsn=100, tx=1),
        _change("c", 2, "bob", lsn=110, tx=1),
        _change("u", 1, "anne", lsn=120, tx=2),
    ]
    second = [_change("d", 2, "bob", lsn=130, tx=3), _change("c", 3, "cy", lsn=140, tx=4)]
    topic.produce(schema_id, ENVELOPE, first)
    topic.land(spark)
    topic.produce(schema_id, ENVELOPE, second)
    topic.land(spark)
    _replay_last_batch(Path(str(settings.checkpoint_dir)) / "hub-bronze")
    topic.land(spark)  # the replayed batch: Delta skips it, and its ledger entry with it

    suffix = topic.table.split(".", 1)[1]
    spec = ChangelogSpec(topic.table, f"silver.{suffix}", ("id",))
    silver = SilverLoader(spark, spec, checkpoint_dir=str(settings.checkpoint_dir))
    silver.start(available_now=True).awaitTermination()
    _replay_last_batch(Path(str(settings.checkpoint_dir)) / f"hub-silver-{suffix}")
    silver.start(available_now=True).awaitTermination()  # a no-op MERGE commits nothing

    engine = _index(tmp_path)
    LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
    store = LineageStore(engine)

    # One entry per landed batch, none for the replay.
    assert _entries(engine, topic.table) == [0, 1]
    rows = spark.table(topic.table).select("_hub_partition", "_hub_offset", "source.lsn").collect()
    assert len(rows) == 5
    for row in rows:  # every row traces back to its LSN
        (hit,) = store.bronze_holding(
            table=topic.table, partition=row["_hub_partition"], offset=row["_hub_offset"]
        )
        assert hit.lsn is not None and hit.lsn[0] <= row["lsn"] <= hit.lsn[1]
    for lsn in (100, 120, 130, 140):  # every LSN traces forward to bronze, history and current
        # Other tests' change events in the shared warehouse may carry the same LSNs.
        hits = [h for h in store.bronze_by_lsn(lsn) if h.table == topic.table]
        assert len(hits) == 1
        tables = {v.table for v in store.downstream([(hits[0].table, hits[0].version)])}
        assert tables == {spec.history_table, spec.current_table}, lsn


# The same envelope with a Row lacking `name`: written with it, a change cannot be read as
# ENVELOPE (whose `name` has no default) and is quarantined, until a version with a default
# for `name` is registered and `hub load replay` lands it.
ROW_WITHOUT_NAME = {"type": "record", "name": "Row", "fields": [{"name": "id", "type": "long"}]}
ENVELOPE_WITHOUT_NAME = {
    **ENVELOPE,
    "fields": [
        {"name": "before", "type": ["null", ROW_WITHOUT_NAME], "default": None},
        *ENVELOPE["fields"][1:],
    ],
}
ENVELOPE_NAME_DEFAULT = {
    **ENVELOPE,
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {**ROW, "fields": [ROW["fields"][0], {**ROW["fields"][1], "default": None}]},
            ],
            "default": None,
        },
        *ENVELOPE["fields"][1:],
    ],
}


def test_a_replayed_change_traces_from_its_row_to_its_lsn_and_on_to_silver_and_gold(
    spark: SparkSession,
    loader_topic: Any,
    tmp_path: Path,
) -> None:
    topic: LoaderTopic = loader_topic("shop", partitions=1)
    schema_id = topic.register(ENVELOPE)
    settings: LoaderSettings = topic.settings
    unreadable = topic.register(ENVELOPE_WITHOUT_NAME, subject=f"{topic.name}.row")
    topic.produce(schema_id, ENVELOPE, [_change("c", 1, "ann", lsn=100, tx=1)])
    gone = _change("c", 2, None, lsn=110, tx=2)
    gone["after"] = {"id": 2}
    ((partition, offset),) = topic.produce(unreadable, ENVELOPE_WITHOUT_NAME, [gone])
    topic.produce(schema_id, ENVELOPE, [_change("u", 1, "anne", lsn=120, tx=3)])
    topic.land(spark)
    assert spark.table(topic.quarantine).count() == 1

    topic.register(ENVELOPE_NAME_DEFAULT)
    held = spark.table(topic.quarantine).collect()
    assert replay(spark, settings, topic.name).landed == 1
    replayed = _newest(spark, topic.table)
    # As if that replay stopped before clearing the quarantine: run again, nothing twice.
    spark.createDataFrame(held, spark.table(topic.quarantine).schema).write.format("delta").mode(
        "append"
    ).saveAsTable(topic.quarantine)
    assert replay(spark, settings, topic.name).landed == 1
    assert _newest(spark, topic.table) == replayed
    assert spark.table(topic.quarantine).count() == 0
    assert spark.conf.get(USER_METADATA_CONF, None) is None  # the loader's session has none

    suffix = topic.table.split(".", 1)[1]
    spec = ChangelogSpec(topic.table, f"silver.{suffix}", ("id",))
    SilverLoader(spark, spec, checkpoint_dir=str(settings.checkpoint_dir)).start(
        available_now=True
    ).awaitTermination()
    dimension = f"gold.dim_{suffix}"
    model = {"dimensions": [{"name": suffix, "source": topic.name, "business_key": ["id"],
                             "attributes": ["name"]}]}  # fmt: skip
    WarehouseBuilder(spark, parse_model(model, source="test.yaml"), source="test.yaml").build()

    engine = _index(tmp_path)
    LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
    store = LineageStore(engine)

    # One entry for the stream's batch, one for the replay (no batch), none for its rerun.
    assert _entries(engine, topic.table) == [None, 0]
    # The quarantine commit of the batch names the offset it set aside, exactly; clearing the
    # quarantine after the replay adds no entry.
    assert _entries(engine, topic.quarantine) == [0]
    held_by = store.bronze_holding(topic=topic.name, partition=partition, offset=offset)
    (aside,) = [h for h in held_by if h.table == topic.quarantine]
    assert (aside.version, aside.first_offset, aside.last_offset) == (0, offset, offset)
    # The stream's bronze commit spans the offset but never held it: the quarantine commit
    # and the replay's are all the position names.
    assert {(h.table, h.version) for h in held_by} == {
        (topic.quarantine, 0),
        (topic.table, replayed),
    }
    # The replayed row traces to its offset and LSN in the replay's commit...
    row = spark.table(topic.table).where("after.id = 2").collect()
    assert [(r["_hub_partition"], r["_hub_offset"]) for r in row] == [(partition, offset)]
    hits = store.bronze_holding(table=topic.table, partition=partition, offset=offset)
    (replay_hit,) = [h for h in hits if h.version == replayed]
    assert (replay_hit.first_offset, replay_hit.last_offset) == (offset, offset)
    assert replay_hit.lsn == (110, 110) and replay_hit.tx == (2, 2)
    # ...and its LSN forward to that bronze version and the silver and gold versions after it.
    assert replayed in [h.version for h in store.bronze_by_lsn(110) if h.table == topic.table]
    tables = {v.table for v in store.downstream([(topic.table, replayed)])}
    assert tables == {spec.history_table, spec.current_table, dimension}
    members = spark.table(dimension).where("id = 2").count()
    assert members == 1


def test_published_records_trace_to_the_bronze_version_that_landed_them_by_their_request_id(
    spark: SparkSession,
    loader_settings: LoaderSettings,
    kafka_bootstrap: str,
    api_url: str,
    team_key: Callable[[str], str],
    tmp_path: Path,
) -> None:
    key = team_key("lineage")
    topic = unique_topic("lineage")
    visit = {"type": "record", "name": "Visit", "fields": [{"name": "page", "type": "string"}]}
    create_feed(api_url, key, topic=topic, schema=visit, owner="lineage", partitions=1)
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path / "checkpoints",
            "topic_pattern": re.escape(topic),
            "schema_refresh_seconds": 0.0,
        }
    )
    # One loader for both batches: the first is the first it sees of the topic (its request
    # spans are recorded after its records), the second one of a topic known to carry them.
    loader = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap))
    table = f"bronze.{topic.replace('.', '_')}"
    engine = _index(tmp_path)
    for batch, pages in enumerate((["/a", "/b"], ["/c"])):
        request_id = f"req-{uuid.uuid4().hex[:12]}"
        answer = httpx.post(
            f"{api_url}/v1/feeds/{topic}/records",
            json={"records": [{"value": {"page": page}} for page in pages]},
            headers={**bearer(key), "X-Request-Id": request_id, "Idempotency-Key": f"v{batch}"},
            timeout=30,
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["X-Request-Id"] == request_id
        loader.start(available_now=True).awaitTermination()

        landed = (
            spark.table(table)
            .where(F.col("_hub_request_id") == request_id)
            .select("_hub_idempotency_key", "_hub_offset")
            .collect()
        )
        assert [r["_hub_idempotency_key"] for r in landed] == [f"v{batch}"] * len(pages)
        LineageSync(engine, Path(str(settings.warehouse_dir)), min_interval_s=0).sync()
        (hit,) = LineageStore(engine).bronze_by_request(request_id)
        offsets = [r["_hub_offset"] for r in landed]
        assert (hit.table, hit.first_offset, hit.last_offset) == (table, min(offsets), max(offsets))
        # The version named is the one that landed the records.
        assert _holding(spark, table, hit.version - 1, offsets) == 0
        assert _holding(spark, table, hit.version, offsets) == len(pages)


def _holding(spark: SparkSession, table: str, version: int, offsets: list[int]) -> int:
    """How many of the offsets version `version` of the table holds (none before it existed)."""
    if version < 0:
        return 0
    rows = spark.read.option("versionAsOf", version).table(table)
    return rows.where(F.col("_hub_offset").isin(offsets)).count()


def _execute(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _changes(cdc: CdcEnvironment, topic: str) -> list[Event]:
    """The topic's change events so far (tombstones left out); [] before it exists."""
    try:
        return [e for e in cdc.read(topic) if e.value is not None]
    except (KafkaException, KeyError):
        return []


def _tables(answer: dict[str, Any]) -> dict[str, list[int]]:
    """The versions of a lineage answer, by table."""
    found: dict[str, list[int]] = {}
    for version in answer["versions"]:
        found.setdefault(version["table"], []).append(version["version"])
    return found


def _assert_traces(
    spark: SparkSession,
    http: httpx.Client,
    events: list[Event],
    *,
    bronze: str,
    silver: ChangelogSpec,
    dimension: str,
) -> None:
    """Every row traces back to its LSN, and every LSN forward to bronze, silver and the first
    gold version built from it, which holds the change."""
    rows = spark.table(bronze).where("source.lsn IS NOT NULL")
    landed = rows.select("_hub_partition", "_hub_offset", "source.lsn").collect()
    assert len(landed) == len(events)
    for row in landed:
        params = {"table": bronze, "partition": row["_hub_partition"], "offset": row["_hub_offset"]}
        answer = http.get("/v1/lineage/rows", params=params)
        assert answer.status_code == 200, answer.text
        assert answer.json()["lsn"] == row["lsn"]
    # A dimension row, found by its surrogate key, traces to the change that started its
    # version: a bronze record whose row image the dimension row holds, and its LSN.
    surrogate = f"{dimension.removeprefix('gold.dim_')}_key"
    members = spark.sql(f"SELECT * FROM {dimension} WHERE {surrogate} <> -1").collect()
    assert members
    for member in members:
        found = row_position(spark, dimension, {surrogate: member[surrogate]})
        change = (
            spark.table(found["bronze_table"])
            .where(F.col("_hub_partition") == found["partition"])
            .where(F.col("_hub_offset") == found["offset"])
            .select("after.id", "after.name", "after.country", "source.lsn")
            .first()
        )
        assert change is not None
        assert tuple(change)[:3] == (member["id"], member["name"], member["country"])
        params = {"table": found["bronze_table"], "partition": found["partition"],
                  "offset": found["offset"]}  # fmt: skip
        answer = http.get("/v1/lineage/rows", params=params)
        assert answer.status_code == 200, answer.text
        assert answer.json()["lsn"] == change["lsn"]
    # Silver rows carry their source LSN, which leads to the bronze commit that landed it.
    for row in spark.table(silver.current_table).select("_hub_lsn").collect():
        answer = http.get("/v1/lineage/positions", params={"lsn": row["_hub_lsn"]})
        assert answer.status_code == 200, answer.text
        assert silver.current_table in _tables(answer.json())

    for event in events:
        assert event.value is not None and event.key is not None
        answer = http.get("/v1/lineage/positions", params={"lsn": event.value["source"]["lsn"]})
        assert answer.status_code == 200, answer.text
        tables = _tables(answer.json())
        assert {bronze, silver.history_table, silver.current_table, dimension} <= set(tables)
        first = min(tables[dimension])
        members = spark.sql(
            f"SELECT id, name, country, is_current FROM {dimension} VERSION AS OF {first}"
        ).collect()
        key = event.key["id"]
        if event.value["op"] == "d":
            assert not [m for m in members if m["id"] == key and m["is_current"]], event
        else:
            after = event.value["after"]
            wanted = (after["id"], after["name"], after["country"])
            assert wanted in {(m["id"], m["name"], m["country"]) for m in members}, event


def test_a_cdc_run_traces_rows_to_lsns_and_lsns_to_gold_versions_after_a_replay(
    spark: SparkSession,
    loader_settings: LoaderSettings,
    kafka_bootstrap: str,
    postgres_database: str,
    tmp_path: Path,
) -> None:
    dsn = libpq_url(postgres_database)
    _execute(
        dsn,
        "CREATE TABLE customers (id bigint PRIMARY KEY, name text, country text)",
        "INSERT INTO customers VALUES (1, 'Ann', 'DE'), (2, 'Bo', 'SE')",
    )
    cdc = CdcEnvironment(tmp_path, kafka_bootstrap)
    name = f"lin{cdc.suffix}"
    topic = f"cdc.{name}.public.customers"
    bronze = f"bronze.{topic.replace('.', '_')}"
    spec = ChangelogSpec(bronze, bronze.replace("bronze.", "silver.", 1), ("id",))
    dimension = f"gold.dim_customer_{cdc.suffix}"
    model = tmp_path / "model.yaml"
    model.write_text(
        yaml.safe_dump(
            {
                "dimensions": [
                    {"name": f"customer_{cdc.suffix}", "source": topic, "business_key": ["id"],
                     "attributes": ["name", "country"]},
                ]
            }
        )
    )  # fmt: skip
    warehouse = Path(str(loader_settings.warehouse_dir))
    checkpoints = tmp_path / "checkpoints"
    # The connector registers its schemas in this API's database; the API reads the loader's
    # tables for lineage, and the loader reads writer schemas from it.
    with (
        serve_api(
            database_url=cdc.registry_url,
            bootstrap_servers=kafka_bootstrap,
            api={"lineage_warehouse_dir": warehouse},
        ) as url,
        httpx.Client(
            base_url=url, headers=bearer(create_key(cdc.registry_url, team=None)), timeout=60
        ) as http,
        cdc.running(cdc.connector_file(name, dsn, ["public.customers"]), dsn),
    ):
        settings = loader_settings.model_copy(
            update={
                "registry_url": url,
                "checkpoint_dir": checkpoints,
                "topic_pattern": re.escape(topic),
                "schema_refresh_seconds": 0.0,
            }
        )

        def land_and_build() -> None:
            land_once(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap))
            build_model(spark, settings, model).raise_first()

        wait_for(lambda: len(_changes(cdc, topic)) == 2, timeout_s=90, what="the snapshot")
        _execute(
            dsn,
            "INSERT INTO customers VALUES (3, 'Cy', 'FR')",
            "UPDATE customers SET country = 'FR' WHERE id = 1",
        )
        wait_for(lambda: len(_changes(cdc, topic)) == 4, timeout_s=60, what="the first changes")
        land_and_build()
        _execute(
            dsn,
            "UPDATE customers SET name = 'Bob' WHERE id = 2",
            "DELETE FROM customers WHERE id = 3",
            "INSERT INTO customers VALUES (4, 'Di', 'NO')",
        )
        wait_for(lambda: len(_changes(cdc, topic)) == 7, timeout_s=60, what="the next changes")
        land_and_build()
        events = _changes(cdc, topic)
        assert [e.value["op"] for e in events if e.value] == ["r", "r", "c", "u", "u", "d", "c"]
        _assert_traces(spark, http, events, bronze=bronze, silver=spec, dimension=dimension)

        engine = _index(tmp_path)
        sync = LineageSync(engine, warehouse, min_interval_s=0)
        sync.sync()
        tables = (bronze, spec.history_table, spec.current_table, dimension)
        before = {t: _commits(engine, t) for t in tables}
        assert _entries(engine, bronze) == [0, 1]
        kinds = _kinds(engine, dimension)
        assert kinds and set(kinds) == {"gold"}

        # The loader is killed after its Delta commits and before its checkpoints' commits:
        # the rerun replays both batches, and nothing is landed or recorded twice.
        _replay_last_batch(checkpoints / "hub-bronze")
        _replay_last_batch(checkpoints / f"hub-silver-{spec.silver_prefix.split('.')[-1]}")
        land_and_build()
        sync.sync()
        assert {t: _commits(engine, t) for t in tables} == before
        _assert_traces(spark, http, events, bronze=bronze, silver=spec, dimension=dimension)
    cdc.close()


def _commits(engine: Engine, table: str) -> list[int]:
    """The versions of the table's indexed ledger entries."""
    with engine.connect() as connection:
        rows = connection.execute(
            select(LineageCommitRow.version).where(LineageCommitRow.table_name == table)
        ).all()
    return sorted(r[0] for r in rows)


def _kinds(engine: Engine, table: str) -> list[str]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(LineageCommitRow.kind).where(LineageCommitRow.table_name == table)
        ).all()
    return [r[0] for r in rows]


def _newest(spark: SparkSession, table: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY {table} LIMIT 1").first()["version"])  # type: ignore[index]
