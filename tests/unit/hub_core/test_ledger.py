"""The lineage ledger: entries in a commit's `userMetadata`, and reading them from `_delta_log`."""

import json
from pathlib import Path

import pytest

from hub_core.ledger import (
    LedgerEntry,
    LedgerKind,
    OffsetRange,
    RequestSpan,
    TableRead,
    decode,
    read_commits,
)
from tests.support.ledger_log import write_commit

pytestmark = pytest.mark.unit

BRONZE = LedgerEntry(
    LedgerKind.BRONZE,
    batch=7,
    topic="cdc.shop.public.orders",
    ranges=(OffsetRange(0, 10, 19, (100, 180), (5, 9)), OffsetRange(1, 3, 3)),
    requests=(RequestSpan("3f2a", 1, 3, 3),),
    requests_omitted=2,
)
SILVER = LedgerEntry(
    LedgerKind.SILVER, batch=3, reads=(TableRead("bronze.cdc_shop_public_orders", 4, 6),)
)


@pytest.mark.parametrize("entry", [BRONZE, SILVER], ids=["bronze", "silver"])
def test_an_entry_reads_back_as_it_was_written(entry: LedgerEntry) -> None:
    assert decode(entry.encode()) == entry


def test_an_entry_is_compact_json_naming_its_version_and_kind() -> None:
    text = BRONZE.encode()

    assert " " not in text
    body = json.loads(text)
    assert body["v"] == 1 and body["kind"] == "bronze"
    assert body["ranges"][0] == {"p": 0, "first": 10, "last": 19, "lsn": [100, 180], "tx": [5, 9]}


@pytest.mark.parametrize(
    "text",
    [None, "", "a note someone wrote", '{"v": 99, "kind": "bronze"}', '{"v": 1, "kind": "x"}',
     '{"v": 1, "kind": "bronze", "ranges": [{"p": 0}]}', "{not json"],
)  # fmt: skip
def test_metadata_that_is_not_a_ledger_entry_is_no_lineage_not_an_error(text: str | None) -> None:
    assert decode(text) is None


def test_read_commits_returns_each_commit_after_a_version_with_its_entry(tmp_path: Path) -> None:
    write_commit(tmp_path, 0, BRONZE, operation="CREATE TABLE AS SELECT")
    write_commit(tmp_path, 1, None, operation="OPTIMIZE")
    write_commit(tmp_path, 2, SILVER, operation="MERGE")
    (tmp_path / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"")

    commits = list(read_commits(tmp_path))
    later = list(read_commits(tmp_path, after=1))

    assert [(c.version, c.operation, c.entry) for c in commits] == [
        (0, "CREATE TABLE AS SELECT", BRONZE),
        (1, "OPTIMIZE", None),
        (2, "MERGE", SILVER),
    ]
    assert [c.version for c in later] == [2]


def test_a_table_without_a_log_has_no_commits(tmp_path: Path) -> None:
    assert list(read_commits(tmp_path / "missing")) == []
