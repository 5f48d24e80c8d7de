"""Every write to what another team owns, or to what the hub keeps for itself, is refused with
its code, as every caller, and leaves the other team's subjects, feed, topics and table as they
were.

One table of hostile writes (`CASES`), run as team `sec_a` against team `sec_b`'s resources, as
anonymous, and (for reserved and foreign topics, which nobody may claim) as an admin.
"""

import json
from dataclasses import dataclass
from typing import Any

import pytest

from tests.security.conftest import ORDER, ORDER_V2, Hub

pytestmark = pytest.mark.security

ATTACKER, VICTIM = "sec_a", "sec_b"
FORBIDDEN = (403, 40301)
RESERVED = (422, 42227)


@dataclass(frozen=True)
class Case:
    """A hostile write: `{topic}`, `{value}`, `{key}`, `{domain}` name the victim's resources,
    `{own}` the attacker's domain subject, `{outside}` a Kafka topic that is no feed."""

    id: str
    method: str
    path: str
    body: Any = None
    expected: tuple[int, int] = FORBIDDEN
    # Reserved and foreign topics are refused to admins as well.
    admins_too: bool = False
    # What an admin gets, where it differs from what a team gets.
    as_admin: tuple[int, int] | None = None


def _subject_writes(name: str) -> list[Case]:
    schema = {"schema": json.dumps(ORDER_V2)}
    return [
        Case(f"register-{name}", "POST", f"/subjects/{{{name}}}/versions", schema),
        Case(f"register-id-{name}", "POST", f"/subjects/{{{name}}}/versions", {**schema, "id": 7}),
        Case(f"soft-delete-{name}", "DELETE", f"/subjects/{{{name}}}"),
        Case(f"hard-delete-{name}", "DELETE", f"/subjects/{{{name}}}?permanent=true"),
        Case(f"delete-version-{name}", "DELETE", f"/subjects/{{{name}}}/versions/1"),
        Case(
            f"hard-delete-version-{name}",
            "DELETE",
            f"/subjects/{{{name}}}/versions/1?permanent=true",
        ),
        Case(f"set-config-{name}", "PUT", f"/config/{{{name}}}", {"compatibility": "NONE"}),
        Case(f"delete-config-{name}", "DELETE", f"/config/{{{name}}}"),
        Case(f"readonly-{name}", "PUT", f"/mode/{{{name}}}", {"mode": "READONLY"}),
        Case(f"import-{name}", "PUT", f"/mode/{{{name}}}", {"mode": "IMPORT"}),
        Case(f"delete-mode-{name}", "DELETE", f"/mode/{{{name}}}"),
    ]


def _feed(topic: str, owner: str = ATTACKER) -> dict[str, Any]:
    return {"topic": topic, "owner": owner, "kind": "event", "value_schema": json.dumps(ORDER)}


RECORDS = {"records": [{"value": {"id": "x", "cents": 1}}]}
PROXY_RECORDS = {"value_schema_id": 1, "records": [{"value": {"id": "x", "cents": 1}}]}

