"""The hub's error catalogue and the roots of every exception the hub raises.

One catalogue for the whole hub, in the base package so that every package can raise a stable
code without depending on another. As in the Confluent Schema Registry, the first three digits
of a code are its HTTP status. Registry codes are Confluent's own so that existing clients
understand them. Each package keeps its own exception classes in its `errors.py`; whether a
retry can help is in their type (`TransientError` or `TerminalError`).
"""

from enum import IntEnum, unique


@unique
class ErrorCode(IntEnum):
    """Stable, user-visible error codes. Never renumber one; add new ones."""

    # 400: the request itself is malformed
    MALFORMED_REQUEST = 40001
    # 401/403: who is asking, and whether they may
    UNAUTHENTICATED = 40101
    FORBIDDEN = 40301
    CONSOLE_FORM_REFUSED = 40310
    # 404: the thing named does not exist (Confluent's numbers)
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    SUBJECT_SOFT_DELETED = 40404
    SUBJECT_NOT_SOFT_DELETED = 40405
    VERSION_SOFT_DELETED = 40406
    VERSION_NOT_SOFT_DELETED = 40407
    SUBJECT_COMPATIBILITY_NOT_CONFIGURED = 40408
    SUBJECT_MODE_NOT_CONFIGURED = 40409
    FEED_NOT_FOUND = 40420
    TEAM_NOT_FOUND = 40421
    KEY_NOT_FOUND = 40422
    CONNECTOR_NOT_FOUND = 40430
    WAREHOUSE_SOURCE_NOT_FOUND = 40440
    LOADER_SOURCE_NOT_FOUND = 40450
    LOADER_CONTROL_DISABLED = 40451
    LINEAGE_NOT_FOUND = 40460
    # 408: the request's body did not arrive in time
    REQUEST_TIMEOUT = 40801
    # 409: a schema the subject's compatibility level rejects (Confluent's number)
    INCOMPATIBLE_SCHEMA = 40901
    FEED_EXISTS = 40920
    TEAM_EXISTS = 40921
    IDEMPOTENCY_KEY_IN_USE = 40922
    TOPIC_EXISTS_OUTSIDE_HUB = 40923
    TABLE_NAME_TAKEN = 40924
    FEED_SUBJECT_TAKEN = 40925
    # 413/415: the body is too large, or not JSON
    PAYLOAD_TOO_LARGE = 41301
    RECORD_TOO_LARGE = 41302
    UNSUPPORTED_MEDIA_TYPE = 41501
    # 422: the content is well-formed but invalid (Confluent's numbers first)
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    INVALID_MODE = 42204
    OPERATION_NOT_PERMITTED = 42205
    REFERENCE_EXISTS = 42206
    ID_DOES_NOT_MATCH = 42207
    INVALID_SUBJECT = 42208
    INVALID_RECORD = 42220
    INVALID_WIRE_FORMAT = 42221
    INVALID_FEED = 42222
    IDEMPOTENCY_KEY_REUSED = 42223
    TOO_MANY_RECORDS = 42224
    BATCH_REJECTED = 42225
    TOMBSTONE_NOT_ALLOWED = 42226
    RESERVED_TOPIC_NAME = 42227
    INVALID_SCHEMA_ID = 42228
    FEED_QUOTA_EXCEEDED = 42229
    PARTITION_QUOTA_EXCEEDED = 42230
    RESERVED_HEADER_NAME = 42231
    INVALID_CONNECTOR_CONFIG = 42240
    CONNECTOR_SECRET_MISSING = 42241
    UNPARSEABLE_SOURCE_RECORD = 42242
    CONNECTOR_SOURCE_MISMATCH = 42243
    CDC_SETUP_FAILED = 42250
    INVALID_WAREHOUSE_MODEL = 42260
    INVALID_SETTING = 42270
    INVALID_LINEAGE_QUERY = 42280
    INVALID_ROW_KEY = 42281
    ANALYST_AUTH_REQUIRED = 42271
    SQL_STATEMENT_REFUSED = 42272
    # 429: the caller sends requests faster than its key's rate limit
    RATE_LIMITED = 42901
    # 431: the request's line and headers are too large
    REQUEST_HEADERS_TOO_LARGE = 43101
    # 5xx: the hub or something it depends on failed
    STORE_ERROR = 50001
    LOCAL_SERVICE_FAILED = 50010
    LOADER_ACTION_FAILED = 50030
    KAFKA_REFUSED = 50020
    KAFKA_AUTH_FAILED = 50021
    KAFKA_TLS_FAILED = 50022
    KAFKA_UNAVAILABLE = 50301
    REGISTRY_UNAVAILABLE = 50302
    DATABASE_UNAVAILABLE = 50303
    API_BUSY = 50304
    PRODUCER_QUEUE_FULL = 50305
    BODY_BUFFERS_FULL = 50306
    CDC_SOURCE_UNAVAILABLE = 50330
    SOURCE_UNAVAILABLE = 50331
    METASTORE_UNAVAILABLE = 50340
    ANALYST_SERVER_UNAVAILABLE = 50341
    LOADER_NOT_CONFIGURED = 50350
    LOADER_UNREACHABLE = 50351

    @property
    def http_status(self) -> int:
        """The HTTP status a code is answered with: its first three digits."""
        digits = str(self.value)
        return int(digits[:3])


class HubError(Exception):
    """An error a user can see: a stable code and a message naming what is at fault."""

    code: ErrorCode = ErrorCode.MALFORMED_REQUEST
    retryable: bool = False

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class TerminalError(HubError):
    """Retrying the same input cannot help: the input or the request is wrong."""

    retryable = False


class TransientError(HubError):
    """A dependency failed; the same request may succeed later (`hub_core.retries` retries it)."""

    retryable = True

    def __init__(
        self, message: str, *, code: ErrorCode | None = None, retry_after_s: float | None = None
    ) -> None:
        super().__init__(message, code=code)
        # How long the failing service asked us to wait (an HTTP `Retry-After`), when it said.
        self.retry_after_s = retry_after_s


class StoreUnavailable(TransientError):
    """The store could not complete the operation (e.g. concurrent writers kept conflicting)."""

    code = ErrorCode.STORE_ERROR


class DatabaseUnavailable(StoreUnavailable):
    """The hub's database could not be reached or refused to work: answered 503, retry later.

    The message never carries the driver's text (it can name hosts, users and databases); the
    database helper logs that server-side.
    """

    code = ErrorCode.DATABASE_UNAVAILABLE


class LocalServiceFailed(TerminalError):
    """A part the hub runs itself (broker, API server, loader) could not start or run."""

    code = ErrorCode.LOCAL_SERVICE_FAILED
