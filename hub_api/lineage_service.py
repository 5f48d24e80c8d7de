"""Answering lineage questions: the index (`catalog.lineage`), the feeds' owners, and Kafka.

The index says which bronze version landed an offset and which silver and gold versions read
it; what only the record itself knows (its schema id, request id, source LSN) is read from
Kafka while Kafka still holds it. A team may ask about its own feeds, an admin about all.
A silver or gold row is found by its key in the loader (`LoaderClient.row`, ADRs 0042 and
0047), which says which bronze record it holds; that record is then traced as a bronze row is.
"""

import json
import re
from dataclasses import dataclass
from typing import Any

from catalog.errors import FeedNotFound, InvalidLineageQuery, InvalidRowKey, LineageNotFound
from catalog.lineage import BronzeHit, LineageStore, LineageSync, TableVersion
from catalog.types import Feed, Principal
from hub_api.auth import require_owner
from hub_api.errors import Forbidden
from hub_api.lineage_models import (
    BronzeCommitPublic,
    PositionsPublic,
    RowLineagePublic,
    TableVersionPublic,
)
from hub_api.loader_client import LoaderClient, LoaderNotConfigured
from hub_core.errors import HubError
from hub_kafka.reader import RawRecord, TopicReader
from publish.feeds import FeedService
from publish.publisher import IDEMPOTENCY_HEADER, REQUEST_ID_HEADER
from registry.serde import decode
from registry.service import RegistryService
from registry.types import SchemaId
from registry.wire import HEADER_SIZE, MAGIC_BYTE

_BRONZE_TABLE = re.compile(r"bronze\.[A-Za-z0-9_]{1,249}")
# As the publish doors issue and accept them (`hub_api.publishing.request_id_of`).
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_TOPIC = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+")
_SILVER_TABLE = re.compile(r"silver\.([A-Za-z0-9_]{1,240})_(current|history)")
_GOLD_TABLE = re.compile(r"gold\.(dim|fact)_[A-Za-z0-9_]{1,240}")
_HISTORY_TABLE = re.compile(r"silver\.([a-z0-9_]{1,240})_history")
_KEY_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_MAX_KEY_COLUMNS = 8
_MAX_KEY_CHARS = 1024


