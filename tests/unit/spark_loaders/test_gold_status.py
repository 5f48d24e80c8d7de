"""Gold table statuses: two processes recording their own tables in one file lose none of each
other's entries (the loader's passes and a `hub warehouse build` beside them)."""

import multiprocessing
from multiprocessing.synchronize import Barrier
from pathlib import Path

from spark_loaders.types import GoldState
from spark_loaders.warehouse.status import GoldStatusBook

TABLES = 100


def _record_all(path: Path, writer: str, start: Barrier) -> None:
    book = GoldStatusBook(path)
    start.wait(60)  # both write at once
    for n in range(TABLES):
        book.record(f"gold.{writer}_{n}", GoldState.FAILED, model=writer, reason_code="X")
        book.record(f"gold.{writer}_{n}", GoldState.BUILT, model=writer)


def test_two_writers_at_once_keep_every_table_s_latest_state(tmp_path: Path) -> None:
    path = tmp_path / "hub-gold.tables.json"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    writers = [context.Process(target=_record_all, args=(path, name, start)) for name in ("a", "b")]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(60)
        assert writer.exitcode == 0

    statuses = GoldStatusBook(path).list()

    assert len(statuses) == 2 * TABLES
    assert {status.state for status in statuses} == {GoldState.BUILT}
    assert {status.model for status in statuses} == {"a", "b"}
