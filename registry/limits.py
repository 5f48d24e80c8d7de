"""The bounds on what a registry request names: subject names, schema ids and versions.

Each is checked before the database sees it, so a name or number no store could hold is answered
with the registry's own error instead of failing in the driver.
"""

import re

from registry.errors import InvalidSchemaId, InvalidSubject, InvalidVersion, SchemaNotFound
from registry.types import Subject, Version

_MAX_VERSION = 2**31 - 1
# A Confluent client holds a schema id in an int32, so no id may exceed 2^31-1. Imported
# (explicit) ids stop at 2^30-1: automatic ids continue after the largest id in the table, so
# this keeps at least 2^30 automatic ids free whatever was imported (docs/registry.md).
MAX_SCHEMA_ID = 2**31 - 1
MAX_IMPORTED_SCHEMA_ID = 2**30 - 1


def check_explicit_id(schema_id: int | None, version: int | None) -> None:
    """An imported id must be within 1..2^30-1 (42228) and a version within 1..2^31-1 (42202)."""
    if schema_id is not None and not 1 <= schema_id <= MAX_IMPORTED_SCHEMA_ID:
        raise InvalidSchemaId(
            f"Schema id {schema_id} cannot be imported: explicit ids must be between 1 and "
            f"{MAX_IMPORTED_SCHEMA_ID} (2^30-1), which keeps ids within a Confluent client's "
            "int32 and leaves room for the ids the registry assigns itself."
        )
    if version is not None and not 1 <= version <= _MAX_VERSION:
        raise InvalidVersion(str(version))


# Characters of a subject name: the width of the `subject` columns (varchar(255)).
MAX_SUBJECT_LENGTH = 255
# C0 controls and DEL: PostgreSQL text cannot hold NUL, and none of them belongs in a name.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_subject(text: str, *, what: str = "Subject") -> Subject:
    """A subject name from a request; 42208 when no store could hold it.

    Confluent's registry takes any string, but the database columns are 255 characters wide
    and PostgreSQL refuses NUL in text: checked here, such names would fail in the driver as a
    500. Control characters are refused too, since they only ever hide a name in logs.
    """
    if not text or len(text) > MAX_SUBJECT_LENGTH or _CONTROL.search(text):
        shown = _CONTROL.sub("?", text[:60])
        raise InvalidSubject(
            f"{what} '{shown}{'...' if len(text) > 60 else ''}' is not a valid subject name: "
            f"a subject has 1 to {MAX_SUBJECT_LENGTH} characters and no control characters "
            f"(NUL, line breaks); this one has {len(text):,}. Use e.g. '<domain>.<name>-value'."
        )
    return Subject(text)


def check_id_range(schema_id: int) -> None:
    """40403 for an id no schema can have, before the database sees it: PostgreSQL refuses a
    number beyond its integer columns with an error instead of finding nothing."""
    if not 1 <= schema_id <= MAX_SCHEMA_ID:
        raise SchemaNotFound(schema_id)


def parse_version(text: str) -> Version | None:
    """A version path parameter: a positive integer, or `latest`/-1 (returned as None)."""
    if text in ("latest", "-1"):
        return None
    try:
        version = int(text)
    except ValueError:
        raise InvalidVersion(text) from None
    if not 1 <= version <= _MAX_VERSION:
        raise InvalidVersion(text)
    return Version(version)
