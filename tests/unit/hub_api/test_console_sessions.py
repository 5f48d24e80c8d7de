"""The console's sessions and its checks against forged forms, on the console's routes: the
cookie holds a session id, never the key; every form must come from the console's own origin
and carry the token of its page (bound to the session, or before sign-in to the form cookie);
a form failing either is answered 403 (40310) and changes nothing."""

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.errors import FeedNotFound
from catalog.sessions import SessionStore
from catalog.teams import TeamStore
from catalog.types import Principal, TeamName
from hub_api.console import routes as console_routes
from hub_api.console_sessions import (
    FORM_COOKIE,
    SESSION_COOKIE,
    ConsoleSessions,
    Origin,
    origin_of,
)
from hub_api.errors import install_error_handlers
from hub_api.keys import KeyVerifier
from hub_api.settings import ApiSettings, AuthMode
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit

BASE = "https://hub.test"
OWN = {"Origin": BASE}


class _Views:
    """The console's views: no feed, and a replay that records who asked."""

    def __init__(self) -> None:
        self.replayed: list[tuple[str, Principal]] = []

    def feed_page(self, topic: str, caller: Principal, **_: object) -> None:
        raise FeedNotFound(topic)

    def replay(self, topic: str, caller: Principal) -> dict[str, Any]:
        self.replayed.append((topic, caller))
        return {"landed": 1}


class _Console:
    def __init__(self, hub_engine: Engine, **settings: Any) -> None:
        self.teams = TeamStore(hub_engine)
        self.teams.register(name=TeamName("shop"))
        self.key_id, self.key = self._key()
        api = ApiSettings(**settings)
        self.store = SessionStore(
            hub_engine,
            lifetime=timedelta(seconds=api.console_session_seconds),
            idle_timeout=timedelta(seconds=api.console_idle_seconds),
        )
        self.views = _Views()
        app = FastAPI()
        install_error_handlers(app, pages=console_routes.error_page)
        app.add_exception_handler(console_routes.SignInNeeded, console_routes.sign_in_redirect)
        install(
            app,
            settings=api,
            keys=KeyVerifier(self.teams, cache_seconds=0),
            console_sessions=ConsoleSessions(self.store, api),
        )
        app.dependency_overrides[console_routes.console_views] = lambda: self.views
        app.include_router(console_routes.router)
        self.app = app

    def _key(self) -> tuple[str, str]:
        key, token = self.teams.create_key(team=TeamName("shop"))
        return key.key_id, token

    def browser(self) -> TestClient:
        return TestClient(self.app, base_url=BASE, follow_redirects=False)

    def signed_in(self) -> TestClient:
        """A browser that signed in with the team's key, as a person does."""
        browser = self.browser()
        page = browser.get("/console/sign-in")
        answer = browser.post(
            "/console/sign-in",
            data={"api_key": self.key, "csrf_token": token_of(page.text)},
            headers=OWN,
        )
        assert answer.status_code == 303, answer.text
        return browser


