"""Lookups by names no row can hold find nothing on SQLite and PostgreSQL alike: PostgreSQL's
driver fails a query that carries a NUL, or an id beyond its integer columns, instead of finding
nothing, which once answered 500."""

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from catalog.errors import FeedNotFound
from catalog.feeds import FeedStore
from catalog.types import TeamName
from hub_core.database import create_database_engine
from migrations import migrate
from registry.errors import SchemaNotFound
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import SchemaId

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    migrate.upgrade(database_url)
    engine = create_database_engine(database_url)
    yield engine
    engine.dispose()


def test_a_feed_or_an_owner_with_a_nul_is_not_found(engine: Engine) -> None:
    feeds = FeedStore(engine)
    assert feeds.find(topic="sales.a\x00b") is None
    assert feeds.list(owner=TeamName("sales\x00")) == []
    with pytest.raises(FeedNotFound):
        feeds.get(topic="sales.a\x00b")


@pytest.mark.parametrize("schema_id", [2**31, 2**63 - 1, 0, -5])
def test_a_schema_id_beyond_the_id_range_is_not_found(engine: Engine, schema_id: int) -> None:
    registry = RegistryService(SchemaStore(engine))
    with pytest.raises(SchemaNotFound):
        registry.usages(schema_id=SchemaId(schema_id), include_deleted=True)
    with pytest.raises(SchemaNotFound):
        registry.schema(schema_id=SchemaId(schema_id))
