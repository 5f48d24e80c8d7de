"""Errors of the publish path, and the codes of the Confluent REST Proxy endpoint.

The REST Proxy codes are Confluent REST Proxy's own, so that its clients understand them. They
cannot join the hub's catalogue (`hub_core.errors.ErrorCode`): the same numbers mean other
things there (42201 is the registry's "invalid schema", the REST Proxy's "key schema missing").
Only that endpoint answers with them; like the hub's, a code's first three digits are its HTTP
status.
"""

from enum import IntEnum, unique

from hub_core.errors import ErrorCode, TerminalError


@unique
class ProxyErrorCode(IntEnum):
    """Whole-request errors, with the REST Proxy's numbers (42200 is the hub's addition)."""

    TOPIC_NOT_FOUND = 40401
    UNKNOWN_TOPIC_OR_PARTITION = 40403  # v3's answer for a topic that is not there
    PARTITION_NOT_SUPPORTED = 42200  # the hub partitions by key; a record cannot choose
    VALUE_SCHEMA_MISSING = 42202
    JSON_CONVERSION_FAILED = 42203  # no record of the request could be converted and published
    INVALID_SCHEMA = 42205
    SCHEMA_NOT_USABLE = 42207  # registering or looking up the schema failed (REST Proxy 6+)

    @property
    def http_status(self) -> int:
        return int(str(self.value)[:3])


@unique
class RecordErrorCode(IntEnum):
    """Per-record `error_code`s of Kafka failures, as the REST Proxy documents them.

    Records the hub refuses as invalid carry the hub's own code instead (42220, ...).
    """

    KAFKA_ERROR = 1  # non-retriable
    KAFKA_RETRIABLE_ERROR = 2  # the same record may be accepted if sent again


class RecordTooLarge(TerminalError):
    """One record, encoded, is larger than Kafka accepts; refused before it is produced."""

    code = ErrorCode.RECORD_TOO_LARGE

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"$: the record is {size} bytes encoded (value, key and headers); Kafka accepts at "
            f"most {limit} (HUB_KAFKA_MAX_RECORD_BYTES). Make it smaller: split it, or move "
            "large content out of the record and publish a reference to it."
        )
        self.path = "$"


class ReservedHeaderName(TerminalError):
    """A publisher's record header named like the hub's own (`hub.*`, publish/headers.py)."""

    code = ErrorCode.RESERVED_HEADER_NAME

    def __init__(self, name: str) -> None:
        super().__init__(
            f"$.headers: header {name[:40]!r} is not allowed: header names starting with "
            "'hub.' (in any case) are reserved for the hub's lineage; rename the header."
        )
        self.path = "$.headers"


class ProxyRefused(Exception):
    """A whole request refused, with a REST Proxy code or one of the hub's."""

    def __init__(self, code: ProxyErrorCode | ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class FeedQuotaExceeded(TerminalError):
    """The owner team has as many feeds as its quota allows."""

    code = ErrorCode.FEED_QUOTA_EXCEEDED

    def __init__(self, team: str, quota: int) -> None:
        super().__init__(
            f"Team '{team}' owns {quota} feeds, its quota (HUB_API_QUOTA_FEEDS_PER_TEAM). "
            "Delete a feed it no longer needs, or ask the operator to raise the quota."
        )


class PartitionQuotaExceeded(TerminalError):
    """A new feed asks for more partitions than one feed may have."""

    code = ErrorCode.PARTITION_QUOTA_EXCEEDED

    def __init__(self, partitions: int, quota: int) -> None:
        super().__init__(
            f"partitions: {partitions} asked for; a feed may have at most {quota} "
            "(HUB_API_QUOTA_PARTITIONS_PER_FEED). Ask for fewer, or ask the operator to raise "
            "the quota."
        )
