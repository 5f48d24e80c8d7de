"""The console's sessions over the real API server (uvicorn, the hub's database, Kafka), as a
browser meets them: the cookie holds a session id and no key, the session ends at sign-out (a
copy of the cookie is refused after), with its key's revocation and after its lifetime; a form
without its token or from another origin is refused with 40310 and changes nothing; neither the
key nor the session id reaches a log line."""

import html
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from catalog.teams import TeamStore
from hub_core.database import create_database_engine
from tests.support.api_server import serve_api
from tests.support.console_browser import Browser, token_of
from tests.support.hub_client import create_key
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

SESSION = "hub_console_session"


def _sessions_stored(database: str) -> list[tuple[str, ...]]:
    engine = create_database_engine(database)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT * FROM console_sessions"))
            return [tuple(str(value) for value in row) for row in rows]
    finally:
        engine.dispose()


def _signed_in(answer: httpx.Response) -> bool:
    if answer.status_code == 303:
        assert answer.headers["location"] == "/console/sign-in"
        return False
    assert answer.status_code == 200, answer.text
    return True


def _refused(answer: httpx.Response, reason: str) -> None:
    assert answer.status_code == 403, answer.text
    assert answer.headers["content-type"].startswith("text/html")
    page = html.unescape(answer.text)
    assert "40310" in page and reason in page


@pytest.fixture(scope="module")
def hub(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """An API server of this module's own, on a fresh SQLite file: its URL and database."""
    database = f"sqlite:///{tmp_path_factory.mktemp('console-sessions') / 'hub.db'}"
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap) as url:
        yield url, database


def test_the_cookie_holds_a_session_id_and_neither_it_nor_the_key_reaches_a_log_line(
    hub: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url, database = hub
    key = create_key(database, team="shop")
    browser = Browser(url)
    caplog.set_level(logging.DEBUG)

    signed = browser.sign_in(key)

    assert (signed.status_code, signed.headers["location"]) == (303, "/console/feeds")
    session_id = browser.cookies[SESSION]
    assert list(browser.cookies) == [SESSION]
    secret = key.split("_", 2)[2]  # the secret may hold `_` itself
    assert secret not in session_id and len(session_id) >= 22  # at least 128 bits
    (cookie,) = [c for c in signed.headers.get_list("set-cookie") if c.startswith(SESSION)]
    assert all(part in cookie for part in ("HttpOnly", "Secure", "SameSite=strict",
                                           "Path=/console", f"Max-Age={8 * 3600}"))  # fmt: skip
    page = browser.get("/console/feeds")
    assert _signed_in(page) and "Signed in as team" in page.text
    assert secret not in page.text and session_id not in page.text
    stored = " ".join(" ".join(row) for row in _sessions_stored(database))
    assert secret not in stored and session_id not in stored
    # What the server logged (this test's own client, httpx, logs its requests and answers).
    logged = " ".join(
        f"{r.getMessage()} {r.exc_text or ''}"
        for r in caplog.records
        if not r.name.startswith(("httpx", "httpcore"))
    )
    key_id = key.split("_")[1]
    assert f"console sign-in with key {key_id} (team shop)" in logged
    assert secret not in logged and session_id not in logged


def test_sign_out_deletes_the_session_so_a_copy_of_its_cookie_is_refused(
    hub: tuple[str, str],
) -> None:
    url, database = hub
    browser = Browser(url)
    browser.sign_in(create_key(database, team="shop"))
    page = browser.get("/console/feeds")
    copy = Browser(url)
    copy.cookies = dict(browser.cookies)
    assert _signed_in(copy.get("/console/feeds"))

    out = browser.post("/console/sign-out", {"csrf_token": token_of(page)})

    assert (out.status_code, out.headers["location"]) == (303, "/console/sign-in")
    assert SESSION not in browser.cookies
    assert not _signed_in(copy.get("/console/feeds"))
    assert not _signed_in(browser.get("/console/feeds"))


def test_a_session_of_a_revoked_key_is_refused(hub: tuple[str, str]) -> None:
    url, database = hub
    key = create_key(database, team="shop")
    browser = Browser(url)
    browser.sign_in(key)
    assert _signed_in(browser.get("/console/feeds"))
    engine = create_database_engine(database)
    try:
        teams = TeamStore(engine)
        (revoked,) = [k for k in teams.keys(team=None) if key.startswith(f"hub_{k.key_id}_")]
        teams.revoke(key_id=revoked.key_id)
    finally:
        engine.dispose()

    assert not _signed_in(browser.get("/console/feeds"))
    assert not any(revoked.key_id in row for row in _sessions_stored(database))


def test_forms_without_their_token_or_from_another_origin_are_refused_and_change_nothing(
    hub: tuple[str, str],
) -> None:
    url, database = hub
    key = create_key(database, team="shop")
    before = _sessions_stored(database)
    stranger = Browser(url)
    token = token_of(stranger.get("/console/sign-in"))

    form = {"api_key": key, "csrf_token": token}
    foreign = stranger.post("/console/sign-in", form, origin="https://evil.example")
    _refused(foreign, "not the console's own origin")
    _refused(stranger.post("/console/sign-in", {"api_key": key}), "no valid form token")
    _refused(stranger.post("/console/sign-in", form, origin=None), "without an Origin or Referer")
    assert SESSION not in stranger.cookies
    assert _sessions_stored(database) == before

    browser = Browser(url)
    browser.sign_in(key)
    token = token_of(browser.get("/console/feeds"))
    _refused(browser.post("/console/sign-out"), "no valid form token")
    _refused(browser.post("/console/sign-out", {"csrf_token": token},
                          origin="http://127.0.0.1:1"), "not the console's own origin")  # fmt: skip
    _refused(browser.post("/console/sign-out", {"csrf_token": token_of(stranger.get(
        "/console/sign-in"))}), "no valid form token")  # fmt: skip
    _refused(browser.post("/console/connectors/x/pause", {"csrf_token": "forged"}),
             "no valid form token")  # fmt: skip
    assert _signed_in(browser.get("/console/feeds"))  # still signed in: nothing was changed


def test_a_session_ends_after_its_lifetime(kafka_bootstrap: str, tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    lifetime = {"console_session_seconds": 2}
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap, api=lifetime) as url:
        browser = Browser(url)

        signed = browser.sign_in(create_key(database, team="shop"))

        assert signed.status_code == 303
        assert "Max-Age=2;" in signed.headers["set-cookie"]
        assert len(_sessions_stored(database)) == 1
        wait_until(lambda: not _signed_in(browser.get("/console/feeds")), timeout_s=60,
                   what="the session to end")  # fmt: skip
        assert _sessions_stored(database) == []  # refused and deleted
