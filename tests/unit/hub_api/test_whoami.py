"""`GET /v1/whoami`: whom a key belongs to, for services that accept hub keys (Thrift server)."""

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_api.errors import install_error_handlers
from hub_api.keys import KeyVerifier
from hub_api.operations import identity_routes
from hub_api.settings import ApiSettings
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit


@pytest.fixture
def teams(hub_engine: Engine) -> TeamStore:
    store = TeamStore(hub_engine)
    store.register(name=TeamName("sales"))
    return store


def _client(teams: TeamStore) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)
    install(app, settings=ApiSettings(), keys=KeyVerifier(teams, cache_seconds=60))
    app.include_router(identity_routes.router)
    return TestClient(app)


def test_a_team_key_is_told_its_team_and_key_id_but_never_the_key(teams: TeamStore) -> None:
    key, token = teams.create_key(team=TeamName("sales"))

    answer = _client(teams).get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})

    assert answer.status_code == 200
    assert answer.json() == {
        "key_id": key.key_id,
        "team": "sales",
        "admin": False,
        "role": "team",
    }
    assert token not in answer.text


def test_an_admin_key_is_told_it_is_an_admin_key(teams: TeamStore) -> None:
    key, token = teams.create_key(team=None, admin=True)

    answer = _client(teams).get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})

    assert answer.json() == {"key_id": key.key_id, "team": None, "admin": True, "role": "admin"}


def test_the_loaders_key_is_told_it_is_a_loader_key_of_no_team(teams: TeamStore) -> None:
    key, token = teams.create_key(team=None, loader=True)

    answer = _client(teams).get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})

    assert answer.json() == {"key_id": key.key_id, "team": None, "admin": False, "role": "loader"}


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer hub_000000000000_never-issued"}],
    ids=["no-key", "unknown-key"],
)
def test_no_key_or_an_unknown_key_answers_401(teams: TeamStore, headers: dict[str, str]) -> None:
    answer = _client(teams).get("/v1/whoami", headers=headers)

    assert answer.status_code == 401
    assert answer.json()["error_code"] == 40101


def test_a_revoked_key_answers_401(teams: TeamStore) -> None:
    key, token = teams.create_key(team=TeamName("sales"))
    teams.revoke(key_id=key.key_id)

    answer = _client(teams).get("/v1/whoami", headers={"Authorization": f"Bearer {token}"})

    assert answer.status_code == 401
