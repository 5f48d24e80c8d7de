"""Feeds in the catalog database."""

import json

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from catalog.errors import FeedExists, FeedNotFound, TeamNotFound
from catalog.tables import FeedReaderRow, FeedRow, TeamRow
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
                        read_public=feed.read_public,
                    )
                )
                for team in feed.readers:
                    if session.get(TeamRow, team) is None:
                        raise TeamNotFound(team)
                    session.add(FeedReaderRow(topic=feed.topic, team=team))
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
            return _feed(row, _readers(session, [topic]))

    def find(self, *, topic: str) -> Feed | None:
        """The feed of `topic`, or None."""
        if not _storable(topic):
            return None
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic)
            return None if row is None else _feed(row, _readers(session, [topic]))

    def find_by_table(self, *, table_suffix: str) -> Feed | None:
        """The feed whose topic, dots as underscores, is `table_suffix` (its tables' names), or
        None: `sales_eu.orders` and `sales.eu_orders` share one, so at most one is a feed."""
        if not _storable(table_suffix):
            return None
        with transaction(self._sessions) as session:
            query = select(FeedRow).where(func.replace(FeedRow.topic, ".", "_") == table_suffix)
            row = session.scalars(query.order_by(FeedRow.topic).limit(1)).first()
            return None if row is None else _feed(row, _readers(session, [row.topic]))

    def update(
        self,
        *,
        topic: str,
        description: str | None = None,
        retention_ms: int | None = None,
        read_public: bool | None = None,
    ) -> Feed:
        """Change a feed's description, retention and/or read policy; None leaves a value."""
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic, with_for_update=True)
            if row is None:
                raise FeedNotFound(topic)
            if description is not None:
                row.description = description
            if retention_ms is not None:
                row.retention_ms = retention_ms
            if read_public is not None:
                row.read_public = read_public
            return _feed(row, _readers(session, [topic]))

    def grant(self, *, topic: str, team: TeamName) -> Feed:
        """Let `team` read a feed (kept when the feed is public, for when it is restricted)."""
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic, with_for_update=True)
            if row is None:
                raise FeedNotFound(topic)
            if not _storable(team) or session.get(TeamRow, team) is None:
                raise TeamNotFound(team)
            if session.get(FeedReaderRow, (topic, team)) is None:
                session.add(FeedReaderRow(topic=topic, team=team))
                session.flush()
            return _feed(row, _readers(session, [topic]))

    def revoke(self, *, topic: str, team: TeamName) -> Feed:
        """Take back `team`'s grant; a team never granted is no error (the outcome is the same)."""
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic, with_for_update=True)
            if row is None:
                raise FeedNotFound(topic)
            grant = session.get(FeedReaderRow, (topic, team)) if _storable(team) else None
            if grant is not None:
                session.delete(grant)
                session.flush()
            return _feed(row, _readers(session, [topic]))

    def delete(self, *, topic: str) -> None:
        with transaction(self._sessions) as session:
            row = session.get(FeedRow, topic)
            if row is None:
                raise FeedNotFound(topic)
            # Explicitly, not only by the foreign key's cascade: a feed created again under the
            # same topic starts without the old feed's readers on every database.
            session.execute(delete(FeedReaderRow).where(FeedReaderRow.topic == topic))
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
            rows = list(session.scalars(query))
            # One query for every listed feed's readers, not one per feed.
            readers = _readers(session, None if owner is None else [row.topic for row in rows])
            return [_feed(row, readers) for row in rows]


def _storable(name: str) -> bool:
    """Whether a topic or team name could be in the catalog at all. PostgreSQL text cannot
    hold NUL, and its driver fails a query with one instead of finding nothing; no stored
    name has one (topics are checked by `hub_core.naming`), so such a lookup finds nothing."""
    return "\x00" not in name


def _readers(session: Session, topics: list[str] | None) -> dict[str, tuple[TeamName, ...]]:
    """The teams granted reads of each of `topics` (None: of every feed), sorted, by topic."""
    if topics is not None and not topics:
        return {}
    granted: dict[str, list[TeamName]] = {}
    query = select(FeedReaderRow)
    if topics is not None:
        query = query.where(FeedReaderRow.topic.in_(topics))
    for grant in session.scalars(query.order_by(FeedReaderRow.team)):
        granted.setdefault(grant.topic, []).append(TeamName(grant.team))
    return {topic: tuple(teams) for topic, teams in granted.items()}


def _feed(row: FeedRow, readers: dict[str, tuple[TeamName, ...]]) -> Feed:
    return Feed(
        topic=row.topic,
        owner=TeamName(row.owner),
        kind=FeedKind(row.kind),
        partitions=row.partitions,
        key_fields=tuple(json.loads(row.key_fields)),
        retention_ms=row.retention_ms,
        description=row.description,
        created_at=row.created_at,
        read_public=row.read_public,
        readers=readers.get(row.topic, ()),
    )
