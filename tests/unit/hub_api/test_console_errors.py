"""A console page whose service fails with a coded error answers with the console's error page
(the code and message the API would give, the signed-in navigation), while the same error on
an API path stays the JSON answer clients parse."""

from datetime import timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.errors import FeedNotFound
from catalog.sessions import SessionStore
from catalog.teams import TeamStore
from catalog.types import Principal, TeamName
from hub_api.console import routes as console_routes
from hub_api.console_sessions import SESSION_COOKIE, ConsoleSessions
from hub_api.errors import install_error_handlers
from hub_api.keys import KeyVerifier
from hub_api.settings import ApiSettings
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit


class _Views:
    """The console's views, with every feed unknown."""

    def feed_page(self, topic: str, caller: Principal, **_: object) -> None:
        raise FeedNotFound(topic)


def _app(hub_engine: Engine) -> tuple[TestClient, str]:
    """The console's routes, and the id of a session of a key of team `shop`."""
    teams = TeamStore(hub_engine)
    teams.register(name=TeamName("shop"))
    key, _token = teams.create_key(team=TeamName("shop"), admin=False)
    sessions = SessionStore(
        hub_engine, lifetime=timedelta(hours=1), idle_timeout=timedelta(hours=1)
    )
    session_id, _ = sessions.register(principal=Principal(key.key_id, key.team, key.admin))
    app = FastAPI()
    install_error_handlers(app, pages=console_routes.error_page)
    app.add_exception_handler(console_routes.SignInNeeded, console_routes.sign_in_redirect)
    settings = ApiSettings()
    install(
        app,
        settings=settings,
        keys=KeyVerifier(teams, cache_seconds=60),
        console_sessions=ConsoleSessions(sessions, settings),
    )
    app.dependency_overrides[console_routes.console_views] = _Views
    app.include_router(console_routes.router)

    @app.get("/v1/feeds/{topic}")
    def api_feed(topic: str) -> None:
        raise FeedNotFound(topic)

    return TestClient(app, base_url="https://hub.test"), session_id


def test_a_failing_console_page_shows_the_error_page_with_its_code(hub_engine: Engine) -> None:
    client, session_id = _app(hub_engine)
    client.cookies.set(SESSION_COOKIE, session_id, path="/console")

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
