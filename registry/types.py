"""Domain identifiers and value types of the registry."""

from dataclasses import dataclass
from enum import StrEnum, unique
from typing import NewType

Subject = NewType("Subject", str)
SchemaId = NewType("SchemaId", int)
Version = NewType("Version", int)


@unique
class SchemaType(StrEnum):
    """Schema languages the registry stores (Confluent's `schemaType`)."""

    AVRO = "AVRO"


@unique
class CompatibilityMode(StrEnum):
    """Which registered versions a new schema is checked against, and in which direction.

    BACKWARD: the new schema reads data written with the latest version. FORWARD: the latest
    version reads data written with the new schema. FULL: both. The `_TRANSITIVE` forms check
    against every registered version instead of the latest. NONE checks nothing.
    """

    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


@unique
class RegistryMode(StrEnum):
    """What writes a subject (or the whole registry) accepts.

    READWRITE: normal operation. READONLY: no registrations or deletions. IMPORT: schemas are
    registered with the id and version they had elsewhere, and compatibility is not checked.
    """

    READWRITE = "READWRITE"
    READONLY = "READONLY"
    IMPORT = "IMPORT"


@dataclass(frozen=True, slots=True)
class SchemaReference:
    """A named type that a schema takes from a version of another subject."""

    name: str
    subject: Subject
    version: Version


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """One version of a subject: the schema it points to and where it sits."""

    subject: Subject
    version: Version
    schema_id: SchemaId
    schema: str
    schema_type: SchemaType = SchemaType.AVRO
    references: tuple[SchemaReference, ...] = ()
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class StoredSchema:
    """A schema as stored under its id: its text and the references it was registered with."""

    schema_id: SchemaId
    schema: str
    references: tuple[SchemaReference, ...] = ()
