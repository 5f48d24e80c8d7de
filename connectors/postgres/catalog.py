"""What the connector asks the database's catalog: tables, types, comments, slot and server state.

These queries run on an ordinary (non-replication) connection. Setup problems found here
(wal_level, missing tables, missing privileges) are reported as `CdcSetupError` naming the fix.
"""

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from connectors.postgres.envelope import TableColumn, TableShape
from connectors.postgres.errors import CdcSetupError, connection_failure
from connectors.postgres.pgoutput import parse_lsn
from connectors.postgres.typemap import PgType, column_type

log = logging.getLogger(__name__)

# Session settings that make every type's text output unambiguous and lossless.
SESSION_OPTIONS = (
    "-c DateStyle=ISO -c TimeZone=UTC -c IntervalStyle=postgres "
    "-c bytea_output=hex -c extra_float_digits=3"
)


@dataclass(frozen=True, slots=True)
class SlotState:
    plugin: str
    database: str
    confirmed_flush_lsn: int | None
    active_pid: int | None


def connect(dsn: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """An ordinary connection with the connector's session settings."""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, options=SESSION_OPTIONS)
    except psycopg.OperationalError as exc:
        raise connection_failure(exc, "cannot connect to PostgreSQL") from exc


class Catalog:
    """Catalog queries on one ordinary connection; type descriptions are cached by OID."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._types: dict[int, PgType] = {}

    @property
    def database(self) -> str:
        return str(self._conn.info.dbname)

    def check_server(self) -> None:
        """Fail early, with the fix, when the server cannot do logical replication."""
        level = self._scalar("SHOW wal_level")
        if level != "logical":
            raise CdcSetupError(
                f"PostgreSQL runs with wal_level={level}; change data capture needs "
                "wal_level=logical (set it in postgresql.conf and restart the server)."
            )

    def table(self, qualified: str) -> TableShape:
        """The shape of `schema.table` as the connector maps it (generated columns excluded,
        as pgoutput leaves them out)."""
        schema, table = qualified.split(".", 1)
        row = self._conn.execute(
            "SELECT c.oid, obj_description(c.oid, 'pg_class') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
            (schema, table),
        ).fetchone()
        if row is None:
            raise CdcSetupError(
                f"table {qualified} does not exist (or is not visible to the connector's role); "
                "check `source.tables` and the role's privileges."
            )
        relid, comment = row
        columns = self._conn.execute(
            "SELECT attname, atttypid, atttypmod, col_description(attrelid, attnum) "
            "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped "
            "AND attgenerated = '' ORDER BY attnum",
            (relid,),
        ).fetchall()
        key = self._conn.execute(
            "SELECT a.attname FROM pg_index i "
            "JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
            "WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.n",
            (relid,),
        ).fetchall()
        return TableShape(
            schema=schema,
            table=table,
            columns=tuple(
                TableColumn(
                    name=name,
                    type=column_type(type_oid, modifier, self.pg_type),
                    comment=doc,
                    type_oid=type_oid,
                )
                for name, type_oid, modifier, doc in columns
            ),
            primary_key=tuple(name for (name,) in key),
            comment=comment,
        )

    def pg_type(self, type_oid: int) -> PgType:
        """A non-built-in type as the catalog describes it."""
        if type_oid not in self._types:
            row = self._conn.execute(
                "SELECT format_type(t.oid, NULL), t.typtype, t.typelem, t.typbasetype, "
                "t.typtypmod, t.typcategory FROM pg_type t WHERE t.oid = %s",
                (type_oid,),
            ).fetchone()
            if row is None:
                raise CdcSetupError(f"type OID {type_oid} is not in pg_type")
            name, kind, element, base, modifier, category = row
            self._types[type_oid] = PgType(
                oid=type_oid,
                name=name,
                kind=kind,
                element_oid=element if category == "A" else 0,
                base_oid=base,
                base_modifier=modifier,
            )
        return self._types[type_oid]

    def ensure_publication(self, name: str, tables: list[str], *, create: bool) -> None:
        """Create the publication FOR the tables when missing (if allowed); add missing tables."""
        exists = self._scalar("SELECT count(*) FROM pg_publication WHERE pubname = %s", (name,))
        listed = {
            f"{s}.{t}"
            for s, t in self._conn.execute(
                "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
                (name,),
            ).fetchall()
        }
        missing = [t for t in tables if t not in listed]
        if not missing:
            return
        if not create:
            what = "does not exist" if not exists else f"does not include {', '.join(missing)}"
            raise CdcSetupError(
                f"publication {name} {what}; run `CREATE PUBLICATION {name} FOR TABLE "
                f"{', '.join(tables)}` or set `create_publication: true`."
            )
        targets = sql.SQL(", ").join(sql.Identifier(*t.split(".", 1)) for t in missing)
        statement = (
            sql.SQL("ALTER PUBLICATION {} ADD TABLE {}")
            if exists
            else sql.SQL("CREATE PUBLICATION {} FOR TABLE {}")
        )
        try:
            self._conn.execute(statement.format(sql.Identifier(name), targets))
        except psycopg.errors.InsufficientPrivilege as exc:
            raise CdcSetupError(
                f"cannot create publication {name}: {exc}. Create it as the tables' owner "
                f"(`CREATE PUBLICATION {name} FOR TABLE {', '.join(tables)}`)."
            ) from exc
        log.info("publication %s now covers %s", name, ", ".join(missing))

    def slot(self, name: str) -> SlotState | None:
        row = self._conn.execute(
            "SELECT plugin, database, confirmed_flush_lsn::text, active_pid "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        ).fetchone()
        if row is None:
            return None
        plugin, database, confirmed, pid = row
        return SlotState(
            plugin=plugin,
            database=database,
            confirmed_flush_lsn=parse_lsn(confirmed) if confirmed else None,
            active_pid=pid,
        )

    def drop_slot(self, name: str) -> None:
        self._conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))

    def slot_lag_bytes(self, name: str) -> int | None:
        """WAL the slot still holds: `pg_current_wal_lsn() - confirmed_flush_lsn`."""
        value = self._scalar(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        )
        return None if value is None else int(value)

    def current_lsn(self) -> int:
        return parse_lsn(str(self._scalar("SELECT pg_current_wal_lsn()::text")))

    def heartbeat(self) -> None:
        """A tiny non-transactional WAL record, so an idle slot's position can move on."""
        self._conn.execute("SELECT pg_logical_emit_message(false, 'hub.heartbeat', '')")

    def _scalar(self, query: str, params: tuple[Any, ...] = ()) -> Any:
        row = self._conn.execute(query, params).fetchone()
        return None if row is None else row[0]
