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
    UNSUPPORTED_CONTENT_TYPE = 41501
    # 404: the thing named does not exist (Confluent's numbers)
    SUBJECT_NOT_FOUND = 40401
    VERSION_NOT_FOUND = 40402
    SCHEMA_NOT_FOUND = 40403
    FEED_NOT_FOUND = 40420
    # 409: a schema the subject's compatibility level rejects (Confluent's number)
    INCOMPATIBLE_SCHEMA = 409
    # 422: the content is well-formed but invalid (Confluent's numbers first)
    INVALID_SCHEMA = 42201
    INVALID_VERSION = 42202
    INVALID_RECORD = 42220
    INVALID_WIRE_FORMAT = 42221
    # 5xx: the hub or something it depends on failed
    STORE_ERROR = 50001
    KAFKA_UNAVAILABLE = 50301

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


class SchemaNotFound(TerminalError):
    code = ErrorCode.SCHEMA_NOT_FOUND

    def __init__(self, schema_id: int) -> None:
        super().__init__(f"Schema {schema_id} not found.")


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


class InvalidWireFormat(TerminalError):
    code = ErrorCode.INVALID_WIRE_FORMAT


class StoreUnavailable(TransientError):
    code = ErrorCode.STORE_ERROR
