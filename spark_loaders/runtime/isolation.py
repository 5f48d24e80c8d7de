"""Telling a feed's own failure from a failure of what every feed depends on.

The bronze loader lands all topics in one micro-batch. When landing one topic raises, the
loader must decide, without knowing the exception in advance, between:

- `FailureKind.DEPENDENCY`: the registry, the metastore or table storage is away, or a
  concurrent commit got in first. Every topic would fail the same way and a retry can help, so
  it is retried with backoff and, if it lasts, fails the batch: the query restarts from its
  checkpoint and nothing is lost. Quarantining here would fill quarantine with good records.
- `FailureKind.LOADER`: the loader itself is stopping or broken (interrupted, out of memory,
  the JVM gone). Not the feed's fault either: the batch fails and is redone on restart.
- `FailureKind.FEED`: anything else, e.g. Spark refusing the topic's schema or a write error
  of that topic's table. A retry repeats it, so the topic's records are set aside
  (quarantined, else parked) and the other topics keep landing.

The warehouse passes classify a failing gold table's exception the same way
(`spark_loaders.warehouse.build`).

Spark raises Java exceptions through Py4J as a few Python classes whose text carries the Java
class, so the markers below are matched in the text; `TransientError` subclasses say it in
their type. Messages shown to users keep one line of the exception, with anything that looks
like a credential masked: exception texts can quote JDBC URLs and connection strings.
"""

import re
from enum import StrEnum, unique

from hub_core.errors import LocalServiceFailed, TransientError
from spark_loaders.errors import MetastoreUnavailable, RegistryUnavailable, TableCommitConflict


@unique
class FailureKind(StrEnum):
    DEPENDENCY = "dependency"
    LOADER = "loader"
    FEED = "feed"


# The Hive client, JDBC drivers (Derby, PostgreSQL, MySQL) and Thrift when the metastore or
# the storage behind the tables cannot be reached.
_UNREACHABLE = (
    "Could not connect to meta store",
    "Unable to instantiate org.apache.hadoop.hive",
    "TTransportException",
    "SQLNonTransientConnectionException",
    "Error connecting to server",
    "Communications link failure",
    "java.net.ConnectException",
    "Connection refused",
    "ConnectTimeoutException",
    "SocketTimeoutException",
    "UnknownHostException",
)
# Delta's optimistic concurrency: another writer committed first; an idempotent write may rerun.
_CONCURRENT = ("DELTA_CONCURRENT_", "ConcurrentAppendException", "ConcurrentTransactionException")
# The loader is being stopped or cannot go on; the batch is redone after a restart.
_LOADER = (
    "InterruptedException",
    "SparkContext was shut down",
    "SparkContext has been shutdown",
    "cancelled because SparkContext",
    "OutOfMemoryError",
    "Py4JNetworkError",
    "Answer from Java side is empty",
    # A job group cancelled at shutdown (the silver and warehouse passes' `JOB_GROUP`).
    "SPARK_JOB_CANCELLED",
    "cancelled part of cancelled job group",
)
_SECRETS = (
    # user:password@ in URLs
    (re.compile(r"(://)[^/\s:@]+:[^/\s@]+@"), r"\1***@"),
    # password=..., secret=..., token=..., key=... in JDBC URLs, query strings and configs
    (re.compile(r"(?i)\b([\w.-]*(?:password|passwd|secret|token|key))=([^;&\s,)]+)"), r"\1=***"),
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+"), r"\1 ***"),
)
_MAX_MESSAGE = 300
_PY4J_CALL = "An error occurred while calling"
_JAVA_LINE = re.compile(r"(?P<name>[\w$.]+)(?::\s*(?P<message>.*))?$")


def classify(error: BaseException) -> FailureKind:
    """Whose failure `error` is; see the module docstring."""
    if not isinstance(error, Exception):
        return FailureKind.LOADER  # KeyboardInterrupt, SystemExit
    if isinstance(error, TransientError):
        return FailureKind.DEPENDENCY
    if isinstance(error, LocalServiceFailed):
        return FailureKind.LOADER  # misconfigured (e.g. no registry key): every feed would fail
    text = f"{type(error).__name__} {error}"
    if any(marker in text for marker in _LOADER) or isinstance(error, MemoryError):
        return FailureKind.LOADER
    if any(marker in text for marker in _UNREACHABLE + _CONCURRENT):
        return FailureKind.DEPENDENCY
    return FailureKind.FEED


def stopped_on_dependency(failure: BaseException) -> bool:
    """Whether a streaming query stopped because a dependency stayed away.

    Spark reports an exception raised in `foreachBatch` as a `StreamingQueryException` whose
    text holds the Python traceback, so the loader's transient classes are found by name.
    """
    text = str(failure)
    names = (RegistryUnavailable, MetastoreUnavailable, TableCommitConflict)
    return any(f"{cls.__name__}:" in text for cls in names)


def as_transient(error: Exception) -> TransientError:
    """A dependency failure as the `TransientError` that the retries recognise."""
    if isinstance(error, TransientError):
        return error
    if any(marker in str(error) for marker in _CONCURRENT):
        return TableCommitConflict(
            f"A concurrent commit kept refusing a table write: {describe(error)}"
        )
    return MetastoreUnavailable(
        f"The metastore or the table storage is unreachable: {describe(error)}. Check "
        "HUB_LOADER_METASTORE_* and the warehouse storage; the batch is retried and, if this "
        "lasts, redone from the checkpoint."
    )


def describe(error: BaseException) -> str:
    """`<ExceptionClass>: <first line of its message>`, credentials masked, length bounded.

    No traceback: Spark's carry the JVM stack and, at times, the settings of the session.
    """
    condition = getattr(error, "getCondition", None)
    name = type(error).__name__
    code = condition() if callable(condition) else None
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    first = lines[0] if lines else "(no message)"
    if first.startswith(_PY4J_CALL) and len(lines) > 1:
        # "An error occurred while calling o149.withColumn." then ": <java class>: <message>"
        java = _JAVA_LINE.match(lines[1].lstrip(": "))
        if java:
            name, first = java["name"].rsplit(".", 1)[-1], java["message"] or "(no message)"
    return f"{name}{f' [{code}]' if code and code not in first else ''}: {redact(first)}"


def redact(text: str) -> str:
    """`text` with anything shaped like a credential masked, cut to a readable length."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"
