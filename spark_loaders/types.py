"""Vocabularies of the Spark loaders."""

from enum import StrEnum, unique


@unique
class QuarantineReason(StrEnum):
    """Why a record is in quarantine; stable codes that operators and alerts can match."""

    NOT_CONFLUENT_FRAMED = "NOT_CONFLUENT_FRAMED"
    WRITER_SCHEMA_UNKNOWN = "WRITER_SCHEMA_UNKNOWN"
    SCHEMA_UNRESOLVABLE = "SCHEMA_UNRESOLVABLE"
    PAYLOAD_UNDECODABLE = "PAYLOAD_UNDECODABLE"
    TYPE_CHANGE_UNSUPPORTED = "TYPE_CHANGE_UNSUPPORTED"
