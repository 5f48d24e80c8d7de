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
    # Landing the topic's batch failed for a reason no retry fixes: all its records of the batch.
    LANDING_FAILED = "LANDING_FAILED"


@unique
class FeedState(StrEnum):
    """Where a topic stands in the bronze loader (`hub load status`)."""

    # Its records land in bronze (rejected ones in quarantine, with their own reasons).
    LANDING = "landing"
    # Its last batch could not be landed and went whole to `quarantine.<topic>`.
    QUARANTINING = "quarantining"
    # Not even quarantine could take its last batch: those offsets wait in Kafka.
    PARKED = "parked"


@unique
class GoldState(StrEnum):
    """Where a gold table stands in the warehouse passes (`hub load status`)."""

    # Its last pass built or refreshed it.
    BUILT = "built"
    # A table or column its model names does not exist yet (40440): the feed has no records.
    WAITING = "waiting"
    # Its last pass failed for a reason of its own; the other tables were built.
    FAILED = "failed"
    # A fact whose dimension failed in this pass: building it would assign wrong surrogate keys.
    SKIPPED = "skipped"
