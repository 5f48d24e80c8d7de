"""The lineage ledger: what each Delta commit of the loader was made from.

Every commit the loader makes to a bronze, silver or gold table carries one ledger entry, as
compact JSON in the commit's `userMetadata` (docs/lineage.md, ADR 0038). Being part of the
commit, an entry exists exactly when its data does: a batch that Delta skips as a replay
(`txnAppId`/`txnVersion`) writes neither. Entries are read back from `_delta_log/*.json`
without Spark (`log_commits`, over `LogFiles`): by the API's lineage index from a local
warehouse, or by the loader for it from object storage (ADR 0048).

A bronze entry names the Kafka positions the commit landed; a silver or gold entry names the
table versions it read:

    {"v":1,"kind":"bronze","topic":"sales.orders","batch":7,
     "ranges":[{"p":0,"first":10,"last":19,"lsn":[100,180],"tx":[5,9]}],
     "requests":[["3f2a...",0,10,14]]}
    {"v":1,"kind":"silver","batch":3,"reads":[{"table":"bronze.x","from":4,"to":6,"id":"9c1e..."}]}
    {"v":1,"kind":"gold","reads":[{"table":"silver.x_history","from":7,"to":9,"id":"52d0..."}]}

A read's `id` is the Delta table id of the table read (`TableRead`). `lsn`/`tx` (minimum and
maximum) appear for change-event topics only; `requests` lists the
publish request ids of the commit's records with the offsets each covers, up to
`MAX_REQUESTS` (beyond that `requests_omitted` counts those left out).

A stream's batch lands every offset of a partition from its first to its last: one range per
partition. A commit landing scattered offsets (`hub load replay`, a reprocessing swap's copy)
has no batch and one range per run of consecutive offsets, several in a partition, each with
its own source positions; beyond `MAX_RANGES` the closest runs are joined (`joined_ranges`).
A quarantine entry names, the same way, the offsets a commit set aside in `quarantine.<topic>`:

    {"v":1,"kind":"quarantine","topic":"sales.orders","batch":7,
     "ranges":[{"p":0,"first":12,"last":12}],"withheld":true}

`withheld` says the ranges are exactly records the batch decoded and refused: the batch's
bronze commits, whose ranges span every offset of the batch, do not hold them. A batch set
aside whole, or ranges joined beyond `MAX_RANGES`, carry no `withheld`.

This module imports nothing beyond the standard library: the loader writes entries and the
API reads them, and neither may import the other.
"""

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum, unique
from pathlib import Path
from typing import Protocol

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
# Joins a bronze table's name and the label of a location a reprocessing swap replaced
# (`bronze.<t>@original`, `bronze.<t>@<rebuild stamp>`): its versions, numbered apart from the
# table's current ones, are indexed under that name. Never part of a Spark table name.
RETIRED = "@"
ORIGINAL = "original"
_LABEL = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The databases whose tables carry ledger entries, under the warehouse as `<database>.db`.
LEDGER_DATABASES = ("bronze", "silver", "gold", "quarantine")
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_TABLE_NAME = re.compile(r"[a-z0-9_]{1,249}")


@unique
class LedgerKind(StrEnum):
    BRONZE = "bronze"
    SILVER = "silver"
    GOLD = "gold"
    QUARANTINE = "quarantine"  # the offsets a commit set aside in `quarantine.<topic>`


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
    """Versions `first`..`last` (inclusive) of `table`, read by a silver or gold commit.

    `table_id` is the Delta table id (`metaData.id`) of the table read, where the reader knew
    it: a bronze table rebuilt by reprocessing has a new id at its new location, whose
    versions are numbered from 0 again, so the id tells which location's versions these are.
    """

    table: str
    first: int
    last: int
    table_id: str | None = None


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
    # A quarantine entry's: its ranges are exactly records its batch refused, which none of the
    # batch's bronze commits holds although their ranges span them.
    withheld: bool = False

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
            body["reads"] = [_read_json(r) for r in self.reads]
        if self.withheld:
            body["withheld"] = True
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


def _read_json(r: TableRead) -> dict[str, object]:
    body: dict[str, object] = {"table": r.table, "from": r.first, "to": r.last}
    if r.table_id is not None:
        body["id"] = r.table_id
    return body


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
                TableRead(
                    str(r["table"]),
                    int(r["from"]),
                    int(r["to"]),
                    str(r["id"]) if r.get("id") is not None else None,
                )
                for r in body.get("reads", ())
            ),
            withheld=body.get("withheld") is True,
        )
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True, slots=True)
class Commit:
    """One Delta commit as its log file says: version, time, operation and ledger entry, and
    the table's id when the commit sets the table's metadata (its first commit does)."""

    version: int
    timestamp_ms: int
    operation: str
    entry: LedgerEntry | None
    table_id: str | None = None


class LogFiles(Protocol):
    """Reading the file system that holds Delta tables: local disk, or object storage through
    the loader's Hadoop file system. Locations are paths or URIs, joined with `/`."""

    def names(self, folder: str) -> list[str]:
        """The names of what `folder` holds; empty when it does not exist."""
        ...

    def exists(self, location: str) -> bool: ...

    def read(self, location: str) -> str | None:
        """The text of the file at `location`; None when it does not exist (any more)."""
        ...


class LocalFiles:
    """`LogFiles` on local disk."""

    def names(self, folder: str) -> list[str]:
        path = Path(folder)
        return sorted(p.name for p in path.iterdir()) if path.is_dir() else []

    def exists(self, location: str) -> bool:
        return Path(location).exists()

    def read(self, location: str) -> str | None:
        try:
            return Path(location).read_text()
        except FileNotFoundError:
            return None


