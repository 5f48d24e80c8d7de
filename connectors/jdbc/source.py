"""Polls tables (or one query) for rows past the stored position, as Kafka Connect's JDBC source.

Modes:
- `incrementing`: `WHERE id > :last ORDER BY id`. New rows only; updates are not seen.
- `timestamp`: `WHERE ts > :last AND ts < :now - delay ORDER BY ts`. New and updated rows; rows
  sharing a timestamp are always taken together, so a batch limit never splits them.
- `timestamp+incrementing`: `WHERE (ts = :last_ts AND id > :last_id OR ts > :last_ts)
  AND ts < :now - delay ORDER BY ts, id`. The id breaks ties between equal timestamps.

Polling sees each row as it is at poll time: deletes and changes between two polls are not seen.
"""

import datetime as dt
import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Engine,
    MetaData,
    Select,
    Table,
    and_,
    column,
    create_engine,
    inspect,
    or_,
    select,
    text,
)
from sqlalchemy import types as sa
from sqlalchemy.exc import (
    DBAPIError,
    InterfaceError,
    NoSuchTableError,
    OperationalError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.sql.selectable import Subquery

from catalog.types import FeedKind, TeamName
from connectors.errors import SourceUnavailable
from connectors.jdbc.config import JdbcConnector
from connectors.jdbc.types import avro_field, avro_type, natural, record_name, sql_type_of_code
from connectors.runtime import Batch, SourceContext
from hub_core.errors import ErrorCode, TerminalError
from publish.feeds import FeedSpec
from publish.publisher import IncomingRecord

log = logging.getLogger(__name__)


@dataclass
class _Target:
    """One polled relation: a table or the wrapped query, its topic and its position."""

    label: str
    relation: Table | Subquery
    topic: str
    partition: dict[str, str]
    schema: dict[str, Any]
    key_fields: tuple[str, ...]
    timestamp_tz: bool
    offset: dict[str, Any] | None = None


class JdbcPoller:
    """The `jdbc` source: one engine, one target per table (or the query)."""

    def __init__(self, config: JdbcConnector) -> None:
        self._config = config
        self._source = config.source
        self._engine: Engine = create_engine(
            self._source.url.get_secret_value(), pool_pre_ping=True
        )
        with _reaching("describe the source"):
            self._targets = self._describe()

    def feeds(self) -> Sequence[FeedSpec]:
        return [
            FeedSpec(
                topic=t.topic,
                owner=TeamName(self._config.owner),
                kind=FeedKind.EVENT,
                value_schema=json.dumps(t.schema),
                partitions=self._config.partitions,
                key_fields=t.key_fields,
                description=f"Rows of {t.label}, polled by connector {self._config.name}.",
            )
            for t in self._targets
        ]

    def run(self, context: SourceContext) -> None:
        for target in self._targets:
            target.offset = context.offset(target.partition)
            self._show_age(target, context)
            context.log.info("%s: polling %s from %s", context.name, target.label,
                             target.offset or "the beginning")  # fmt: skip
        try:
            while not context.stopped:
                more = False
                for target in self._targets:
                    with _reaching(f"poll {target.label}"):
                        more |= self._poll(target, context)
                if not more:
                    context.sleep(self._source.poll_seconds)
        finally:
            self._engine.dispose()

    def _poll(self, target: _Target, context: SourceContext) -> bool:
        """Emit one batch of new rows of `target`; True when more are probably waiting."""
        rows, full = self._fetch(target)
        if not rows:
            return False
        types = {f["name"]: _plain(f["type"]) for f in target.schema["fields"]}
        records = [IncomingRecord(value=natural(row, types)) for row in rows]
        offset = self._position(rows[-1])
        context.emit(Batch(target.topic, target.partition, offset, records=records))
        target.offset = offset
        self._show_age(target, context)
        return full

    def _show_age(self, target: _Target, context: SourceContext) -> None:
        """Set the age of the target's position, when it is a timestamp."""
        if target.offset is not None and "ts" in target.offset:
            moment = _timestamp(target.offset["ts"], aware=True)
            context.lag.position_time(target.partition.get("table", "query"), moment)

    def _fetch(self, target: _Target) -> tuple[list[dict[str, Any]], bool]:
        source = self._source
        relation = target.relation
        inc = relation.c[source.incrementing_column] if source.incrementing_column else None
        ts = relation.c[source.timestamp_column] if source.timestamp_column else None
        query: Select[Any] = select(relation)
        conditions: list[ColumnElement[bool]] = []
        last = target.offset or {}
        if source.mode == "incrementing":
            assert inc is not None
            if "id" in last:
                conditions.append(inc > last["id"])
            query = query.order_by(inc)
        else:
            assert ts is not None
            upper = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=source.timestamp_delay_seconds)
            if not target.timestamp_tz:
                upper = upper.replace(tzinfo=None)
            conditions.append(ts < upper)
            if "ts" in last:
                last_ts = _timestamp(last["ts"], target.timestamp_tz)
                if source.mode == "timestamp":
                    conditions.append(ts > last_ts)
                else:
                    assert inc is not None
                    conditions.append(or_(and_(ts == last_ts, inc > last["id"]), ts > last_ts))
            query = query.order_by(ts) if inc is None else query.order_by(ts, inc)
        query = query.where(*conditions).limit(source.batch_size)
        with self._engine.connect() as connection:
            rows = [dict(r._mapping) for r in connection.execute(query)]
            full = len(rows) == source.batch_size
            if full and source.mode == "timestamp":
                rows = self._whole_timestamps(connection, query, rows, ts)
        return rows, full

    def _whole_timestamps(
        self, connection: Any, query: Select[Any], rows: list[dict[str, Any]], ts: Any
    ) -> list[dict[str, Any]]:
        """Drop a trailing group of equal timestamps the limit may have split; when the whole
        batch shares one timestamp, read every row of it instead."""
        column_name = self._source.timestamp_column
        assert column_name is not None
        last_ts = rows[-1][column_name]
        kept = [r for r in rows if r[column_name] != last_ts]
        if kept:
            return kept
        tied = query.limit(None).where(ts == last_ts)
        return [dict(r._mapping) for r in connection.execute(tied)]

    def _position(self, row: dict[str, Any]) -> dict[str, Any]:
        source = self._source
        position: dict[str, Any] = {}
        if source.incrementing_column:
            value = row[source.incrementing_column]
            # NUMERIC keys come back as Decimal; positions are JSON.
            position["id"] = int(value) if isinstance(value, Decimal) else value
        if source.timestamp_column:
            value = row[source.timestamp_column]
            if not isinstance(value, dt.datetime):
                raise TerminalError(
                    f"timestamp_column '{source.timestamp_column}' holds {value!r}, not a "
                    "timestamp; choose a DATETIME/TIMESTAMP column.",
                    code=ErrorCode.CONNECTOR_SOURCE_MISMATCH,
                )
            position["ts"] = value.isoformat()
        return position

    def _describe(self) -> list[_Target]:
        if self._source.query is not None:
            return [self._describe_query(self._source.query)]
        return [self._describe_table(name) for name in self._source.tables]

    def _describe_table(self, name: str) -> _Target:
        schema_name, _, table_name = name.rpartition(".")
        try:
            table = Table(
                table_name, MetaData(), schema=schema_name or None, autoload_with=self._engine
            )
        except NoSuchTableError:
            raise TerminalError(
                f"source.tables: table '{name}' does not exist in the database (or this user "
                "cannot see it); give it as `table` or `schema.table`.",
                code=ErrorCode.CONNECTOR_SOURCE_MISMATCH,
            ) from None
        self._check_columns(name, [c.name for c in table.columns])
        fields = [
            avro_field(c.name, avro_type(c.type), nullable=bool(c.nullable), doc=c.comment)
            for c in table.columns
        ]
        keys = self._source.key_columns or [c.name for c in table.primary_key.columns]
        ts_column = self._source.timestamp_column
        ts_tz = ts_column is not None and self._tz_aware(table.c[ts_column].type)
        assert self._config.topic_prefix is not None
        topic = f"{self._config.topic_prefix}.{record_name(table_name).lower()}"
        return _Target(
            label=f"table {name}",
            relation=table,
            topic=topic,
            partition={"table": name},
            schema=self._record(record_name(table_name), fields),
            key_fields=tuple(keys),
            timestamp_tz=ts_tz,
        )

    def _describe_query(self, sql: str) -> _Target:
        columns = self._query_columns(sql)
        names = [name for name, _ in columns]
        self._check_columns("the query", names)
        fields = [avro_field(name, avro_type(kind), nullable=True) for name, kind in columns]
        typed = [column(name, kind) for name, kind in columns]
        subquery = text(sql).columns(*typed).subquery("hub_q")
        assert self._config.topic is not None
        return _Target(
            label="the query",
            relation=subquery,
            topic=self._config.topic,
            partition={"query": self._config.name},
            schema=self._record(record_name(self._config.name), fields),
            key_fields=tuple(self._source.key_columns or ()),
            timestamp_tz=any(
                name == self._source.timestamp_column and self._tz_aware(kind)
                for name, kind in columns
            ),
        )

    def _query_columns(self, sql: str) -> list[tuple[str, sa.TypeEngine[Any]]]:
        """The query's columns and types, reflected from a temporary view of it (the types
        the database itself derives); drivers' type codes where views cannot be made."""
        view = f"hub_q_{uuid.uuid4().hex[:12]}"
        with self._engine.connect() as connection:
            try:
                connection.execute(text(f"CREATE TEMPORARY VIEW {view} AS {sql}"))
                reflected = inspect(connection).get_columns(view)
                connection.execute(text(f"DROP VIEW {view}"))
                return [(c["name"], c["type"]) for c in reflected]
            except DBAPIError:
                connection.rollback()
            result = connection.execute(text(f"SELECT * FROM ({sql}) AS hub_q WHERE 1 = 0"))
            description = result.cursor.description if result.cursor is not None else []
            return [(d[0], sql_type_of_code(d[1])) for d in description]

    def _check_columns(self, what: str, names: list[str]) -> None:
        wanted = {
            "incrementing_column": self._source.incrementing_column,
            "timestamp_column": self._source.timestamp_column,
        }
        for key, value in wanted.items():
            if value is not None and value not in names:
                raise TerminalError(
                    f"source.{key} '{value}' is not a column of {what}; its columns are: "
                    f"{', '.join(names)}.",
                    code=ErrorCode.CONNECTOR_SOURCE_MISMATCH,
                )
        for key_column in self._source.key_columns or []:
            if key_column not in names:
                raise TerminalError(
                    f"source.key_columns: '{key_column}' is not a column of {what}; its "
                    f"columns are: {', '.join(names)}.",
                    code=ErrorCode.CONNECTOR_SOURCE_MISMATCH,
                )

    def _tz_aware(self, column_type: sa.TypeEngine[Any]) -> bool:
        return isinstance(column_type, sa.DateTime) and bool(column_type.timezone)

    def _record(self, name: str, fields: list[dict[str, Any]]) -> dict[str, Any]:
        options = self._config.schema_options
        record: dict[str, Any] = {
            "type": "record",
            "name": name,
            "namespace": options.namespace,
            "fields": fields,
        }
        if options.doc:
            record["doc"] = options.doc
        return record


