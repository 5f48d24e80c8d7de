"""Tables on a local file system are read through the hub's Delta log store
(jvm/delta-log-store): it lists a table's log exactly as Delta's own store does, from any
version, however many older files the folder holds."""

from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from spark_loaders.services.session import LOCAL_LOG_STORE

pytestmark = pytest.mark.integration


def _listed(spark: SparkSession, store: Any, log: Path, first: str) -> list[str]:
    jvm: Any = spark.sparkContext._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    start = jvm.org.apache.hadoop.fs.Path(str(log / first))
    return [str(status.getPath().getName()) for status in store.listFrom(start, conf)]


def test_a_local_tables_log_is_listed_by_the_hubs_store_as_delta_lists_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    location = tmp_path / "bronze.db" / "orders"
    for batch in range(12):  # a checkpoint at version 10
        spark.range(batch, batch + 1).write.format("delta").mode("append").save(str(location))
    log = location / "_delta_log"
    # Files sorting before the log's commits, which Delta skips by name, as it skips the older
    # commits a checkpoint covers.
    for old in range(200):
        (log / f".0_older_{old:03d}.json").write_text("")
    jvm: Any = spark.sparkContext._jvm
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(
        spark._jsparkSession, str(location)
    )
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    # Delta asks with qualified paths; a path without a scheme gets its default store.
    delegate = delta_log.store().getDelegate(jvm.org.apache.hadoop.fs.Path(log.as_uri()))
    hubs = jvm.org.integrationhub.delta.NameFirstLogStore(conf)
    deltas = jvm.io.delta.storage.HDFSLogStore(conf)

    # The session's tables on file: paths go through the hub's store.
    assert delegate.logStoreImpl().getClass().getName() == LOCAL_LOG_STORE
    for first in ("00000000000000000000.json", "00000000000000000010.checkpoint.parquet", "z"):
        assert _listed(spark, hubs, log, first) == _listed(spark, deltas, log, first)
    from_checkpoint = _listed(spark, hubs, log, "00000000000000000010.checkpoint.parquet")
    assert "00000000000000000011.json" in from_checkpoint
    assert not any(name.startswith(".") for name in from_checkpoint)
    assert spark.read.format("delta").load(str(location)).count() == 12


def test_a_folder_without_a_log_is_still_no_delta_table_as_with_deltas_store(
    spark: SparkSession, tmp_path: Path
) -> None:
    (tmp_path / "not_a_table").mkdir()

    with pytest.raises(AnalysisException, match=r"DELTA_TABLE_NOT_FOUND"):
        spark.read.format("delta").load(str(tmp_path / "not_a_table")).count()
