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
    # Who reads its records and the tables built from them: every team when public, else its
    # owner and the teams granted (`readers`); admins always (docs/security.md, "Read grants").
    read_public: bool = True
    readers: tuple[TeamName, ...] = ()

    def readable_by(self, principal: "Principal | None") -> bool:
        """Whether `principal` (None: a caller without a key) may read this feed's data."""
        if self.read_public:
            return True
        if principal is None:
            return False
        return principal.admin or principal.team == self.owner or principal.team in self.readers


@dataclass(frozen=True, slots=True)
class Team:
    name: TeamName
    created_at: datetime


@unique
class KeyRole(StrEnum):
    """What an API key may do (docs/adr/0060-a-loader-key-that-only-reads.md).

    A key's role is its team and admin flag as stored: a team key has a team, an admin key the
    flag, and a key with neither is the loader's, which the store issues only on request.
    """

    # Its team's feeds and subjects; every read.
    TEAM = "team"
    # Everything.
    ADMIN = "admin"
    # Every read the loader makes (schemas, subjects, feeds), and no write at all.
    LOADER = "loader"


def key_role(team: TeamName | None, admin: bool) -> KeyRole:
    """The role of a key with this team and admin flag."""
    if admin:
        return KeyRole.ADMIN
    return KeyRole.TEAM if team is not None else KeyRole.LOADER


@dataclass(frozen=True, slots=True)
class ApiKey:
    """An API key as stored: never its secret, which is shown once when it is created."""

    key_id: str
    team: TeamName | None
    admin: bool
    created_at: datetime
    revoked_at: datetime | None

    @property
    def role(self) -> KeyRole:
        return key_role(self.team, self.admin)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts for: a team's key, an admin key (team None), or the loader's key
    (neither team nor admin: it only reads)."""

    key_id: str
    team: TeamName | None
    admin: bool

    @property
    def role(self) -> KeyRole:
        return key_role(self.team, self.admin)

    def may_write(self, owner: TeamName) -> bool:
        """Whether this principal may publish to or administer a feed owned by `owner`."""
        return self.admin or self.team == owner


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    """A signed-in console session as stored: who it acts for and its times, never its id,
    which only the browser's cookie holds."""

    principal: Principal
    created_at: datetime
    expires_at: datetime  # the end of its absolute lifetime
    last_seen_at: datetime  # its idle timeout runs from here