CASES = [
    # Registry: the victim's feed subjects and domain subject; subjects of no team; settings
    # of the whole registry; IMPORT and explicit ids even on the attacker's own subject.
    *_subject_writes("value"),
    *_subject_writes("key"),
    *_subject_writes("domain"),
    *_subject_writes("prefixless")[:1],
    Case("set-config-prefixless", "PUT", "/config/{prefixless}", {"compatibility": "NONE"}),
    Case("readonly-prefixless", "PUT", "/mode/{prefixless}", {"mode": "READONLY"}),
    Case("global-config", "PUT", "/config", {"compatibility": "NONE"}),
    Case("delete-global-config", "DELETE", "/config"),
    Case("global-import", "PUT", "/mode", {"mode": "IMPORT"}),
    Case("global-readonly", "PUT", "/mode", {"mode": "READONLY"}),
    Case("delete-global-mode", "DELETE", "/mode"),
    Case("own-import", "PUT", "/mode/{own}", {"mode": "IMPORT"}),
    Case(
        "own-explicit-id",
        "POST",
        "/subjects/{own}/versions",
        {"schema": json.dumps(ORDER), "id": 900},
    ),
    Case(
        "own-explicit-version",
        "POST",
        "/subjects/{own}/versions",
        {"schema": json.dumps(ORDER), "version": 9},
    ),
    # Feeds: the victim's, reserved topics, internal topics, a topic outside the catalog.
    Case("claim-feed", "POST", "/v1/feeds", _feed("{topic}"), (409, 40920)),
    Case("feed-for-victim", "POST", "/v1/feeds", _feed(f"{ATTACKER}.new", owner=VICTIM)),
    Case("patch-feed", "PATCH", "/v1/feeds/{topic}", {"description": "mine now"}),
    Case("delete-feed", "DELETE", "/v1/feeds/{topic}?confirm={topic}"),
    Case("claim-dlq", "POST", "/v1/feeds", _feed("{topic}.dlq"), RESERVED, True),
    Case("delete-dlq", "DELETE", "/v1/feeds/{topic}.dlq?confirm={topic}.dlq", None, RESERVED, True),
    Case("claim-hub-topic", "POST", "/v1/feeds", _feed("_hub_connect_offsets"), RESERVED, True),
    Case("claim-hub-segment", "POST", "/v1/feeds", _feed(f"{ATTACKER}._hub_state"), RESERVED, True),
    Case("claim-internal", "POST", "/v1/feeds", _feed("__consumer_offsets"), RESERVED, True),
    Case(
        "delete-internal",
        "DELETE",
        "/v1/feeds/__consumer_offsets?confirm=__consumer_offsets",
        None,
        RESERVED,
        True,
    ),
    Case(
        "delete-connect-state",
        "DELETE",
        "/v1/feeds/_hub_connect_status?confirm=_hub_connect_status",
        None,
        RESERVED,
        True,
    ),
    # Outside the attacker's domain too; an admin may create feeds anywhere, but not there.
    Case(
        "adopt-outside",
        "POST",
        "/v1/feeds",
        _feed("{outside}"),
        admins_too=True,
        as_admin=(409, 40923),
    ),
    Case(
        "delete-outside",
        "DELETE",
        "/v1/feeds/{outside}?confirm={outside}",
        None,
        (404, 40420),
        True,
    ),
    # Records: the gateway and the REST Proxy endpoint.
    Case("publish", "POST", "/v1/feeds/{topic}/records", RECORDS),
    Case("proxy-produce", "POST", "/topics/{topic}", PROXY_RECORDS),
    # The loader: replaying another team's quarantine.
    Case("replay-feed", "POST", "/v1/feeds/{topic}/replay"),
]


def _filled(hub: Hub, text: str) -> str:
    victim, attacker = hub.teams[VICTIM], hub.teams[ATTACKER]
    names = {
        "topic": victim.topic,
        "value": victim.value_subject,
        "key": victim.key_subject,
        "domain": victim.domain_subject,
        "own": attacker.domain_subject,
        "prefixless": "nodomain_security-value",
        "outside": hub.outside_topic,
    }
    for name, value in names.items():
        text = text.replace(f"{{{name}}}", value)
    return text


def _request(hub: Hub, caller: str, case: Case) -> Any:
    body = None if case.body is None else json.loads(_filled(hub, json.dumps(case.body)))
    return hub.call(caller, case.method, _filled(hub, case.path), body=body)


@pytest.fixture(scope="module")
def untouched(hub: Hub) -> dict[str, Any]:
    """What both teams own and what the hub holds, before any hostile request."""
    assert hub.lake is not None
    return {
        "victim": hub.snapshot(VICTIM),
        "attacker": hub.snapshot(ATTACKER),
        "inventory": hub.inventory(),
        "outside": hub.kafka.exists(hub.outside_topic),
        "rows": {team: hub.lake.rows(hub.teams[team].topic) for team in (VICTIM, ATTACKER)},
    }


def _assert_untouched(hub: Hub, untouched: dict[str, Any]) -> None:
    assert hub.snapshot(VICTIM) == untouched["victim"]
    assert hub.snapshot(ATTACKER) == untouched["attacker"]
    assert hub.inventory() == untouched["inventory"]
    assert hub.kafka.exists(hub.outside_topic) == untouched["outside"]


@pytest.mark.parametrize(
    ("caller", "case"),
    [
        *[pytest.param("team", case, id=f"team-{case.id}") for case in CASES],
        *[pytest.param("anonymous", case, id=f"anonymous-{case.id}") for case in CASES],
        *[pytest.param("admin", case, id=f"admin-{case.id}") for case in CASES if case.admins_too],
    ],
)
def test_a_hostile_write_gets_its_code_and_changes_nothing_of_the_other_team(
    hub: Hub, untouched: dict[str, Any], caller: str, case: Case
) -> None:
    answer = _request(hub, ATTACKER if caller == "team" else caller, case)

    expected = (401, 40101) if caller == "anonymous" else case.expected
    if caller == "admin" and case.as_admin is not None:
        expected = case.as_admin
    assert (answer.status_code, answer.json().get("error_code")) == expected, answer.text
    _assert_untouched(hub, untouched)


def test_after_every_hostile_write_the_loader_lands_nothing_new_in_either_team_s_table(
    hub: Hub, untouched: dict[str, Any]
) -> None:
    # Last in the module: the loader lands whatever the cases above put in Kafka.
    assert {team: hub.rows(team) for team in (VICTIM, ATTACKER)} == untouched["rows"]
