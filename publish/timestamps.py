"""The timestamp a publisher may give a record, and the rules it is held to.

A record's timestamp is ISO-8601 text (UTC when it names no zone) or epoch milliseconds, within
Kafka's range (from 0, 1970-01-01, to the largest int64) and not more than
`MAX_TIMESTAMP_AHEAD_MS` ahead of the hub's clock. A record without one is stamped by Kafka when
it gets it.
"""

from datetime import UTC, datetime, timedelta
from typing import Any

from registry.errors import InvalidRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Kafka's largest timestamp: the largest int64.
MAX_TIMESTAMP_MS = 2**63 - 1
# How far ahead of now a record's timestamp may be: Kafka 4's default of the broker setting
# `log.message.timestamp.after.max.ms`. The broker refuses a later timestamp for the whole
# produce batch the record travels in, so the other records of the request would fail with it
# (as a 5xx); refused here, the record alone is answered 42220.
MAX_TIMESTAMP_AHEAD_MS = 3_600_000


def too_far_ahead(timestamp: Any) -> InvalidRecord:
    """The error of a timestamp more than `MAX_TIMESTAMP_AHEAD_MS` ahead of the hub's clock."""
    return InvalidRecord(
        f"$.timestamp: {str(timestamp)[:40]} is more than {MAX_TIMESTAMP_AHEAD_MS // 60_000} "
        "minutes ahead of the hub's clock; Kafka refuses records from the future "
        "(log.message.timestamp.after.max.ms). Send the time the event happened.",
        path="$.timestamp",
    )


def epoch_ms(timestamp: Any) -> int | None:
    """A record's Kafka timestamp: epoch milliseconds from 0 (1970) to the largest int64."""
    if timestamp is None:
        return None
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | str):
        raise InvalidRecord(
            "$.timestamp: expected ISO-8601 text or epoch milliseconds.", path="$.timestamp"
        )
    if isinstance(timestamp, int):
        milliseconds = timestamp
    else:
        try:
            moment = datetime.fromisoformat(timestamp)
        except ValueError as exc:
            raise InvalidRecord(
                f"$.timestamp: {timestamp!r} is not an ISO-8601 timestamp.", path="$.timestamp"
            ) from exc
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        milliseconds = (moment - _EPOCH) // timedelta(milliseconds=1)
    if not 0 <= milliseconds <= MAX_TIMESTAMP_MS:
        raise InvalidRecord(
            f"$.timestamp: {str(timestamp)[:40]} is outside Kafka's timestamps (epoch "
            f"milliseconds from 0, 1970-01-01, to {MAX_TIMESTAMP_MS}).",
            path="$.timestamp",
        )
    return milliseconds
