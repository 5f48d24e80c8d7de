"""Who is calling: API keys as Bearer tokens or Basic passwords, owners, admins, the key cache."""

import base64
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_api.auth import Caller, Reader, require_owner
from hub_api.errors import install_error_handlers
from hub_api.keys import KeyVerifier
from hub_api.settings import ApiSettings, AuthMode
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit

SALES = TeamName("sales")


@pytest.fixture
def teams(hub_engine: Engine) -> TeamStore:
    store = TeamStore(hub_engine)
    store.register(name=SALES)
    store.register(name=TeamName("finance"))
    return store


def _client(teams: TeamStore, **settings: Any) -> TestClient:
    """An app with a write route on a feed owned by `sales`, and a read route."""
    app = FastAPI()
    install_error_handlers(app)
    install(app, settings=ApiSettings(**settings), keys=KeyVerifier(teams, cache_seconds=60))

    @app.post("/v1/feeds/sales.orders/records")
    async def publish(caller: Caller) -> dict[str, object]:
        require_owner(caller, SALES, what="Feed 'sales.orders'")
        return {"team": caller.team, "admin": caller.admin}

    @app.get("/v1/feeds")
    async def feeds(reader: Reader) -> dict[str, object]:
        return {"team": reader.team if reader else None}

    return TestClient(app)


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_the_owning_teams_key_may_publish_as_a_bearer_token(teams: TeamStore) -> None:
    _key, token = teams.create_key(team=SALES)

    answer = _client(teams).post("/v1/feeds/sales.orders/records", headers=_bearer(token))

    assert answer.status_code == 200
    assert answer.json() == {"team": "sales", "admin": False}


def test_a_key_is_also_accepted_as_the_password_of_basic_auth(teams: TeamStore) -> None:
    _key, token = teams.create_key(team=SALES)
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()

    answer = _client(teams).post(
        "/v1/feeds/sales.orders/records", headers={"Authorization": f"Basic {basic}"}
    )

    assert answer.status_code == 200


def test_another_teams_key_is_forbidden_naming_the_owner_and_the_fix(teams: TeamStore) -> None:
    _key, token = teams.create_key(team=TeamName("finance"))

    answer = _client(teams).post("/v1/feeds/sales.orders/records", headers=_bearer(token))

    assert answer.status_code == 403
    body = answer.json()
    assert body["error_code"] == 40301
    assert "belongs to team 'sales'" in body["message"]
    assert "'finance'" in body["message"]
    assert "admin key" in body["message"]


def test_an_admin_key_may_write_any_teams_feed(teams: TeamStore) -> None:
    _key, token = teams.create_key(team=None, admin=True)

    answer = _client(teams).post("/v1/feeds/sales.orders/records", headers=_bearer(token))

    assert answer.json() == {"team": None, "admin": True}


@pytest.mark.parametrize(
    "headers",
    [{}, _bearer("hub_nope_nope"), {"Authorization": "Basic !!!"}, {"Authorization": "Token x"}],
    ids=["none", "unknown-key", "bad-basic", "other-scheme"],
)
def test_a_write_without_a_valid_key_is_401(teams: TeamStore, headers: dict[str, str]) -> None:
    answer = _client(teams).post("/v1/feeds/sales.orders/records", headers=headers)

    assert answer.status_code == 401
    assert answer.json()["error_code"] == 40101


def test_with_auth_disabled_every_caller_acts_as_an_admin(teams: TeamStore) -> None:
    answer = _client(teams, auth=AuthMode.DISABLED).post("/v1/feeds/sales.orders/records")

    assert answer.json() == {"team": None, "admin": True}


def test_reads_are_public_unless_the_operator_turns_that_off(teams: TeamStore) -> None:
    _key, token = teams.create_key(team=SALES)
    private = _client(teams, public_reads=False)

    assert _client(teams).get("/v1/feeds").json() == {"team": None}
    assert private.get("/v1/feeds").status_code == 401
    assert private.get("/v1/feeds", headers=_bearer(token)).json() == {"team": "sales"}


def test_a_verified_key_is_trusted_for_the_cache_time_then_checked_again(
    teams: TeamStore,
) -> None:
    key, token = teams.create_key(team=SALES)
    cached = KeyVerifier(teams, cache_seconds=60)
    uncached = KeyVerifier(teams, cache_seconds=0)
    assert cached.verify(token) is not None
    assert uncached.verify(token) is not None

    teams.revoke(key_id=key.key_id)

    # Within HUB_API_KEY_CACHE_SECONDS a revoked key may still work; after it, it does not.
    assert cached.verify(token) is not None
    assert uncached.verify(token) is None
