"""Errors of the Spark loaders."""

from hub_core.errors import ErrorCode, LocalServiceFailed, TerminalError, TransientError


class LoaderError(LocalServiceFailed):
    """The loader cannot run as configured; the message says what to fix."""


class AnalystAuthRequired(TerminalError):
    """The Thrift server would serve every table to anyone who reaches a non-loopback address."""

    code = ErrorCode.ANALYST_AUTH_REQUIRED


class LoaderSourceNotFound(TerminalError):
    """What a loader command was asked to read does not exist or holds nothing."""

    code = ErrorCode.LOADER_SOURCE_NOT_FOUND


class MetastoreError(LocalServiceFailed):
    """The metastore is not reachable as configured, or its local server failed."""


class MetastoreDatabaseUnreachable(MetastoreError):
    """The metastore database refused the connection a process makes before Spark starts (a
    wrong password, an unknown database) or did not answer; the process stops at once."""

    code = ErrorCode.METASTORE_UNAVAILABLE


class RegistryUnavailable(TransientError):
    """The schema registry did not answer, or answered 5xx or 429; the client retries it."""

    code = ErrorCode.REGISTRY_UNAVAILABLE


class MetastoreUnavailable(TransientError):
    """The metastore (or the storage behind the tables) did not answer while landing a batch;
    the batch is retried, and redone from the checkpoint if it lasts."""

    code = ErrorCode.METASTORE_UNAVAILABLE


class TableCommitConflict(TransientError):
    """Delta refused a commit because another writer committed first; an idempotent write may
    simply run again."""

    code = ErrorCode.STORE_ERROR


class SparkClusterError(LocalServiceFailed):
    """The local Spark standalone cluster (master or a worker) could not start."""
