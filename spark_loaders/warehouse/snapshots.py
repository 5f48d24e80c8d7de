"""What a gold table's build reads, pinned to versions, and the ledger entry that names them.

Before a gold table is built, the current version of each of its source tables (silver history
for a dimension, bronze for a fact) is pinned, and the build reads exactly those versions
(`VERSION AS OF`): the silver streams and the bronze loader keep committing meanwhile, and the
versions the commit's ledger entry names must be the ones whose data it holds. A fact's build
has two phases: it adds inferred members to its dimensions from its bronze version, then pins
the dimensions as that left them and looks its keys up in those versions; its entry names
bronze and the dimensions, the inferred members' entry bronze alone (ADR 0044).

An entry's range of a source starts after the version the table's previous entry read (0 for
the first), so that a forward query, which asks for the commits whose range holds a source
version, reaches the first gold version built from a snapshot at or after it (ADR 0041).
Each read also names the source's Delta table id: a bronze table swapped to its reprocessing
rebuild is a new table whose versions are numbered from 0 again, and the range after a swap
starts at 0.

The build runs on a session of its own (`spark_loaders.tables.lineage.ledger_session`): the ledger
entry is set as a session conf around the build's MERGEs, and a stream started from the
loader's shared session while it was set would take it along (a query clones its session's
conf when it starts).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from hub_core.ledger import LedgerEntry, LedgerKind, TableRead, decode
from spark_loaders.tables.lineage import TableIds


def current_version(spark: SparkSession, table: str) -> int | None:
    """The newest version of Delta table `table`, None when it does not exist."""
    if not spark.catalog.tableExists(table):
        return None
    newest = DeltaTable.forName(spark, table).history(1).select("version").head()
    return None if newest is None else int(newest[0])


@dataclass(frozen=True, slots=True)
class Pin:
    """A version of a source table, and the Delta table id it is a version of."""

    version: int
    table_id: str | None


class Snapshots:
    """The source tables of the gold table being built, each at its pinned version."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._pinned: dict[str, Pin] = {}
        self._ids = TableIds(spark)

    def pin(self, tables: Iterable[str], *, keep: bool = False) -> dict[str, Pin]:
        """Pin the current version of each of `tables` that exists, beside the tables pinned
        before when `keep` (a later phase of the same build); returns every pinned table."""
        pinned = dict(self._pinned) if keep else {}
        for table in dict.fromkeys(tables):
            found = self._current(table)
            if found is not None:
                pinned[table] = found
        self._pinned = pinned
        return dict(pinned)

    def _current(self, table: str) -> Pin | None:
        """`table`'s current version and the id of the Delta table it is a version of. A swap
        between reading the two (the loader swaps on another thread) shows as a changed
        location: the pair is then read again."""
        pin = None
        for _ in range(3):
            location = self._ids.location(table)
            version = current_version(self._spark, table)
            if location is None or version is None:
                return None
            pin = Pin(version, self._ids.id_at(table, location))
            if self._ids.location(table) == location:
                break
        return pin

    def read(self, table: str) -> DataFrame:
        """`table` at its pinned version (its current one when not pinned)."""
        pinned = self._pinned.get(table)
        if pinned is None:
            return self._spark.table(table)
        return at_version(self._spark, table, pinned.version)


def at_version(spark: SparkSession, table: str, version: int) -> DataFrame:
    """Delta table `table` as it was at `version` (`VERSION AS OF`)."""
    # Hub table names are checked identifiers (`hub_core.naming`), never user text.
    return spark.sql(f"SELECT * FROM {table} VERSION AS OF {int(version)}")


class GoldLedger:
    """The ledger entries of one builder's gold tables: which source versions each read."""

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        # (gold table, source table) -> the source version its newest entry read
        self._last: dict[tuple[str, str], Pin] = {}
        self._loaded: set[str] = set()

    def entry(self, table: str, pinned: Mapping[str, Pin]) -> LedgerEntry:
        """The entry of a commit of `table` built from the `pinned` source versions."""
        reads = []
        for source, pin in sorted(pinned.items()):
            previous = self._previous(table, source)
            if previous is None or _other_table(previous, pin):
                first = 0  # the first read, or the first of a rebuilt (swapped) source
            else:
                # A build repeated on an unchanged source can still commit (a dimension it
                # keys changed): its range is then the version read alone.
                first = min(previous.version + 1, pin.version)
            reads.append(TableRead(source, first, pin.version, pin.table_id))
        return LedgerEntry(LedgerKind.GOLD, reads=tuple(reads))

    def committed(self, table: str, pinned: Mapping[str, Pin]) -> None:
        """`table` committed an entry naming `pinned`: the next ranges start after them.

        Only a build that committed moves the start: a build that changed nothing left no
        entry, and the versions it read must still be in the next entry's range.
        """
        for source, pin in pinned.items():
            self._last[(table, source)] = pin

    def _previous(self, table: str, source: str) -> Pin | None:
        if table not in self._loaded:
            self._load(table)
        return self._last.get((table, source))

    def _load(self, table: str) -> None:
        """What the table's newest entries read, from its history (a builder's first build)."""
        self._loaded.add(table)
        for source, pin in newest_reads(self._spark, table).items():
            self._last.setdefault((table, source), pin)


def _other_table(previous: Pin, pin: Pin) -> bool:
    """Whether two pins are of different Delta tables under one name (a swap between them);
    an entry written before reads named ids says nothing."""
    return None not in (previous.table_id, pin.table_id) and previous.table_id != pin.table_id


def newest_reads(spark: SparkSession, table: str) -> dict[str, Pin]:
    """Each source table of gold table `table` and the version its newest ledger entry naming
    that source read (the `to` of its range, with the id it names), from the table's history;
    empty when the table does not exist or no entry names a source."""
    if not spark.catalog.tableExists(table):
        return {}
    history = (
        DeltaTable.forName(spark, table)
        .history()
        .where(F.col("userMetadata").isNotNull())
        .select("version", "userMetadata")
        .orderBy(F.desc("version"))
        .collect()
    )
    newest: dict[str, Pin] = {}
    for commit in history:
        entry = decode(commit["userMetadata"])
        if entry is None or entry.kind is not LedgerKind.GOLD:
            continue
        for read in entry.reads:
            newest.setdefault(read.table, Pin(read.last, read.table_id))
    return newest
