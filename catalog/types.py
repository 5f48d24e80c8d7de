"""Value types of the catalog."""

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum, unique
from typing import NewType

TeamName = NewType("TeamName", str)


@unique
class FeedKind(StrEnum):
    """What a feed's records are.

    EVENT: things that happened; the topic deletes old records after its retention.
    CHANGELOG: the state of keyed entities; the topic is compacted to the latest record per key,
    and a delete is a tombstone (a record with a key and no value).
    """

    EVENT = "event"
    CHANGELOG = "changelog"


@dataclass(frozen=True, slots=True)
class Feed:
    """A topic with an owner team, a kind and a value schema (subject `<topic>-value`)."""

    topic: str
    owner: TeamName
    kind: FeedKind
    partitions: int
    key_fields: tuple[str, ...]
    retention_ms: int | None
    description: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Team:
    name: TeamName
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key as stored: never its secret, which is shown once when it is created."""

    key_id: str
    team: TeamName | None
    admin: bool
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts for: a team's key, or an admin key (team None)."""

    key_id: str
    team: TeamName | None
    admin: bool

    def may_write(self, owner: TeamName) -> bool:
        """Whether this principal may publish to or administer a feed owned by `owner`."""
        return self.admin or self.team == owner