@dataclass(frozen=True)
class LineageService:
    """What the lineage routes and the console's Lineage page ask; made per request over the
    app's services (`Lineage`, hub_api/deps.py)."""

    store: LineageStore
    sync: LineageSync
    feeds: FeedService
    reader: TopicReader
    registry: RegistryService
    loader: LoaderClient | None = None  # finds silver rows by key; None: no loader

    def row(
        self, caller: Principal, *, table: str, partition: int, offset: int
    ) -> RowLineagePublic:
        """Where the bronze row at (`partition`, `offset`) of `table` came from."""
        if not _BRONZE_TABLE.fullmatch(table):
            raise InvalidLineageQuery(
                f"'{table[:300]}' is not a bronze table: rows are traced from "
                "bronze.<topic with dots as underscores>; silver and gold rows carry the bronze "
                "position they came from (see docs/lineage.md)."
            )
        table = table.lower()  # as Spark's catalog names tables
        self.sync.sync()
        hits = self.store.bronze_holding(table=table, partition=partition, offset=offset)
        if not hits:
            raise LineageNotFound(f"offset {offset} of partition {partition} in {table}")
        topic = hits[0].topic
        self._require_reader(caller, topic)
        hit = hits[0]
        record = self.reader.at(topic, partition, offset)
        facts = _record_facts(record, self.registry) if record is not None else {}
        versions = self._versions(hits)
        return RowLineagePublic(
            table=table,
            topic=topic,
            partition=partition,
            offset=offset,
            bronze_version=hit.version,
            in_kafka=record is not None,
            versions=versions,
            **facts,
        )

    def row_by_key(self, caller: Principal, *, table: str, key: str) -> RowLineagePublic:
        """Where the silver or gold row of `table` with `key` (`col=value,...` or a JSON
        object) came from: the bronze record it holds, traced as `row` traces it."""
        columns = parse_key(key)
        match = _SILVER_TABLE.fullmatch(table)
        if match is None and not _GOLD_TABLE.fullmatch(table):
            raise InvalidLineageQuery(
                f"'{table[:300]}' is not a silver or gold table: rows are found by key in "
                "silver.<table>_current, silver.<table>_history, gold.dim_<name> and "
                "gold.fact_<name>; a bronze row is traced by its partition and offset (see "
                "docs/lineage.md)."
            )
        table = table.lower()
        self.sync.sync()
        bronze = f"bronze.{match.group(1).lower()}" if match else self._gold_source(table)
        topic = self.store.topic_of(bronze)
        if topic is None:
            raise LineageNotFound(f"a row of {table}: {bronze} has no landed version")
        self._require_reader(caller, topic)  # before the loader reads anything
        if self.loader is None or not self.loader.configured:
            raise LoaderNotConfigured()
        partition, offset = self.loader.row(table, columns)
        found = self.row(caller, table=bronze, partition=partition, offset=offset)
        return found.model_copy(update={"table": table, "key": columns, "bronze_table": bronze})

    def _gold_source(self, table: str) -> str:
        """The bronze table a gold table's rows come from, as its indexed entries name it: a
        fact's bronze table; a dimension's silver history table's (a dimension's entries of
        inferred members name a fact's bronze table, which its rows do not come from)."""
        for source in self.store.sources_of(table):
            history = _HISTORY_TABLE.fullmatch(source)
            if table.startswith("gold.dim_") and history:
                return f"bronze.{history.group(1)}"
            if table.startswith("gold.fact_") and _BRONZE_TABLE.fullmatch(source):
                return source
        raise LineageNotFound(f"a row of {table}: no indexed version of it read its source")

    def positions(
        self,
        caller: Principal,
        *,
        lsn: int | None = None,
        request_id: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> PositionsPublic:
        """Every table version holding a source LSN, a request's records, or a Kafka offset."""
        by_offset = (topic, partition, offset)
        kinds = (lsn is not None) + (request_id is not None) + any(v is not None for v in by_offset)
        if kinds != 1 or (kinds and any(v is not None for v in by_offset) and None in by_offset):
            raise InvalidLineageQuery(
                "Give exactly one of: lsn=<source LSN>, request_id=<publish request id>, or "
                "topic=, partition= and offset= together."
            )
        if request_id is not None and not _REQUEST_ID.fullmatch(request_id):
            raise InvalidLineageQuery(
                f"request_id {request_id[:64]!r} is not a request id: up to 64 letters, digits, "
                "'.', '_', ':' and '-', as the publish answer's X-Request-Id gives it."
            )
        if topic is not None:
            if len(topic) > 249 or not _TOPIC.fullmatch(topic):
                raise InvalidLineageQuery(
                    f"topic {topic[:249]!r} is not a hub topic name: lowercase "
                    "'<domain>.<name>' (letters, digits and underscores, e.g. 'sales.orders')."
                )
            self._require_reader(caller, topic)  # before anything is looked up
        self.sync.sync()
        if lsn is not None:
            hits, what = self.store.bronze_by_lsn(lsn), f"source LSN {lsn}"
        elif request_id is not None:
            hits, what = self.store.bronze_by_request(request_id), f"request '{request_id[:64]}'"
        else:
            assert topic is not None and partition is not None and offset is not None
            hits = self.store.bronze_holding(topic=topic, partition=partition, offset=offset)
            what = f"offset {offset} of partition {partition} in topic '{topic[:249]}'"
        hits = self._visible(caller, hits)
        if not hits:
            raise LineageNotFound(what)
        return PositionsPublic(
            bronze=[_bronze_public(h) for h in hits], versions=self._versions(hits)
        )

    def _versions(self, hits: list[BronzeHit]) -> list[TableVersionPublic]:
        bronze = {(h.table, h.version) for h in hits}
        found = [self.store.commit(t, v) for t, v in sorted(bronze)]
        downstream = self.store.downstream(bronze)
        return [_version_public(v) for v in [*filter(None, found), *downstream]]

    def _visible(self, caller: Principal, hits: list[BronzeHit]) -> list[BronzeHit]:
        """The hits of topics the caller may read; 403 when there were some, none of them."""
        if caller.admin or not hits:
            return hits
        allowed = {t for t in {h.topic for h in hits} if _traces(caller, self._feed(t))}
        visible = [h for h in hits if h.topic in allowed]
        if not visible:
            raise Forbidden(
                "The records asked about belong to feeds of other teams; a team reads the "
                "lineage of its own feeds and of those whose owners granted it reads "
                "(`hub feed grant`). Use a key of such a team or an admin key."
            )
        return visible

    def _require_reader(self, caller: Principal, topic: str) -> None:
        feed = self._feed(topic)
        if feed is None:
            if not caller.admin:
                raise Forbidden(
                    f"Topic '{topic[:249]}' is not a feed: only an admin key reads its lineage."
                )
            return
        if not _traces(caller, feed):
            require_owner(caller, feed.owner, what=f"The lineage of feed '{topic[:249]}'")

    def _feed(self, topic: str) -> Feed | None:
        try:
            return self.feeds.current(topic)
        except FeedNotFound:
            return None


def _traces(caller: Principal, feed: Feed | None) -> bool:
    """Whether `caller` may trace `feed`'s records: its owner, the teams it granted reads
    (`Feed.readers`), an admin. A trace names request ids and source positions, so a public
    feed's lineage still needs a grant."""
    if feed is None:
        return caller.admin
    return caller.may_write(feed.owner) or (caller.team is not None and caller.team in feed.readers)


def parse_key(text: str) -> dict[str, Any]:
    """A row's key as `col=value,col=value` (values as text: the loader converts them to the
    columns' types) or as a JSON object of column names and scalar values."""
    text = text.strip()
    key: Any = None
    if len(text) <= _MAX_KEY_CHARS:
        if text.startswith("{"):
            try:
                key = json.loads(text)
            except ValueError:
                key = None
        elif text:
            pairs = [part.partition("=") for part in text.split(",")]
            if all(sep for _name, sep, _value in pairs):
                key = {name.strip(): value.strip() for name, _sep, value in pairs}
    if (
        not isinstance(key, dict)
        or not 0 < len(key) <= _MAX_KEY_COLUMNS
        or not all(isinstance(n, str) and _KEY_COLUMN.fullmatch(n) for n in key)
        or not all(isinstance(v, str | int | float | bool) for v in key.values())
    ):
        raise InvalidRowKey(
            f"{text[:100]!r} is not a row key: give the key columns and their values as "
            f"col=value (several separated by commas, e.g. id=42) or as a JSON object "
            f'(e.g. {{"id": 42}}), at most {_MAX_KEY_COLUMNS} columns.'
        )
    return dict(key)


def _record_facts(record: RawRecord, registry: RegistryService) -> dict[str, Any]:
    """Schema id, request id, idempotency key, LSN and transaction id of a Kafka record."""
    headers = dict(record.headers)
    facts: dict[str, Any] = {}
    if REQUEST_ID_HEADER in headers:
        facts["request_id"] = headers[REQUEST_ID_HEADER].decode("utf-8", errors="replace")
    if IDEMPOTENCY_HEADER in headers:
        marker = headers[IDEMPOTENCY_HEADER].decode("utf-8", errors="replace")
        facts["idempotency_key"] = marker.rsplit(":", 1)[0]
    value = record.value
    if value is None or len(value) < HEADER_SIZE or value[0] != MAGIC_BYTE:
        return facts
    facts["schema_id"] = int.from_bytes(value[1:HEADER_SIZE], "big")
    try:
        datum = decode(value, writer_schema=lambda i: registry.schema(schema_id=SchemaId(i)))
    except (HubError, ValueError, EOFError):
        return facts  # not readable as hub Avro: the record's facts above still hold
    source = datum.get("source") if isinstance(datum, dict) else None
    if isinstance(source, dict):
        if isinstance(source.get("lsn"), int):
            facts["lsn"] = source["lsn"]
        if isinstance(source.get("txId"), int):
            facts["tx_id"] = source["txId"]
    return facts


def _bronze_public(hit: BronzeHit) -> BronzeCommitPublic:
    return BronzeCommitPublic(
        table=hit.table,
        version=hit.version,
        topic=hit.topic,
        partition=hit.partition,
        first_offset=hit.first_offset,
        last_offset=hit.last_offset,
        lsn_range=list(hit.lsn) if hit.lsn else None,
        tx_id_range=list(hit.tx) if hit.tx else None,
    )


def _version_public(version: TableVersion) -> TableVersionPublic:
    return TableVersionPublic(
        table=version.table,
        version=version.version,
        kind=version.kind,
        committed_at=version.committed_at,
    )
