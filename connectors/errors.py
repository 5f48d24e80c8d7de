"""Errors of connector files and connector runs, each with a stable code."""

from dataclasses import dataclass
from pathlib import Path

from hub_core.errors import ErrorCode, TerminalError, TransientError


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong in a connector file: where (a dotted key path) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConnectorConfigError(TerminalError):
    """A connector file that cannot be used; `problems` lists every key at fault."""

    code = ErrorCode.INVALID_CONNECTOR_CONFIG

    def __init__(self, file: Path | str, problems: list[ConfigProblem]) -> None:
        listing = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"{file}: {len(problems)} problem(s) (error {int(self.code)}):\n{listing}")
        self.file = str(file)
        self.problems = problems


class SecretMissing(ConnectorConfigError):
    """A `${VAR}` reference to an environment variable that is not set."""

    code = ErrorCode.CONNECTOR_SECRET_MISSING


class ConnectorNotFound(TerminalError):
    code = ErrorCode.CONNECTOR_NOT_FOUND

    def __init__(self, name: str) -> None:
        super().__init__(
            f"Connector '{name}' not found: no `hub connect run` has announced it. "
            "GET /v1/connectors lists the known connectors."
        )


class UnparseableRecord(TerminalError):
    """Source data (a log line, a row) that cannot become a record; it goes to the DLQ."""

    code = ErrorCode.UNPARSEABLE_SOURCE_RECORD


class SourceUnavailable(TransientError):
    """A connector's source (a JDBC database) could not be reached; the task retries it."""

    code = ErrorCode.SOURCE_UNAVAILABLE


class Stopped(Exception):
    """Raised inside a source when its task is asked to stop; the runtime catches it."""
