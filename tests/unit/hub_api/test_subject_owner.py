"""Who owns a registry subject: its feed's team, else the team named by its domain."""

from datetime import UTC, datetime
from typing import cast

import pytest

from catalog.types import Feed, FeedKind, TeamName
from hub_api.auth import subject_owner
from publish.feeds import FeedService
from registry.errors import InvalidSchemaId, InvalidVersion
from registry.limits import MAX_IMPORTED_SCHEMA_ID, check_explicit_id

pytestmark = pytest.mark.unit


class _Feeds:
    """Feed `sales.orders`, owned by team `ops`."""

    def find(self, topic: str) -> Feed | None:
        if topic != "sales.orders":
            return None
        return Feed(
            topic=topic,
            owner=TeamName("ops"),
            kind=FeedKind.EVENT,
            partitions=1,
            key_fields=(),
            retention_ms=None,
            description="",
            created_at=datetime.now(UTC),
        )


FEEDS = cast(FeedService, _Feeds())


@pytest.mark.parametrize(
    ("subject", "owner"),
    [
        ("sales.orders-value", "ops"),  # a feed's subjects: the feed's team, whatever the domain
        ("sales.orders-key", "ops"),
        ("sales.returns-value", "sales"),  # no feed yet: the domain's team
        ("sales.customer_type", "sales"),
        ("sales.orders", "sales"),  # not a feed subject (no suffix)
        ("sales.orders.dlq-value", "sales"),
        ("orders-value", None),  # no domain: admins only
        (".orders-value", None),
        ("orders", None),
    ],
)
def test_a_subject_is_owned_by_its_feeds_team_else_its_domains(
    subject: str, owner: str | None
) -> None:
    assert subject_owner(FEEDS, subject)[0] == owner


@pytest.mark.parametrize("schema_id", [0, -1, MAX_IMPORTED_SCHEMA_ID + 1, 2**31 - 1, 2**31])
def test_explicit_ids_outside_the_import_range_are_refused(schema_id: int) -> None:
    with pytest.raises(InvalidSchemaId, match="between 1 and 1073741823"):
        check_explicit_id(schema_id, None)


def test_explicit_ids_and_versions_inside_their_ranges_pass() -> None:
    check_explicit_id(1, 1)
    check_explicit_id(MAX_IMPORTED_SCHEMA_ID, 2**31 - 1)
    check_explicit_id(None, None)
    with pytest.raises(InvalidVersion):
        check_explicit_id(None, 2**31)
