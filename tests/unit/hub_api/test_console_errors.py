"""A console page whose service fails with a coded error answers with the console's error page
(the code and message the API would give, the signed-in navigation), while the same error on
an API path stays the JSON answer clients parse."""

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.errors import FeedNotFound
from catalog.teams import TeamStore
from catalog.types import Principal, TeamName
from hub_api import console_routes
from hub_api.auth import KeyVerifier
from hub_api.errors import install_error_handlers
from hub_api.settings import ApiSettings

pytestmark = pytest.mark.unit


class _Views:
    """The console's views, with every feed unknown."""

    def feed_page(self, topic: str, caller: Principal, **_: object) -> None:
        raise FeedNotFound(topic)


def _app(hub_engine: Engine) -> tuple[TestClient, str]:
    teams = TeamStore(hub_engine)
    teams.register(name=TeamName("shop"))
    _, token = teams.create_key(team=TeamName("shop"), admin=False)
    app = FastAPI()
    install_error_handlers(app, pages=console_routes.error_page)
    app.add_exception_handler(console_routes.SignInNeeded, console_routes.sign_in_redirect)
    app.state.api_settings = ApiSettings()
    app.state.keys = KeyVerifier(teams, cache_seconds=60)
    app.state.console = _Views()
    app.include_router(console_routes.router)

    @app.get("/v1/feeds/{topic}")
    def api_feed(topic: str) -> None:
        raise FeedNotFound(topic)

    return TestClient(app, base_url="https://hub.test"), token


def test_a_failing_console_page_shows_the_error_page_with_its_code(hub_engine: Engine) -> None:
    client, token = _app(hub_engine)
    client.cookies.set(console_routes.CONSOLE_KEY_COOKIE, token, path="/console")

    page = client.get("/console/feeds/shop.missing")

    assert page.status_code == 404
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["Cache-Control"] == "no-store"
    assert "40420" in page.text and "shop.missing" in page.text
    assert "Sign out" in page.text  # still the signed-in console, not a bare error


def test_the_same_error_on_an_api_path_is_the_json_answer(hub_engine: Engine) -> None:
    client, _token = _app(hub_engine)

    answer = client.get("/v1/feeds/shop.missing")

    assert answer.status_code == 404
    assert answer.json()["error_code"] == 40420
