"""Errors of the PostgreSQL CDC connector, each with a stable code and the fix in its message."""

from hub_core.errors import ErrorCode, TerminalError, TransientError


class CdcSetupError(TerminalError):
    """The database is not set up for change data capture; the message says what to change."""

    code = ErrorCode.CDC_SETUP_FAILED


class CdcSourceUnavailable(TransientError):
    """The database could not be reached or the replication stream broke; retrying may help."""

    code = ErrorCode.CDC_SOURCE_UNAVAILABLE


class PgOutputError(TerminalError):
    """A replication message the decoder cannot read: a protocol mismatch, not bad data."""

    code = ErrorCode.UNPARSEABLE_SOURCE_RECORD
