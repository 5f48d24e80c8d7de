"""Teams and API keys: a key is shown once, stored as a hash, and stops working when revoked."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import Engine, text

from catalog.errors import KeyNotFound, TeamExists, TeamNotFound
from catalog.teams import TeamStore
from catalog.types import KeyRole, TeamName
from hub_core.errors import ErrorCode

pytestmark = pytest.mark.unit

SALES = TeamName("sales")


def _naive(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.replace(tzinfo=None)


@pytest.fixture
def teams(hub_engine: Engine) -> TeamStore:
    store = TeamStore(hub_engine)
    store.register(name=SALES)
    return store


def test_a_team_key_verifies_as_its_team_and_may_write_only_its_teams_feeds(
    teams: TeamStore,
) -> None:
    key, token = teams.create_key(team=SALES)

    principal = teams.verify(token)
    assert principal is not None
    assert (principal.key_id, principal.team, principal.admin) == (key.key_id, SALES, False)
    assert principal.may_write(SALES)
    assert not principal.may_write(TeamName("finance"))


def test_an_admin_key_belongs_to_no_team_and_may_write_every_feed(teams: TeamStore) -> None:
    _key, token = teams.create_key(team=None, admin=True)

    principal = teams.verify(token)
    assert principal is not None
    assert (principal.team, principal.admin) == (None, True)
    assert principal.may_write(SALES) and principal.may_write(TeamName("finance"))


def test_a_loader_key_belongs_to_no_team_may_write_no_feed_and_lists_as_the_loaders(
    teams: TeamStore,
) -> None:
    key, token = teams.create_key(team=None, loader=True)

    principal = teams.verify(token)
    assert principal is not None
    assert (principal.team, principal.admin, principal.role) == (None, False, KeyRole.LOADER)
    assert not principal.may_write(SALES)
    [listed] = teams.keys()
    assert (listed.key_id, listed.role) == (key.key_id, KeyRole.LOADER)


@pytest.mark.parametrize(
    "asked",
    [
        {"team": None},
        {"team": SALES, "loader": True},
        {"team": None, "admin": True, "loader": True},
    ],
    ids=["no-role", "team-and-loader", "admin-and-loader"],
)
def test_a_key_is_of_exactly_one_role(teams: TeamStore, asked: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="a key is of one team, or admin=True, or loader=True"):
        teams.create_key(**asked)

    assert teams.keys() == []


def test_the_secret_of_a_key_is_not_stored(teams: TeamStore, hub_engine: Engine) -> None:
    _key, token = teams.create_key(team=SALES)
    secret = token.split("_", 2)[2]

    with hub_engine.connect() as connection:
        rows = connection.execute(text("SELECT * FROM api_keys")).all()
    assert rows
    assert not any(secret in str(value) for row in rows for value in row)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda token: token[:-1] + ("A" if token[-1] != "A" else "B"),  # wrong secret
        lambda token: "hub_unknownkey_" + token.split("_", 2)[2],  # unknown key id
        lambda token: token.replace("hub_", "xyz_", 1),  # not a hub token
        lambda token: "hub_",  # nothing after the prefix
        lambda token: "",
    ],
    ids=["wrong-secret", "unknown-key", "foreign-prefix", "truncated", "empty"],
)
def test_a_token_that_is_not_a_valid_key_verifies_as_nobody(
    teams: TeamStore, tamper: Callable[[str], str]
) -> None:
    _key, token = teams.create_key(team=SALES)

    assert teams.verify(tamper(token)) is None


def test_a_revoked_key_stops_verifying_and_stays_listed_with_when_it_was_revoked(
    teams: TeamStore,
) -> None:
    key, token = teams.create_key(team=SALES)

    revoked = teams.revoke(key_id=key.key_id)
    again = teams.revoke(key_id=key.key_id)

    assert teams.verify(token) is None
    assert revoked.revoked_at is not None
    # Revoking twice changes nothing. (SQLite reads times back without their UTC zone.)
    assert _naive(again.revoked_at) == _naive(revoked.revoked_at)
    [listed] = teams.keys(team=SALES)
    assert listed.key_id == key.key_id
    assert _naive(listed.revoked_at) == _naive(revoked.revoked_at)


def test_keys_are_listed_per_team_without_their_secrets(teams: TeamStore) -> None:
    teams.register(name=TeamName("finance"))
    sales_key, _ = teams.create_key(team=SALES)
    finance_key, _ = teams.create_key(team=TeamName("finance"))
    admin_key, _ = teams.create_key(team=None, admin=True)

    assert [k.key_id for k in teams.keys(team=SALES)] == [sales_key.key_id]
    every_key = teams.keys()
    assert {k.key_id for k in every_key} == {
        sales_key.key_id,
        finance_key.key_id,
        admin_key.key_id,
    }


def test_a_team_name_is_taken_once(teams: TeamStore) -> None:
    with pytest.raises(TeamExists) as taken:
        teams.register(name=SALES)

    assert taken.value.code is ErrorCode.TEAM_EXISTS
    assert "'sales'" in taken.value.message


def test_a_key_for_a_team_that_does_not_exist_is_refused_with_the_fix(teams: TeamStore) -> None:
    with pytest.raises(TeamNotFound) as missing:
        teams.create_key(team=TeamName("marketing"))

    assert missing.value.code is ErrorCode.TEAM_NOT_FOUND
    assert "hub team create marketing" in missing.value.message
    assert teams.keys() == []


def test_revoking_a_key_that_does_not_exist_names_it(teams: TeamStore) -> None:
    with pytest.raises(KeyNotFound) as missing:
        teams.revoke(key_id="nope")

    assert missing.value.code is ErrorCode.KEY_NOT_FOUND
    assert "'nope'" in missing.value.message


def test_teams_are_listed_by_name(teams: TeamStore) -> None:
    teams.register(name=TeamName("finance"))

    assert [t.name for t in teams.list()] == ["finance", "sales"]
