"""Read grants: a feed is read by every team, or by its owner, the teams it grants and admins."""

from dataclasses import replace
from datetime import datetime

import pytest
from sqlalchemy import Engine

from catalog.errors import FeedNotFound, TeamNotFound
from catalog.feeds import FeedStore
from catalog.teams import TeamStore
from catalog.types import Feed, FeedKind, Principal, TeamName

pytestmark = pytest.mark.unit

SALES, FINANCE, MARKETING = TeamName("sales"), TeamName("finance"), TeamName("marketing")

ORDERS = Feed(
    topic="sales.orders",
    owner=SALES,
    kind=FeedKind.EVENT,
    partitions=1,
    key_fields=(),
    retention_ms=None,
    description="",
    created_at=datetime(2026, 1, 1),
)


def _key(team: str | None, *, admin: bool = False) -> Principal:
    return Principal(key_id="k", team=TeamName(team) if team else None, admin=admin)


@pytest.fixture
def feeds(hub_engine: Engine) -> FeedStore:
    teams = TeamStore(hub_engine)
    for team in (SALES, FINANCE, MARKETING):
        teams.register(name=team)
    return FeedStore(hub_engine)


def test_a_public_feed_is_read_by_every_team_and_by_callers_without_a_key() -> None:
    assert all(ORDERS.readable_by(p) for p in (_key("marketing"), _key(None, admin=True), None))


def test_a_restricted_feed_is_read_by_its_owner_its_readers_and_admins_only() -> None:
    restricted = replace(ORDERS, read_public=False, readers=(FINANCE,))

    assert restricted.readable_by(_key("sales"))
    assert restricted.readable_by(_key("finance"))
    assert restricted.readable_by(_key(None, admin=True))
    assert not restricted.readable_by(_key("marketing"))
    assert not restricted.readable_by(None)
    # The loader's key has neither a team nor the admin flag: it reads no restricted feed.
    assert not restricted.readable_by(_key(None))


def test_a_feed_registered_restricted_keeps_its_policy_and_readers(feeds: FeedStore) -> None:
    feeds.register(feed=replace(ORDERS, read_public=False, readers=(FINANCE,)))

    stored = feeds.get(topic="sales.orders")

    assert (stored.read_public, stored.readers) == (False, (FINANCE,))
    assert [(f.topic, f.readers) for f in feeds.list()] == [("sales.orders", (FINANCE,))]


def test_grants_and_revokes_change_only_the_team_named(feeds: FeedStore) -> None:
    feeds.register(feed=ORDERS)
    feeds.update(topic="sales.orders", read_public=False)

    feeds.grant(topic="sales.orders", team=MARKETING)
    feeds.grant(topic="sales.orders", team=FINANCE)
    feeds.grant(topic="sales.orders", team=FINANCE)  # granting twice is granting once
    assert feeds.get(topic="sales.orders").readers == (FINANCE, MARKETING)

    feeds.revoke(topic="sales.orders", team=MARKETING)
    feeds.revoke(topic="sales.orders", team=MARKETING)  # revoking twice is no error
    after = feeds.get(topic="sales.orders")
    assert (after.read_public, after.readers) == (False, (FINANCE,))
    assert feeds.list(owner=SALES)[0].readers == (FINANCE,)


def test_grants_name_a_feed_and_a_team_that_exist(feeds: FeedStore) -> None:
    feeds.register(feed=ORDERS)

    with pytest.raises(TeamNotFound):
        feeds.grant(topic="sales.orders", team=TeamName("nobody"))
    with pytest.raises(FeedNotFound):
        feeds.grant(topic="sales.nothing", team=FINANCE)
    with pytest.raises(TeamNotFound):
        feeds.register(feed=replace(ORDERS, topic="sales.other", readers=(TeamName("nobody"),)))
    assert feeds.find(topic="sales.other") is None


def test_a_deleted_feed_takes_its_grants_along(feeds: FeedStore) -> None:
    feeds.register(feed=replace(ORDERS, read_public=False, readers=(FINANCE,)))
    feeds.delete(topic="sales.orders")

    feeds.register(feed=ORDERS)

    assert feeds.get(topic="sales.orders").readers == ()