def warehouse_tables(files: LogFiles, warehouse: str) -> dict[str, str]:
    """The Delta tables of `LEDGER_DATABASES` under `warehouse`, by name, where they live now
    (`table_location`)."""
    found: dict[str, str] = {}
    for database in LEDGER_DATABASES:
        folder = f"{warehouse}/{database}.db"
        for name in files.names(folder):
            # A name with a dot is no table: what an interrupted creation left (ADR 0040).
            if "." not in name and files.exists(f"{folder}/{name}/_delta_log"):
                found[f"{database}.{name}"] = f"{folder}/{name}"
    for table in files.names(f"{warehouse}/_rebuilds"):
        swapped = _swapped(files, f"{warehouse}/_rebuilds/{table}")
        if not swapped:
            continue
        name = f"bronze.{table}"
        original = found.pop(name, None)
        if original is not None:
            found[f"{name}{RETIRED}{ORIGINAL}"] = original
        for older in swapped[:-1]:
            found[f"{name}{RETIRED}{older.rsplit('/', 1)[-1]}"] = older
        found[name] = swapped[-1]
    return found


@dataclass(frozen=True, slots=True)
class LoggedTable:
    """A table with ledger entries: where it lives and its newest commit's version."""

    location: str
    newest: int | None


def logged_tables(files: LogFiles, warehouse: str) -> dict[str, LoggedTable]:
    """`warehouse_tables`, each with its newest commit's version."""
    found = {}
    for name, location in warehouse_tables(files, warehouse).items():
        versions = log_versions(files, location)
        found[name] = LoggedTable(location, versions[-1] if versions else None)
    return found


def table_location(files: LogFiles, warehouse: str, table: str) -> str | None:
    """Where table `table` (`<database>.<name>`, or a retired location's `<table>@<label>`)
    of `warehouse` lives; None when it is no table with ledger entries there.

    A bronze table rebuilt by reprocessing lives in its newest rebuild that a swap marked
    (`<warehouse>/_rebuilds/<table>/<stamp>/_hub_swapped_in`): the rebuilds not marked wait
    for their swap, and the table is still where it was. The locations a swap replaced are
    retired: `bronze.<t>@original` (where the table was created) and `bronze.<t>@<stamp>` (an
    earlier rebuild), kept for the commits that read them.
    """
    table, _, label = table.partition(RETIRED)
    database, _, name = table.partition(".")
    if database not in LEDGER_DATABASES or not _TABLE_NAME.fullmatch(name):
        return None
    swapped = _swapped(files, f"{warehouse}/_rebuilds/{name}") if database == "bronze" else []
    if label:
        if not swapped or not _LABEL.fullmatch(label):
            return None
        if label != ORIGINAL:
            older = [s for s in swapped[:-1] if s.rsplit("/", 1)[-1] == label]
            return older[0] if older else None
    elif swapped:
        return swapped[-1]
    location = f"{warehouse}/{database}.db/{name}"
    return location if files.exists(f"{location}/_delta_log") else None


def _swapped(files: LogFiles, rebuilds: str) -> list[str]:
    """The rebuilds in folder `rebuilds` that a swap marked, oldest first (stamps sort by
    time): the newest is the table's location, the others are retired."""
    stamps = [f"{rebuilds}/{stamp}" for stamp in files.names(rebuilds)]
    return [stamp for stamp in stamps if files.exists(f"{stamp}/{SWAPPED_IN}")]


def log_versions(files: LogFiles, location: str) -> list[int]:
    """The versions of the commit files in `<location>/_delta_log`, in order."""
    found = (_commit_version(name) for name in files.names(f"{location}/_delta_log"))
    return sorted(v for v in found if v is not None)


def log_commits(
    files: LogFiles, location: str, *, after: int = -1, limit: int | None = None
) -> list[Commit]:
    """The commits of the Delta table at `location` newer than version `after`, in order, at
    most `limit` of them.

    Reads only `_delta_log/<version>.json` files: each is one commit, written once and never
    changed (Delta's checkpoints summarise them but do not replace them until log cleanup).
    """
    commits: list[Commit] = []
    for version in log_versions(files, location):
        if version <= after:
            continue
        if limit is not None and len(commits) >= limit:
            break
        text = files.read(f"{location}/_delta_log/{commit_file(version)}")
        if text is None:  # removed by log cleanup since the listing
            continue
        info = _commit_info(text)
        if info is not None:
            commits.append(_commit_of(version, info, _table_id(text)))
    return commits


def commit_file(version: int) -> str:
    """The name of version `version`'s commit file in a table's `_delta_log`."""
    return f"{version:020d}.json"


def _commit_version(name: str) -> int | None:
    """The version a `_delta_log` file name is the commit of; None for other files."""
    found = _COMMIT_FILE.match(name)
    return int(found.group(1)) if found else None


def _commit_info(text: str) -> dict[str, object] | None:
    """The `commitInfo` action of a commit file's text, None when it has none."""
    for line in text.splitlines():
        if '"commitInfo"' in line:
            info = json.loads(line).get("commitInfo")
            return info if isinstance(info, dict) else None
    return None


def _table_id(text: str) -> str | None:
    """The table id a commit file's `metaData` action sets, None when it has none."""
    for line in text.splitlines():
        if line.startswith('{"metaData"'):
            found = json.loads(line)["metaData"].get("id")
            return found if isinstance(found, str) else None
    return None


def _commit_of(version: int, info: dict[str, object], table_id: str | None = None) -> Commit:
    """Commit `version` as its `commitInfo` action says."""
    timestamp = info.get("timestamp", 0)
    return Commit(
        version,
        int(timestamp) if isinstance(timestamp, int | float | str) else 0,
        str(info.get("operation", "")),
        decode(metadata if isinstance(metadata := info.get("userMetadata"), str) else None),
        table_id,
    )
