"""The lineage ledger: what each Delta commit of the loader was made from.

Every commit the loader makes to a bronze, silver or gold table carries one ledger entry, as
compact JSON in the commit's `userMetadata` (docs/lineage.md, ADR 0038). Being part of the
commit, an entry exists exactly when its data does: a batch that Delta skips as a replay
(`txnAppId`/`txnVersion`) writes neither. Entries are read back from `_delta_log/*.json`
with plain Python (`read_commits`), without Spark, by the API's lineage index.

A bronze entry names the Kafka positions the commit landed; a silver or gold entry names the
table versions it read:

    {"v":1,"kind":"bronze","topic":"sales.orders","batch":7,
     "ranges":[{"p":0,"first":10,"last":19,"lsn":[100,180],"tx":[5,9]}],
     "requests":[["3f2a...",0,10,14]]}
    {"v":1,"kind":"silver","batch":3,"reads":[{"table":"bronze.x","from":4,"to":6}]}
    {"v":1,"kind":"gold","reads":[{"table":"silver.x_history","from":7,"to":9}]}

`lsn`/`tx` (minimum and maximum) appear for change-event topics only; `requests` lists the
publish request ids of the commit's records with the offsets each covers, up to
`MAX_REQUESTS` (beyond that `requests_omitted` counts those left out).

A stream's batch lands every offset of a partition from its first to its last: one range per
partition. A commit landing scattered offsets (`hub load replay`, a reprocessing swap's copy)
has no batch and one range per run of consecutive offsets, several in a partition, each with
its own source positions; beyond `MAX_RANGES` the closest runs are joined (`joined_ranges`).

This module imports nothing beyond the standard library: the loader writes entries and the
API reads them, and neither may import the other.
"""

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum, unique
from pathlib import Path

LEDGER_VERSION = 1
# A publish request can cover many records; more request ids than this in one commit are
# counted, not listed, so that a commit's metadata stays small.
MAX_REQUESTS = 500
# A replayed quarantine can be scattered over a partition; more runs than this in one commit
# are joined where their gaps are smallest, so that a commit's metadata stays small.
MAX_RANGES = 500
# The file a reprocessing swap leaves in a rebuilt bronze location once it is the table's: the
# index, which reads Delta logs without the metastore, follows the table there.
SWAPPED_IN = "_hub_swapped_in"
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


@unique
class LedgerKind(StrEnum):
    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"


@dataclass(frozen=True, slots=True)
class OffsetRange:
    """Offsets `first`..`last` (inclusive) of one partition, with their source positions."""

    partition: int
    first: int
    last: int
    lsn: tuple[int, int] | None = None  # lowest and highest source LSN
    tx: tuple[int, int] | None = None  # lowest and highest source transaction id

    def holds(self, partition: int, offset: int) -> bool:
        return partition == self.partition and self.first <= offset <= self.last


@dataclass(frozen=True, slots=True)
class RequestSpan:
    """The records of one publish request in one partition: offsets `first`..`last`."""

    request_id: str
    partition: int
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class TableRead:
    """Versions `first`..`last` (inclusive) of `table`, read by a silver or gold commit."""

    table: str
    first: int
    last: int


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One commit's lineage; see the module docstring for its JSON form."""

    kind: LedgerKind
    batch: int | None = None
    topic: str | None = None
    ranges: tuple[OffsetRange, ...] = ()
    requests: tuple[RequestSpan, ...] = ()
    requests_omitted: int = 0
    reads: tuple[TableRead, ...] = field(default_factory=tuple)

    def encode(self) -> str:
        """Compact JSON for a commit's `userMetadata`."""
        body: dict[str, object] = {"v": LEDGER_VERSION, "kind": self.kind.value}
        if self.batch is not None:
            body["batch"] = self.batch
        if self.topic is not None:
            body["topic"] = self.topic
        if self.ranges:
            body["ranges"] = [_range_json(r) for r in self.ranges]
        if self.requests:
            body["requests"] = [[s.request_id, s.partition, s.first, s.last] for s in self.requests]
        if self.requests_omitted:
            body["requests_omitted"] = self.requests_omitted
        if self.reads:
            body["reads"] = [{"table": r.table, "from": r.first, "to": r.last} for r in self.reads]
        return json.dumps(body, separators=(",", ":"))


