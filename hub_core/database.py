"""The hub's metadata database (registry and catalog): one engine and one transaction helper.

The same code runs on SQLite (the embedded default) and PostgreSQL (production).
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from hub_core.errors import DatabaseUnavailable

log = logging.getLogger(__name__)


def create_database_engine(database_url: str, *, pool_size: int = 5) -> Engine:
    """An engine for the hub's database, with SQLite tuned for concurrent readers."""
    if database_url.startswith("sqlite"):
        engine = create_engine(
            database_url, connect_args={"check_same_thread": False, "timeout": 30}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(database_url, pool_size=pool_size, pool_pre_ping=True)


@contextmanager
def transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """A session in a transaction; database outages become `DatabaseUnavailable` (50303)."""
    try:
        with sessions.begin() as session:
            yield session
    except OperationalError as exc:
        # The driver's text names hosts, ports, users and databases: it goes to the server's
        # log (whose filter masks passwords), never into an answer.
        log.warning("database operation failed: %s", exc.orig)
        raise DatabaseUnavailable(
            "The hub's database is unavailable; the server's log has the database's error. "
            "Check HUB_REGISTRY_DATABASE_URL and that the database is running, then retry."
        ) from exc
