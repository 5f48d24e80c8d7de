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


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """One version of a subject: the schema it points to and where it sits."""

    subject: Subject
    version: Version
    schema_id: SchemaId
    schema: str
    schema_type: SchemaType = SchemaType.AVRO
