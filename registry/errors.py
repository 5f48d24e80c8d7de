"""Errors of the schema registry, with Confluent's codes where Confluent has one."""

from hub_core.errors import ErrorCode, TerminalError


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


class InvalidSubject(TerminalError):
    """A subject name no store can hold: empty, too long, or with control characters."""

    code = ErrorCode.INVALID_SUBJECT


class InvalidSchemaId(TerminalError):
    """An explicit (imported) schema id outside the range the registry accepts."""

    code = ErrorCode.INVALID_SCHEMA_ID


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


class NotDirect(Exception):
    """The value is not exactly in its datum's shape: take the general path."""