def joined_ranges(
    ranges: Iterable[OffsetRange], *, limit: int = MAX_RANGES
) -> tuple[OffsetRange, ...]:
    """`ranges` in (partition, first) order, with the runs of a partition whose gaps are the
    smallest joined until at most `limit` remain (never fewer than one per partition).

    A joined range also spans the offsets of its gap, which other commits landed: a position
    query then names this commit beside the one holding the offset. Joining the smallest gaps
    first keeps that to the fewest offsets.
    """
    ordered = sorted(ranges, key=lambda r: (r.partition, r.first))
    gaps = sorted(
        (ordered[i + 1].first - ordered[i].last, i)
        for i in range(len(ordered) - 1)
        if ordered[i].partition == ordered[i + 1].partition
    )
    joined = {i for _, i in gaps[: max(0, len(ordered) - limit)]}
    result: list[OffsetRange] = []
    for i, r in enumerate(ordered):
        if i - 1 in joined:
            result[-1] = _join(result[-1], r)
        else:
            result.append(r)
    return tuple(result)


def _join(a: OffsetRange, b: OffsetRange) -> OffsetRange:
    return OffsetRange(
        a.partition,
        min(a.first, b.first),
        max(a.last, b.last),
        _span(a.lsn, b.lsn),
        _span(a.tx, b.tx),
    )


def _span(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    if a is None or b is None:
        return a or b
    return min(a[0], b[0]), max(a[1], b[1])


def _range_json(r: OffsetRange) -> dict[str, object]:
    body: dict[str, object] = {"p": r.partition, "first": r.first, "last": r.last}
    if r.lsn is not None:
        body["lsn"] = list(r.lsn)
    if r.tx is not None:
        body["tx"] = list(r.tx)
    return body


def _pair(value: object) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 2:
        raise ValueError(f"expected [low, high], got {value!r}")
    return int(value[0]), int(value[1])


def decode(text: str | None) -> LedgerEntry | None:
    """The entry in a commit's `userMetadata`, or None when it holds none (or another's text).

    Metadata someone else wrote (a user's `userMetadata`, an older loader) is not an error: the
    commit simply has no lineage.
    """
    if not text or not text.startswith("{"):
        return None
    try:
        body = json.loads(text)
        if not isinstance(body, dict) or body.get("v") != LEDGER_VERSION:
            return None
        return LedgerEntry(
            kind=LedgerKind(body["kind"]),
            batch=body.get("batch"),
            topic=body.get("topic"),
            ranges=tuple(
                OffsetRange(
                    int(r["p"]),
                    int(r["first"]),
                    int(r["last"]),
                    _pair(r.get("lsn")),
                    _pair(r.get("tx")),
                )
                for r in body.get("ranges", ())
            ),
            requests=tuple(
                RequestSpan(str(s[0]), int(s[1]), int(s[2]), int(s[3]))
                for s in body.get("requests", ())
            ),
            requests_omitted=int(body.get("requests_omitted", 0)),
            reads=tuple(
                TableRead(str(r["table"]), int(r["from"]), int(r["to"]))
                for r in body.get("reads", ())
            ),
        )
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True, slots=True)
class Commit:
    """One Delta commit as its log file says: version, time, operation and ledger entry."""

    version: int
    timestamp_ms: int
    operation: str
    entry: LedgerEntry | None


def commit_versions(table_dir: Path) -> list[int]:
    """The versions of the commit files in `table_dir/_delta_log`, in order."""
    log = table_dir / "_delta_log"
    if not log.is_dir():
        return []
    found = (_COMMIT_FILE.match(p.name) for p in log.iterdir())
    return sorted(int(m.group(1)) for m in found if m)


def read_commits(table_dir: Path, *, after: int = -1) -> Iterator[Commit]:
    """The commits of the Delta table at `table_dir` newer than version `after`, in order.

    Reads only `_delta_log/<version>.json` files: each is one commit, written once and never
    changed (Delta's checkpoints summarise them but do not replace them until log cleanup).
    """
    for version in commit_versions(table_dir):
        if version <= after:
            continue
        path = table_dir / "_delta_log" / f"{version:020d}.json"
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:  # removed by log cleanup since the listing
            continue
        for line in lines:
            if '"commitInfo"' not in line:
                continue
            info = json.loads(line).get("commitInfo")
            if isinstance(info, dict):
                yield Commit(
                    version,
                    int(info.get("timestamp", 0)),
                    str(info.get("operation", "")),
                    decode(info.get("userMetadata")),
                )
                break
