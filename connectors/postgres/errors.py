"""Errors of the PostgreSQL CDC connector, each with a stable code and the fix in its message."""

import psycopg
import psycopg2

from hub_core.errors import ErrorCode, HubError, TerminalError, TransientError

# What the drivers raise when a connection cannot be made or is lost (server restarting or
# shutting down, network gone, the slot still held by a walsender that has not noticed yet).
CONNECTION_ERRORS: tuple[type[Exception], ...] = (
    psycopg.OperationalError,
    psycopg.InterfaceError,
    psycopg2.OperationalError,
    psycopg2.InterfaceError,
)
# SQLSTATE classes that drivers raise as operational errors although no retry can fix them:
# invalid authorization (28: a wrong password, a role without LOGIN) and an unknown database (3D).
_SETUP_CLASSES = frozenset({"28", "3D"})


class CdcSetupError(TerminalError):
    """The database is not set up for change data capture; the message says what to change."""

    code = ErrorCode.CDC_SETUP_FAILED


class CdcSourceUnavailable(TransientError):
    """The database could not be reached or the replication stream broke; retrying may help."""

    code = ErrorCode.CDC_SOURCE_UNAVAILABLE


class PgOutputError(TerminalError):
    """A replication message the decoder cannot read: a protocol mismatch, not bad data."""

    code = ErrorCode.UNPARSEABLE_SOURCE_RECORD


def connection_failure(error: Exception, doing: str) -> HubError:
    """A driver's connection error while `doing` something, by kind: transient unless its
    SQLSTATE says the role or the database is wrong."""
    state = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    message = f"{doing}: {str(error).strip()}"
    if isinstance(state, str) and state[:2] in _SETUP_CLASSES:
        return CdcSetupError(f"{message}. Check the role and database named in `source.dsn`.")
    return CdcSourceUnavailable(message)
