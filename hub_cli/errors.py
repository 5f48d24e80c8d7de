"""Errors of the `hub` command line and the local stack it runs."""

from typing import Any

from hub_core.errors import ErrorCode, LocalServiceFailed, TerminalError, TransientError


class StackError(LocalServiceFailed):
    """A part of the local stack failed to start or died."""


class SchemaCheckError(TerminalError):
    """The check itself could not run: a bad file, mapping or registry answer."""


class ApiUnavailable(TransientError):
    """The API did not answer, or asked to be asked again (503, 429, or 409 while the batch's
    idempotency key is in use); `answer` is what to report when the retries run out."""

    code = ErrorCode.KAFKA_UNAVAILABLE

    def __init__(self, answer: dict[str, Any], *, retry_after_s: float | None = None) -> None:
        super().__init__(str(answer.get("message", answer)), retry_after_s=retry_after_s)
        self.answer = answer


class ApiRequestFailed(TerminalError):
    """The API refused a request of the command line (or did not answer); the message, the
    API's own, says why."""


class SqlRefused(TerminalError):
    """The analysts' server refused a statement `hub sql` sent with a key (not allowed, not
    readable with the key's grants, or not valid SQL); its message says why."""

    code = ErrorCode.SQL_STATEMENT_REFUSED


class AnalystServerUnavailable(TransientError):
    """`hub sql` with a key could not reach or log in to the analysts' server."""

    code = ErrorCode.ANALYST_SERVER_UNAVAILABLE
