"""Feeds in the catalog: one owner team each, a topic taken once, changes kept."""

from datetime import datetime

import pytest
from sqlalchemy import Engine

from catalog.errors import FeedExists, FeedNotFound, TeamNotFound
from catalog.feeds import FeedStore
from catalog.teams import TeamStore
from catalog.types import Feed, FeedKind, TeamName
from hub_core.errors import ErrorCode

pytestmark = pytest.mark.unit

SALES = TeamName("sales")


def _feed(topic: str, *, owner: TeamName = SALES, kind: FeedKind = FeedKind.EVENT) -> Feed:
    keyed = kind is FeedKind.CHANGELOG
    return Feed(
        topic=topic,
        owner=owner,
        kind=kind,
        partitions=3,
        key_fields=("order_id", "line") if keyed else (),
        retention_ms=None if keyed else 86_400_000,
        description=f"{topic} for tests",
        created_at=datetime(2024, 5, 1, 12, 0),
    )


@pytest.fixture
def feeds(hub_engine: Engine) -> FeedStore:
    teams = TeamStore(hub_engine)
    teams.register(name=SALES)
    teams.register(name=TeamName("finance"))
    return FeedStore(hub_engine)


def test_a_registered_feed_reads_back_as_it_was_registered(feeds: FeedStore) -> None:
    orders = _feed("sales.orders", kind=FeedKind.CHANGELOG)
    events = _feed("sales.clicks")
    feeds.register(feed=orders)
    feeds.register(feed=events)

    assert feeds.get(topic="sales.orders") == orders
    assert feeds.get(topic="sales.clicks") == events
    assert feeds.get(topic="sales.orders").key_fields == ("order_id", "line")


def test_a_topic_is_taken_once(feeds: FeedStore) -> None:
    feeds.register(feed=_feed("sales.orders"))

    with pytest.raises(FeedExists) as taken:
        feeds.register(feed=_feed("sales.orders", owner=TeamName("finance")))

    assert taken.value.code is ErrorCode.FEED_EXISTS
    assert "'sales.orders'" in taken.value.message
    assert feeds.get(topic="sales.orders").owner == SALES


def test_a_feed_is_found_by_its_table_name_whatever_mix_of_dots_and_underscores_names_it(
    feeds: FeedStore,
) -> None:
    feeds.register(feed=_feed("sales_eu.orders"))

    found = feeds.find_by_table(table_suffix="sales_eu_orders")

    assert found is not None and found.topic == "sales_eu.orders"
    assert feeds.find_by_table(table_suffix="sales_eu_order") is None
    assert feeds.find_by_table(table_suffix="sales.eu_orders") is None  # a table name has no dot


def test_a_feed_of_a_team_that_does_not_exist_is_refused(feeds: FeedStore) -> None:
    with pytest.raises(TeamNotFound) as missing:
        feeds.register(feed=_feed("ads.views", owner=TeamName("ads")))

    assert missing.value.code is ErrorCode.TEAM_NOT_FOUND
    assert feeds.find(topic="ads.views") is None


def test_an_unknown_feed_is_none_when_looked_for_and_40420_when_required(
    feeds: FeedStore,
) -> None:
    assert feeds.find(topic="sales.nothing") is None
    with pytest.raises(FeedNotFound) as missing:
        feeds.get(topic="sales.nothing")

    assert missing.value.code is ErrorCode.FEED_NOT_FOUND
    assert "POST /v1/feeds" in missing.value.message


def test_an_update_changes_only_what_it_names(feeds: FeedStore) -> None:
    feeds.register(feed=_feed("sales.orders"))

    described = feeds.update(topic="sales.orders", description="every order, as placed")
    kept_longer = feeds.update(topic="sales.orders", retention_ms=-1)

    assert (described.description, described.retention_ms) == ("every order, as placed", 86_400_000)
    assert (kept_longer.description, kept_longer.retention_ms) == ("every order, as placed", -1)
    assert feeds.get(topic="sales.orders") == kept_longer
    with pytest.raises(FeedNotFound):
        feeds.update(topic="sales.nothing", description="x")


def test_a_deleted_feed_is_gone_and_its_topic_free_again(feeds: FeedStore) -> None:
    feeds.register(feed=_feed("sales.orders"))

    feeds.delete(topic="sales.orders")

    assert feeds.find(topic="sales.orders") is None
    with pytest.raises(FeedNotFound):
        feeds.delete(topic="sales.orders")
    feeds.register(feed=_feed("sales.orders", owner=TeamName("finance")))
    assert feeds.get(topic="sales.orders").owner == "finance"


def test_feeds_are_listed_by_topic_and_per_owner(feeds: FeedStore) -> None:
    for topic, owner in [("sales.z", SALES), ("finance.a", "finance"), ("sales.b", SALES)]:
        feeds.register(feed=_feed(topic, owner=TeamName(owner)))

    assert [f.topic for f in feeds.list()] == ["finance.a", "sales.b", "sales.z"]
    assert [f.topic for f in feeds.list(owner=SALES)] == ["sales.b", "sales.z"]
    assert feeds.list(owner=TeamName("nobody")) == []
