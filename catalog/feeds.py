"""Feeds in the catalog database."""

import json

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from catalog.errors import FeedExists, FeedNotFound, TeamNotFound
from catalog.tables import FeedRow, TeamRow
from catalog.types import Feed, FeedKind, TeamName
from hub_core.database import transaction


class FeedStore:
    """Register, get, list, update and delete feeds."""

    def __init__(self, engine: Engine) -> None:
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def register(self, *, feed: Feed) -> Feed:
        """Store a new feed; 40920 if its topic is taken, 40421 if its team does not exist."""
        try:
            with transaction(self._sessions) as session:
                if session.get(TeamRow, feed.owner) is None:
                    raise TeamNotFound(feed.owner)
                session.add(
                    FeedRow(
                        topic=feed.topic,
                        owner=feed.owner,
                        kind=feed.kind.value,
                        partitions=feed.partitions,
                        key_fields=json.dumps(list(feed.key_fields)),
                        retention_ms=feed.retention_ms,
                        description=feed.description,
                        created_at=feed.created_at,
                    )
                )
        except IntegrityError as exc:
            raise FeedExists(feed.topic) from exc
        return feed

    def get(self, *, topic: str) -> Feed:
        if not _storable(topic):
            raise FeedNotFound(topic)
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic)
            if row is None:
                raise FeedNotFound(topic)
            return _feed(row)

    def find(self, *, topic: str) -> Feed | None:
        """The feed of `topic`, or None."""
        if not _storable(topic):
            return None
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic)
            return None if row is None else _feed(row)

    def find_by_table(self, *, table_suffix: str) -> Feed | None:
        """The feed whose topic, dots as underscores, is `table_suffix` (its tables' names), or
        None: `sales_eu.orders` and `sales.eu_orders` share one, so at most one is a feed."""
        if not _storable(table_suffix):
            return None
        with transaction(self._sessions) as session:
            query = select(FeedRow).where(func.replace(FeedRow.topic, ".", "_") == table_suffix)
            row = session.scalars(query.order_by(FeedRow.topic).limit(1)).first()
            return None if row is None else _feed(row)

    def update(
        self, *, topic: str, description: str | None = None, retention_ms: int | None = None
    ) -> Feed:
        """Change a feed's description and/or retention; None leaves a value as it is."""
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic, with_for_update=True)
            if row is None:
                raise FeedNotFound(topic)
            if description is not None:
                row.description = description
            if retention_ms is not None:
                row.retention_ms = retention_ms
            return _feed(row)

    def delete(self, *, topic: str) -> None:
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic)
            if row is None:
                raise FeedNotFound(topic)
            session.delete(row)

    def team_exists(self, *, team: TeamName) -> bool:
        """Whether `team` exists: a new feed's owner must, and is checked before anything of
        the feed is written."""
        if not _storable(team):
            return False
        with transaction(self._sessions) as session:
            return session.get(TeamRow, team) is not None

    def count(self, *, owner: TeamName) -> int:
        """How many feeds `owner` has (for its quota)."""
        with transaction(self._sessions) as session:
            query = select(func.count()).select_from(FeedRow).where(FeedRow.owner == owner)
            return int(session.scalar(query) or 0)

    # Last in the class, so that `list` above means the builtin.
    def list(self, *, owner: TeamName | None = None) -> list[Feed]:
        if owner is not None and not _storable(owner):
            return []
        with transaction(self._sessions) as session:
            query = select(FeedRow).order_by(FeedRow.topic)
            if owner is not None:
                query = query.where(FeedRow.owner == owner)
            return [_feed(row) for row in session.scalars(query)]


def _storable(name: str) -> bool:
    """Whether a topic or team name could be in the catalog at all. PostgreSQL text cannot
    hold NUL, and its driver fails a query with one instead of finding nothing; no stored
    name has one (topics are checked by `hub_core.naming`), so such a lookup finds nothing."""
    return "\x00" not in name


def _feed(row: FeedRow) -> Feed:
    return Feed(
        topic=row.topic,
        owner=TeamName(row.owner),
        kind=FeedKind(row.kind),
        partitions=row.partitions,
        key_fields=tuple(json.loads(row.key_fields)),
        retention_ms=row.retention_ms,
        description=row.description,
        created_at=row.created_at,
    )