@contextmanager
def _reaching(doing: str) -> Iterator[None]:
    """Turn the driver's connection failures into `SourceUnavailable`, which the task retries
    (rebuilding the source from its stored position); other database errors stay as they are."""
    try:
        yield
    except (OperationalError, InterfaceError, PoolTimeout) as exc:
        raise SourceUnavailable(f"cannot {doing}: {_cause(exc)}") from exc
    except DBAPIError as exc:
        if not exc.connection_invalidated:
            raise
        raise SourceUnavailable(f"cannot {doing}, the connection was lost: {_cause(exc)}") from exc


def _cause(error: Exception) -> str:
    """The driver's own message, without the statement SQLAlchemy appends."""
    original = getattr(error, "orig", None)
    return str(original if original is not None else error).strip()


def _plain(field_type: Any) -> Any:
    """The non-null branch of a nullable field's type."""
    if isinstance(field_type, list):
        return next(t for t in field_type if t != "null")
    return field_type


def _timestamp(text_value: str, aware: bool) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text_value)
    if aware and moment.tzinfo is None:
        return moment.replace(tzinfo=dt.UTC)
    if not aware and moment.tzinfo is not None:
        return moment.astimezone(dt.UTC).replace(tzinfo=None)
    return moment


def create(config: JdbcConnector) -> JdbcPoller:
    """The source of a `jdbc` connector."""
    return JdbcPoller(config)
