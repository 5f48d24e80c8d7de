"""The hub's error catalogue and the exception types every package raises.

One catalogue for the whole hub, kept at the bottom layer so that every package can raise a
stable code. As in the Confluent Schema Registry, the first three digits of a code are its HTTP
status. Registry codes are Confluent's own so that existing clients understand them.
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
    # 409: a schema the subject's compatibility level rejects (Confluent's number)
    INCOMPATIBLE_SCHEMA = 40901
    FEED_EXISTS = 40920
    TEAM_EXISTS = 40921
    IDEMPOTENCY_KEY_IN_USE = 40922
    # 413/415: the body is too large, or not JSON
    PAYLOAD_TOO_LARGE = 41301
    UNSUPPORTED_MEDIA_TYPE = 41501
    # 422: the content is well-formed but invalid (Confluent's numbers first)
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_COMPATIBILITY_LEVEL = 42203
    INVALID_MODE = 42204
    OPERATION_NOT_PERMITTED = 42205
    REFERENCE_EXISTS = 42206
    ID_DOES_NOT_MATCH = 42207
    INVALID_RECORD = 42220
    INVALID_WIRE_FORMAT = 42221
    INVALID_FEED = 42222
    IDEMPOTENCY_KEY_REUSED = 42223
    TOO_MANY_RECORDS = 42224
    BATCH_REJECTED = 42225
    TOMBSTONE_NOT_ALLOWED = 42226
    INVALID_CONNECTOR_CONFIG = 42240
    CONNECTOR_SECRET_MISSING = 42241
    UNPARSEABLE_SOURCE_RECORD = 42242
    CDC_SETUP_FAILED = 42250
    INVALID_WAREHOUSE_MODEL = 42260
    INVALID_SETTING = 42270
    # 5xx: the hub or something it depends on failed
    STORE_ERROR = 50001
    LOCAL_SERVICE_FAILED = 50010
    KAFKA_REFUSED = 50020
    KAFKA_UNAVAILABLE = 50301
    CDC_SOURCE_UNAVAILABLE = 50330

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
    """A dependency failed; the same request may succeed later."""

    retryable = True


class SubjectNotFound(TerminalError):
    code = ErrorCode.SUBJECT_NOT_FOUND

    def __init__(self, subject: str) -> None:
        super().__init__(f"Subject '{subject}' not found.")
        self.subject = subject


class VersionNotFound(TerminalError):
    code = ErrorCode.VERSION_NOT_FOUND

    def __init__(self, subject: str, version: int | str) -> None:
        super().__init__(f"Version {version} not found for subject '{subject}'.")


class SubjectSoftDeleted(TerminalError):
    code = ErrorCode.SUBJECT_SOFT_DELETED

    def __init__(self, subject: str) -> None:
        super().__init__(
            f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently."
        )


class SubjectNotSoftDeleted(TerminalError):
    code = ErrorCode.SUBJECT_NOT_SOFT_DELETED

    def __init__(self, subject: str) -> None:
        super().__init__(
            f"Subject '{subject}' was not deleted first before being permanently deleted: "
            "delete it without permanent=true first."
        )


class VersionSoftDeleted(TerminalError):
    code = ErrorCode.VERSION_SOFT_DELETED

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(
            f"Subject '{subject}' version {version} was soft deleted. "
            "Set permanent=true to delete permanently."
        )


class VersionNotSoftDeleted(TerminalError):
    code = ErrorCode.VERSION_NOT_SOFT_DELETED

    def __init__(self, subject: str, version: int) -> None:
        super().__init__(
            f"Subject '{subject}' version {version} was not deleted first before being "
            "permanently deleted: delete it without permanent=true first."
        )


class CompatibilityNotConfigured(TerminalError):
    code = ErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED

    def __init__(self, subject: str) -> None:
        super().__init__(
            f"Subject '{subject}' does not have subject-level compatibility configured; "
            "pass defaultToGlobal=true to get the global level."
        )


class ModeNotConfigured(TerminalError):
    code = ErrorCode.SUBJECT_MODE_NOT_CONFIGURED

    def __init__(self, subject: str) -> None:
        super().__init__(
            f"Subject '{subject}' does not have subject-level mode configured; "
            "pass defaultToGlobal=true to get the global mode."
        )


class IncompatibleSchema(TerminalError):
    """A schema the subject's compatibility level rejects; `reasons` lists every problem."""

    code = ErrorCode.INCOMPATIBLE_SCHEMA

    def __init__(self, message: str, *, reasons: list[str]) -> None:
        super().__init__(message)
        self.reasons = reasons


class InvalidCompatibilityLevel(TerminalError):
    code = ErrorCode.INVALID_COMPATIBILITY_LEVEL


class InvalidMode(TerminalError):
    code = ErrorCode.INVALID_MODE


class OperationNotPermitted(TerminalError):
    code = ErrorCode.OPERATION_NOT_PERMITTED


class ReferenceExists(TerminalError):
    code = ErrorCode.REFERENCE_EXISTS


class IdDoesNotMatch(TerminalError):
    code = ErrorCode.ID_DOES_NOT_MATCH


class SchemaNotFound(TerminalError):
    code = ErrorCode.SCHEMA_NOT_FOUND

    def __init__(self, schema_id: int | None = None, *, message: str | None = None) -> None:
        super().__init__(message or f"Schema {schema_id} not found.")

    @classmethod
    def under(cls, subject: str) -> "SchemaNotFound":
        """The schema looked up is not registered under `subject`."""
        return cls(message=f"Schema not found under subject '{subject}'.")


class InvalidSchema(TerminalError):
    code = ErrorCode.INVALID_SCHEMA


class InvalidVersion(TerminalError):
    code = ErrorCode.INVALID_VERSION

    def __init__(self, version: str) -> None:
        super().__init__(
            f"The specified version '{version}' is not a valid version id. "
            'Allowed values are between [1, 2^31-1] and the string "latest"'
        )


class InvalidRecord(TerminalError):
    """A record that does not match its schema; `path` names the field at fault."""

    code = ErrorCode.INVALID_RECORD

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class TombstoneNotAllowed(InvalidRecord):
    """A null value (a delete marker) sent to a feed that is not a compacted changelog."""

    code = ErrorCode.TOMBSTONE_NOT_ALLOWED

    def __init__(self, feed: str, kind: str) -> None:
        super().__init__(
            f"$.value: a null value (a tombstone) is only allowed in changelog feeds; "
            f"feed '{feed}' is of kind '{kind}'. Send the record's value, or publish deletes "
            "to a changelog feed.",
            path="$.value",
        )


class InvalidWireFormat(TerminalError):
    code = ErrorCode.INVALID_WIRE_FORMAT


class StoreUnavailable(TransientError):
    code = ErrorCode.STORE_ERROR


class LocalServiceFailed(TerminalError):
    """A part the hub runs itself (broker, API server, loader) could not start or run."""

    code = ErrorCode.LOCAL_SERVICE_FAILED
