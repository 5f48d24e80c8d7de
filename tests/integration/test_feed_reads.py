"""Read grants over the real API: a restricted feed's records are read by its owner, the teams
it grants and admins; its owner changes who, through the feeds API or `hub feed`, and the console
shows its records to those teams only."""

import os
import random
from collections.abc import Callable

import httpx
import pytest

from hub_cli import demo
from tests.support.cli import hub
from tests.support.console_browser import Browser
from tests.support.hub_client import bearer, create_feed, publish, unique_topic

pytestmark = pytest.mark.integration

OWNER, GRANTED, OTHER = "readsowner", "readsgranted", "readsother"


@pytest.fixture
def restricted(api_url: str, team_key: Callable[[str], str]) -> str:
    """A feed of OWNER that only GRANTED reads besides it, with one record published."""
    key = team_key(OWNER)
    team_key(GRANTED)  # the team must exist to be granted
    topic = unique_topic(OWNER)
    feed = create_feed(
        api_url, key, topic=topic, schema=demo.schema_text("demo.page_views"), owner=OWNER,
        read_public=False, readers=[GRANTED],
    )  # fmt: skip
    assert (feed["read_public"], feed["readers"]) == (False, [GRANTED])
    view = demo.page_view(random.Random(3))
    answer = publish(api_url, key, topic, [{"key": view["view_id"], "value": view}])
    assert answer.status_code == 200, answer.text
    return topic


def _readers(api_url: str, topic: str, key: str, method: str, team: str) -> httpx.Response:
    return httpx.request(
        method, f"{api_url}/v1/feeds/{topic}/readers/{team}", headers=bearer(key), timeout=30
    )


def test_only_the_owner_or_an_admin_changes_who_reads_a_feed(
    api_url: str, restricted: str, team_key: Callable[[str], str], admin_key: str
) -> None:
    team_key(OTHER)

    taken = _readers(api_url, restricted, team_key(OTHER), "PUT", OTHER)
    granted = _readers(api_url, restricted, team_key(OWNER), "PUT", OTHER)
    revoked = _readers(api_url, restricted, admin_key, "DELETE", OTHER)
    unknown = _readers(api_url, restricted, team_key(OWNER), "PUT", "no_such_team")

    assert (taken.status_code, taken.json()["error_code"]) == (403, 40301)
    assert granted.status_code == 200
    assert granted.json()["readers"] == sorted([GRANTED, OTHER])
    assert revoked.status_code == 200
    assert revoked.json()["readers"] == [GRANTED]
    assert (unknown.status_code, unknown.json()["error_code"]) == (404, 40421)
    feed = httpx.get(f"{api_url}/v1/feeds/{restricted}", headers=bearer(admin_key)).json()
    assert (feed["read_public"], feed["readers"]) == (False, [GRANTED])


def test_hub_feed_commands_grant_revoke_restrict_and_open_a_feed(
    api_url: str, restricted: str, team_key: Callable[[str], str]
) -> None:
    team_key(OTHER)
    env = {**os.environ, "HUB_API_URL": api_url, "HUB_API_KEY": team_key(OWNER)}

    outputs = [
        hub("feed", "grant", restricted, OTHER, env=env),
        hub("feed", "revoke", restricted, GRANTED, env=env),
        hub("feed", "open", restricted, env=env),
        hub("feed", "restrict", restricted, env=env),
    ]
    refused = hub("feed", "grant", restricted, OTHER, env={**env, "HUB_API_KEY": team_key(OTHER)})

    assert [o.returncode for o in outputs] == [0, 0, 0, 0], [o.stderr for o in outputs]
    assert f"read by team {OWNER}, admins and: {OTHER}" in outputs[1].stdout
    assert "every team reads it" in outputs[2].stdout
    assert f"read by team {OWNER}, admins and: {OTHER}" in outputs[3].stdout
    assert refused.returncode == 2
    assert "40301" in refused.stderr


def test_the_console_shows_a_restricted_feeds_records_to_its_readers_only(
    api_url: str, restricted: str, team_key: Callable[[str], str]
) -> None:
    pages = {}
    for team in (OWNER, GRANTED, OTHER):
        browser = Browser(api_url)
        assert browser.sign_in(team_key(team)).status_code == 303
        pages[team] = browser.get(f"/console/feeds/{restricted}")

    assert {team: page.status_code for team, page in pages.items()} == dict.fromkeys(pages, 200)
    for team in (OWNER, GRANTED):
        assert "lets only itself and the teams it grants" not in pages[team].text
        assert "view_id" in pages[team].text.split("Latest records", 1)[1]
    assert "lets only itself and the teams it grants" in pages[OTHER].text
    # The page's metadata stays visible; no record value reaches the other team.
    assert restricted in pages[OTHER].text
    assert "view_id" not in pages[OTHER].text.split("Latest records", 1)[1]
