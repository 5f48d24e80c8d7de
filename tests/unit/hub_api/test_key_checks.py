"""Credentials a caller sends are checked, on public reads too: text that cannot be a key is
refused at once, with no lookup and nothing remembered; answers about well-formed keys are kept
in bounded caches."""

import base64
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.teams import TeamStore, well_formed
from catalog.types import Principal, TeamName
from hub_api.auth import Reader
from hub_api.errors import install_error_handlers
from hub_api.gate import RequestGate
from hub_api.keys import KeyVerifier
from hub_api.settings import ApiSettings
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit

SALES = TeamName("sales")
UNKNOWN = "hub_0123456789ab_" + "A" * 43  # a key's shape, but never issued


class CountingTeams(TeamStore):
    """The catalog's key store, counting the lookups it is asked for."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.lookups = 0

    def verify(self, token: str) -> Principal | None:
        self.lookups += 1
        return super().verify(token)


@pytest.fixture
def teams(hub_engine: Engine) -> CountingTeams:
    store = CountingTeams(hub_engine)
    store.register(name=SALES)
    return store


def _client(teams: TeamStore, **settings: Any) -> TestClient:
    """An app with a public read, behind the request gate as the hub's API is."""
    app = FastAPI()
    install_error_handlers(app)
    api = ApiSettings(**settings)
    install(app, settings=api, keys=KeyVerifier(teams, cache_seconds=60))
    app.add_middleware(RequestGate, settings=api)

    @app.get("/v1/feeds")
    async def feeds(reader: Reader) -> dict[str, object]:
        return {"team": reader.team if reader else None}

    return TestClient(app)


def _basic(password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"me:{password}".encode()).decode()}


def test_the_keys_the_hub_issues_have_the_shape_it_checks(teams: CountingTeams) -> None:
    tokens = [teams.create_key(team=SALES)[1] for _ in range(50)]

    assert all(well_formed(token) for token in tokens)


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer " + "x" * 30_000},
        {"Authorization": "Bearer " + UNKNOWN + "A"},  # one character too many
        {"Authorization": "Bearer " + UNKNOWN[:-1] + "!"},  # a character no key holds
        {"Authorization": "Bearer hub_0123456789AB_" + "A" * 43},  # upper-case key id
        {"Authorization": "Bearer"},
        {"Authorization": "Token " + UNKNOWN},
        {"Authorization": "Basic !!!"},
        _basic("not-a-key"),
    ],
    ids=["30kb", "too-long", "alphabet", "key-id-case", "empty", "scheme", "bad-basic", "basic"],
)
def test_credentials_that_cannot_be_a_key_get_401_on_a_public_read_without_a_lookup(
    teams: CountingTeams, headers: dict[str, str]
) -> None:
    client = _client(teams)

    answers = [client.get("/v1/feeds", headers=headers) for _ in range(2)]

    for answer in answers:
        assert answer.status_code == 401
        assert answer.json()["error_code"] == 40101
        assert "holds no API key of this hub" in answer.json()["message"]
        assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    assert teams.lookups == 0


def test_a_token_of_a_keys_shape_that_the_hub_never_issued_is_looked_up_once_then_401(
    teams: CountingTeams,
) -> None:
    client = _client(teams)

    answers = [client.get("/v1/feeds", headers=_basic(UNKNOWN)) for _ in range(3)]

    assert [a.status_code for a in answers] == [401, 401, 401]
    assert "not valid" in answers[0].json()["message"]
    assert teams.lookups == 1  # the negative answer is remembered for the cache time


def test_a_valid_key_and_no_key_at_all_still_read(teams: CountingTeams) -> None:
    _key, token = teams.create_key(team=SALES)
    client = _client(teams)

    assert client.get("/v1/feeds").json() == {"team": None}
    assert client.get("/v1/feeds", headers={"Authorization": f"Bearer {token}"}).json() == {
        "team": "sales"
    }
    assert client.get("/v1/feeds", headers=_basic(token)).json() == {"team": "sales"}


def test_with_auth_disabled_credentials_are_not_looked_at(teams: CountingTeams) -> None:
    answer = _client(teams, auth="disabled").get("/v1/feeds", headers=_basic("not-a-key"))

    assert answer.status_code == 200
    assert teams.lookups == 0


def test_a_malformed_token_is_never_remembered(teams: CountingTeams) -> None:
    verifier = KeyVerifier(teams, cache_seconds=60)

    assert verifier.cached("x" * 30_000) == (True, None)
    assert verifier.verify("x" * 30_000) is None
    assert teams.lookups == 0


def test_unknown_keys_are_remembered_up_to_a_bound_and_never_push_out_a_valid_one(
    teams: CountingTeams,
) -> None:
    _key, token = teams.create_key(team=SALES)
    verifier = KeyVerifier(teams, cache_seconds=60, max_entries=2)
    assert verifier.verify(token) is not None
    made_up = [f"hub_{n:012x}_{'A' * 43}" for n in range(5)]

    for key in made_up:
        assert verifier.verify(key) is None
    lookups = teams.lookups

    assert verifier.cached(token)[1] is not None  # still answered from memory
    # At most two unknown keys are remembered: the first of the five was let go.
    assert verifier.verify(made_up[0]) is None
    assert teams.lookups == lookups + 1
