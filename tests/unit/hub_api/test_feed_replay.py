"""`POST /v1/feeds/{topic}/replay`: the owner or an admin replays a feed's quarantine through the
loader; another team gets 403 naming the owner, no key 401, and a missing or silent loader a
coded 503, never an unexpected 5xx."""

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import Engine

from catalog.errors import FeedNotFound
from catalog.teams import TeamStore
from catalog.types import Feed, FeedKind, TeamName
from hub_api.errors import install_error_handlers
from hub_api.feeds import routes as feed_routes
from hub_api.keys import KeyVerifier
from hub_api.loader_client import LoaderClient
from hub_api.settings import ApiSettings
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit

TOKEN = "control-token"
ORDERS = Feed("shop.orders", TeamName("shop"), FeedKind.EVENT, 1, (), None, "", datetime.now(UTC))


class _Feeds:
    def get(self, topic: str) -> Feed:
        if topic != ORDERS.topic:
            raise FeedNotFound(topic)
        return ORDERS


class _Loader:
    """A loader's /replay: records what it was asked, answers `answer`."""

    def __init__(self, answer: httpx.Response | Exception) -> None:
        self.answer = answer
        self.calls: list[tuple[str, str | None]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append((request.url.path + "?" + request.url.query.decode(),
                           request.headers.get("authorization")))  # fmt: skip
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def _client(teams: TeamStore, loader: _Loader | None) -> TestClient:
    settings = ApiSettings(
        loader_url="http://loader.test:8091" if loader else None,
        loader_token=SecretStr(TOKEN),
    )
    app = FastAPI()
    install_error_handlers(app)
    install(
        app,
        settings=settings,
        keys=KeyVerifier(teams, cache_seconds=60),
        feeds=_Feeds(),
        loader=LoaderClient(settings, transport=httpx.MockTransport(loader) if loader else None),
    )
    app.include_router(feed_routes.router)
    return TestClient(app)


def _key(teams: TeamStore, team: str | None) -> dict[str, str]:
    if team is not None:
        teams.register(name=TeamName(team))
    _, token = teams.create_key(team=TeamName(team) if team else None, admin=team is None)
    return {"Authorization": f"Bearer {token}"}


REPLAYED = {
    "topic": "shop.orders",
    "examined": 3,
    "landed": 2,
    "still_failing": {"SCHEMA_UNRESOLVABLE": 1},
    "message": "3 examined, 2 landed",
}


@pytest.mark.parametrize("team", ["shop", None], ids=["owner", "admin"])
def test_the_owner_or_an_admin_replays_through_the_loader_with_its_token(
    hub_engine: Engine, team: str | None
) -> None:
    teams = TeamStore(hub_engine)
    loader = _Loader(httpx.Response(200, json=REPLAYED))

    answer = _client(teams, loader).post("/v1/feeds/shop.orders/replay", headers=_key(teams, team))

    assert answer.status_code == 200, answer.text
    assert answer.json() == REPLAYED
    assert loader.calls == [("/replay?topic=shop.orders", f"Bearer {TOKEN}")]


def test_another_team_is_refused_with_the_owner_named_and_no_key_is_401(
    hub_engine: Engine,
) -> None:
    teams = TeamStore(hub_engine)
    teams.register(name=TeamName("shop"))
    loader = _Loader(httpx.Response(200, json=REPLAYED))
    client = _client(teams, loader)

    other = client.post("/v1/feeds/shop.orders/replay", headers=_key(teams, "rivals"))
    anonymous = client.post("/v1/feeds/shop.orders/replay")
    unknown = client.post("/v1/feeds/shop.nothing/replay", headers=_key(teams, None))

    assert other.status_code == 403 and other.json()["error_code"] == 40301
    assert "belongs to team 'shop'" in other.json()["message"]
    assert anonymous.status_code == 401
    assert unknown.status_code == 404 and unknown.json()["error_code"] == 40420
    assert loader.calls == []


@pytest.mark.parametrize(
    ("loader", "status", "code"),
    [
        (None, 503, 50350),
        (_Loader(httpx.ConnectError("refused")), 503, 50351),
        (_Loader(httpx.ReadTimeout("slow")), 503, 50351),
        (_Loader(httpx.Response(502, text="<html>bad gateway</html>")), 503, 50351),
        (_Loader(httpx.Response(403, json={"error_code": 40301, "message": "wrong"})), 503, 50351),
        (_Loader(httpx.Response(200, json={"surprise": True})), 503, 50351),
        (
            _Loader(httpx.Response(404, json={"error_code": 40450, "message": "nothing"})),
            404,
            40450,
        ),
    ],
    ids=["no-loader", "refused", "timeout", "not-json", "token-refused", "odd-body", "nothing"],
)
def test_a_missing_silent_or_odd_loader_answers_a_coded_error_never_an_unexpected_5xx(
    hub_engine: Engine, loader: _Loader | None, status: int, code: int
) -> None:
    teams = TeamStore(hub_engine)
    answer = _client(teams, loader).post(
        "/v1/feeds/shop.orders/replay", headers=_key(teams, "shop")
    )

    assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text
    assert TOKEN not in answer.text
    if status == 503:
        assert answer.headers["Retry-After"]


def test_the_console_status_read_never_raises_and_is_cached_briefly() -> None:
    calls: list[Any] = []

    def slow(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ReadTimeout("slow")

    client = LoaderClient(
        ApiSettings(loader_url="http://loader.test:1", loader_token=SecretStr(TOKEN)),
        transport=httpx.MockTransport(slow),
    )
    first, second = client.status(), client.status()

    assert first.body is None and first.problem is not None
    assert first.problem.startswith("loader unreachable")
    assert second is first and len(calls) == 1