def token_of(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "the page has no form token"
    return found.group(1)


def _refused(answer: Any, reason: str) -> None:
    assert answer.status_code == 403, answer.text
    text = html.unescape(answer.text)
    assert "40310" in text and reason in text


@pytest.fixture
def console(hub_engine: Engine) -> _Console:
    return _Console(hub_engine)


def test_signing_in_sets_only_a_session_id_in_a_strict_cookie_never_the_key(
    console: _Console,
) -> None:
    browser = console.browser()
    page = browser.get("/console/sign-in")
    answer = browser.post(
        "/console/sign-in",
        data={"api_key": console.key, "csrf_token": token_of(page.text)},
        headers=OWN,
    )

    assert (answer.status_code, answer.headers["location"]) == (303, "/console/feeds")
    cookies = answer.headers.get_list("set-cookie")
    (session,) = [c for c in cookies if c.startswith(f"{SESSION_COOKIE}=")]
    attributes = {a.strip().split("=")[0].lower() for a in session.split(";")[1:]}
    assert {"httponly", "secure", "path", "max-age", "samesite"} <= attributes
    assert "Path=/console" in session and "SameSite=strict" in session
    assert f"Max-Age={8 * 3600}" in session
    assert console.key not in " ".join(cookies)
    secret = console.key.split("_", 2)[2]  # the secret may hold `_` itself
    assert all(secret not in value for value in answer.headers.values())
    assert [s.principal.key_id for s in console.store.list()] == [console.key_id]
    page = browser.get("/console/feeds/shop.missing")
    assert "Sign out" in page.text and console.key not in page.text


def test_a_wrong_key_is_answered_on_the_sign_in_page_without_echoing_it(
    console: _Console,
) -> None:
    browser = console.browser()
    page = browser.get("/console/sign-in")
    wrong = f"{console.key[:-4]}AAAA"

    answer = browser.post(
        "/console/sign-in", data={"api_key": wrong, "csrf_token": token_of(page.text)},
        headers=OWN,
    )  # fmt: skip

    assert answer.status_code == 401
    assert "not a valid API key" in answer.text and wrong not in answer.text
    assert console.store.list() == []


@pytest.mark.parametrize(
    ("headers", "with_token", "reason"),
    [
        (OWN, False, "no valid form token"),
        ({"Origin": "https://evil.test"}, True, "not the console's own origin"),
        ({"Origin": "null"}, True, "not the console's own origin"),
        ({"Referer": "https://evil.test/console/sign-in"}, True, "not the console's own origin"),
        ({}, True, "without an Origin or Referer"),
    ],
)
def test_a_sign_in_without_the_form_token_or_from_another_origin_starts_no_session(
    console: _Console, headers: dict[str, str], with_token: bool, reason: str
) -> None:
    browser = console.browser()
    page = browser.get("/console/sign-in")
    form = {"api_key": console.key, "csrf_token": token_of(page.text) if with_token else ""}

    answer = browser.post("/console/sign-in", data=form, headers=headers)

    _refused(answer, reason)
    assert SESSION_COOKIE not in answer.headers.get("set-cookie", "")
    assert console.store.list() == []


def test_a_form_from_another_site_with_the_sessions_cookie_changes_nothing(
    console: _Console,
) -> None:
    browser = console.signed_in()
    token = _page_token(browser)

    foreign = browser.post("/console/feeds/shop.orders/replay", data={"csrf_token": token},
                           headers={"Origin": "https://evil.test"})  # fmt: skip
    tokenless = browser.post("/console/feeds/shop.orders/replay", headers=OWN)

    _refused(foreign, "not the console's own origin")
    _refused(tokenless, "no valid form token")
    assert console.views.replayed == []


def test_a_token_of_any_characters_is_refused_as_a_forged_form(console: _Console) -> None:
    browser = console.signed_in()

    answer = browser.post("/console/feeds/shop.orders/replay",
                          data={"csrf_token": "ü\x88\U0001f600"}, headers=OWN)  # fmt: skip

    _refused(answer, "no valid form token")
    assert console.views.replayed == []


def test_the_form_token_is_bound_to_its_session(console: _Console) -> None:
    first, second = console.signed_in(), console.signed_in()
    first_token = _page_token(first)

    replayed = first.post("/console/feeds/shop.orders/replay",
                          data={"csrf_token": first_token}, headers=OWN)  # fmt: skip
    borrowed = second.post("/console/feeds/shop.orders/replay",
                           data={"csrf_token": first_token}, headers=OWN)  # fmt: skip

    assert replayed.status_code == 303
    _refused(borrowed, "no valid form token")
    assert [topic for topic, _caller in console.views.replayed] == ["shop.orders"]


def _page_token(browser: TestClient) -> str:
    """The token of a signed-in page (that of an unknown feed: its sign-out form has it)."""
    return token_of(browser.get("/console/feeds/shop.missing").text)


def test_sign_out_deletes_the_session_so_a_copy_of_its_cookie_signs_nobody_in(
    console: _Console,
) -> None:
    browser = console.signed_in()
    copied = browser.cookies.get(SESSION_COOKIE)
    token = _page_token(browser)

    answer = browser.post("/console/sign-out", data={"csrf_token": token}, headers=OWN)

    assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
    assert f'{SESSION_COOKIE}=""' in answer.headers["set-cookie"]
    assert console.store.list() == []
    replay = console.browser()
    replay.cookies.set(SESSION_COOKIE, copied or "", path="/console")
    again = replay.post("/console/feeds/shop.orders/replay", data={"csrf_token": token},
                        headers=OWN)  # fmt: skip
    assert (again.status_code, again.headers["location"]) == (303, "/console/sign-in")
    assert console.views.replayed == []


def test_sign_out_without_the_token_keeps_the_session(console: _Console) -> None:
    browser = console.signed_in()

    _refused(browser.post("/console/sign-out", headers=OWN), "no valid form token")

    assert len(console.store.list()) == 1


def test_a_revoked_keys_session_leads_to_sign_in_and_its_row_is_deleted(
    console: _Console,
) -> None:
    browser = console.signed_in()
    console.teams.revoke(key_id=console.key_id)

    answer = browser.post("/console/feeds/shop.orders/replay", headers=OWN)

    assert (answer.status_code, answer.headers["location"]) == (303, "/console/sign-in")
    assert f'{SESSION_COOKIE}=""' in answer.headers["set-cookie"]
    assert console.store.list() == []


def test_a_configured_console_origin_is_the_only_one_accepted(hub_engine: Engine) -> None:
    console = _Console(hub_engine, console_origin="https://console.example.com")
    browser = console.browser()
    token = token_of(browser.get("/console/sign-in").text)
    form = {"api_key": console.key, "csrf_token": token}

    _refused(browser.post("/console/sign-in", data=form, headers=OWN), "console.example.com")
    answer = browser.post(
        "/console/sign-in", data=form, headers={"Origin": "https://console.example.com"}
    )

    assert answer.status_code == 303


def test_with_auth_disabled_forms_carry_the_form_cookies_token(hub_engine: Engine) -> None:
    console = _Console(hub_engine, auth=AuthMode.DISABLED)
    browser = console.browser()
    page = browser.post("/console/tables/plan", headers=OWN)  # no token: refused, with the form
    _refused(page, "no valid form token")
    token = token_of(page.text)
    assert browser.cookies.get(FORM_COOKIE) == token

    answer = browser.post("/console/feeds/shop.orders/replay", data={"csrf_token": token},
                          headers=OWN)  # fmt: skip

    assert answer.status_code == 303
    assert console.views.replayed == [
        ("shop.orders", Principal(key_id="anonymous", team=None, admin=True))
    ]


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("https://Hub.Test", Origin("https", "hub.test", 443)),
        ("http://127.0.0.1:8080/console/feeds?x=1", Origin("http", "127.0.0.1", 8080)),
        ("http://[::1]:80", Origin("http", "::1", 80)),
        ("null", None),
        ("ftp://hub.test", None),
        ("https://hub.test:99999", None),
        ("https://", None),
    ],
)
def test_origins_are_compared_by_scheme_host_and_port(url: str, origin: Origin | None) -> None:
    assert origin_of(url) == origin


def test_a_proxy_ending_tls_is_accepted_on_the_same_host(hub_engine: Engine) -> None:
    console = _Console(hub_engine)
    browser = TestClient(console.app, base_url="http://hub.test", follow_redirects=False)
    token = token_of(browser.get("/console/sign-in").text)
    form = {"api_key": console.key, "csrf_token": token}
    browser.cookies.set(FORM_COOKIE, token, path="/console")  # plain HTTP keeps no Secure cookie

    assert browser.post("/console/sign-in", data=form, headers=OWN).status_code == 303
    _refused(
        browser.post("/console/sign-in", data=form, headers={"Origin": "http://hub.test:8080"}),
        "not the console's own origin",
    )
