"""Hostile feeds and schema lookups get a coded 4xx before anything is written, parsed or asked of
Kafka: a feed in another team's domain (which would take that team's subjects), lookups of
oversize schemas, oversize or binary descriptions, settings beyond what Kafka holds, and topics
whose derived names would not fit Kafka's. On SQLite and on PostgreSQL, the production store.
"""

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.security.conftest import ORDER, TIMEOUT, Hub, running_hub
from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_key

pytestmark = pytest.mark.security

OWNER, OTHER = "sec_a", "sec_b"
INT64_MAX = 2**63 - 1


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hub(
    request: pytest.FixtureRequest, kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Hub]:
    """A hub of the module's own, with teams `sec_a` and `sec_b` (no loader: nothing here is
    about tables)."""
    if request.param == "sqlite":
        database = f"sqlite:///{tmp_path_factory.mktemp('hostile-feeds') / 'hub.db'}"
    else:
        database = _fresh_postgres_database(request.getfixturevalue("postgres_server"))
    with running_hub(database_url=database, bootstrap=kafka_bootstrap) as hub:
        yield hub


def _fresh_postgres_database(server: str) -> str:
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text('DROP DATABASE IF EXISTS "security_hostile_feeds"'))
        conn.execute(text('CREATE DATABASE "security_hostile_feeds"'))
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/security_hostile_feeds"


def _topic(domain: str, length: int = 0) -> str:
    """A new topic of `domain`, padded to `length` characters when given."""
    topic = f"{domain}.t{uuid.uuid4().hex[:10]}"
    return topic + "x" * (length - len(topic)) if length else topic


def _feed(topic: str, owner: str = OWNER, **fields: Any) -> dict[str, Any]:
    body = {"topic": topic, "owner": owner, "kind": "event", "value_schema": json.dumps(ORDER)}
    return {**body, **fields}


def _refused(answer: httpx.Response, status: int, code: int, *words: str) -> str:
    assert (answer.status_code, answer.json().get("error_code")) == (status, code), answer.text
    message: str = answer.json()["message"]
    for word in words:
        assert word in message, message
    return message


def _nothing_of(hub: Hub, topic: str) -> None:
    """No feed, no subject and no Kafka topic of `topic`."""
    assert hub.call("admin", "GET", f"/v1/feeds/{topic}").status_code == 404
    for subject in (f"{topic}-value", f"{topic}-key"):
        versions = hub.call("admin", "GET", f"/subjects/{subject}/versions?deleted=true")
        assert versions.status_code == 404, versions.text
    assert not hub.kafka.exists(topic) and not hub.kafka.exists(f"{topic}.dlq")


# --- a feed in another team's domain ----------------------------------------------------------


def test_a_team_cannot_create_a_feed_in_another_teams_domain_nor_so_take_its_subject(
    hub: Hub,
) -> None:
    topic = _topic(OTHER)
    subject = f"{topic}-value"
    registered = hub.call(OTHER, "POST", f"/subjects/{subject}/versions",
                          body={"schema": json.dumps(ORDER)})  # fmt: skip
    assert registered.status_code == 200, registered.text
    before = hub.snapshot(OTHER), hub.inventory()

    created = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic))
    configured = hub.call(OWNER, "PUT", f"/config/{subject}", body={"compatibility": "NONE"})

    _refused(created, 403, 40301, f"domain '{OTHER}'", f"'{OWNER}.<name>'")
    _refused(configured, 403, 40301, f"team '{OTHER}'")
    assert (hub.snapshot(OTHER), hub.inventory()) == before
    assert hub.call("admin", "GET", f"/subjects/{subject}/versions").json() == [1]
    assert not hub.kafka.exists(topic)


def test_a_team_cannot_create_a_feed_in_a_domain_of_no_team(hub: Hub) -> None:
    topic = _topic("nobody")

    _refused(hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic)), 403, 40301, "'nobody'")
    _nothing_of(hub, topic)


def test_an_admin_cannot_give_another_teams_registered_subject_to_a_new_feed(hub: Hub) -> None:
    topic = _topic(OTHER)
    subject = f"{topic}-key"
    registered = hub.call(OTHER, "POST", f"/subjects/{subject}/versions",
                          body={"schema": json.dumps(ORDER)})  # fmt: skip
    assert registered.status_code == 200, registered.text
    before = hub.inventory()

    taken = hub.call("admin", "POST", "/v1/feeds", body=_feed(topic, key_fields=["id"]))

    _refused(taken, 409, 40925, f"'{subject}'", f"team '{OTHER}'", f"owner '{OTHER}'")
    assert hub.inventory() == before
    assert not hub.kafka.exists(topic)
    # For the team that holds the subject, the admin may create it.
    mine = hub.call("admin", "POST", "/v1/feeds", body=_feed(topic, owner=OTHER))
    assert mine.status_code == 201, mine.text


def test_an_admin_creates_a_feed_outside_its_owners_domain_when_no_team_holds_its_subjects(
    hub: Hub,
) -> None:
    topic = _topic(OTHER)

    created = hub.call("admin", "POST", "/v1/feeds", body=_feed(topic))

    assert created.status_code == 201, created.text
    # The feed's subjects are its team's, not the domain's.
    subject = f"{topic}-value"
    assert hub.call(OWNER, "PUT", f"/config/{subject}", body={"compatibility": "FULL"}).is_success
    refused = hub.call(OTHER, "PUT", f"/config/{subject}", body={"compatibility": "NONE"})
    assert refused.status_code == 403, refused.text


def test_a_feed_for_a_team_that_does_not_exist_is_refused_before_any_topic_is_created(
    hub: Hub,
) -> None:
    topic = _topic("ghosts")

    _refused(hub.call("admin", "POST", "/v1/feeds", body=_feed(topic, owner="ghosts")), 404, 40421)
    _nothing_of(hub, topic)


# --- schema lookups -----------------------------------------------------------------------------


def _wide(fields: int) -> str:
    columns = [{"name": f"f{i}", "type": "int"} for i in range(fields)]
    return json.dumps({"type": "record", "name": "Wide", "fields": columns})


def _nested(depth: int) -> str:
    node: Any = "string"
    for level in range(depth):
        node = {"type": "record", "name": f"N{level}", "fields": [{"name": "f", "type": node}]}
    return json.dumps(node)


REFERENCES = [{"name": f"x.R{i}", "subject": "sec_b.x", "version": 1} for i in range(101)]
OVER_LIMITS = {
    "size": ({"schema": _wide(150_000)}, "HUB_REGISTRY_MAX_SCHEMA_BYTES"),
    "nesting": ({"schema": _nested(200)}, "HUB_REGISTRY_MAX_SCHEMA_DEPTH"),
    "references": ({"schema": _wide(1), "references": REFERENCES}, "MAX_SCHEMA_REFERENCES"),
}


@pytest.mark.parametrize(
    "path", ["/subjects/{subject}", "/compatibility/subjects/{subject}/versions/latest"]
)
@pytest.mark.parametrize(("body", "setting"), OVER_LIMITS.values(), ids=OVER_LIMITS.keys())
def test_an_anonymous_lookup_of_a_schema_over_the_limits_is_refused_before_it_is_parsed(
    hub: Hub, path: str, body: dict[str, Any], setting: str
) -> None:
    subject = hub.teams[OTHER].value_subject

    answer = hub.call("anonymous", "POST", path.format(subject=subject), body=body)

    _refused(answer, 422, 42201, setting)


def test_a_registered_schema_is_still_found_by_an_anonymous_lookup(hub: Hub) -> None:
    subject = hub.teams[OTHER].value_subject

    found = hub.call(
        "anonymous", "POST", f"/subjects/{subject}", body={"schema": json.dumps(ORDER)}
    )

    assert found.status_code == 200, found.text
    assert found.json()["version"] == 1


# --- descriptions --------------------------------------------------------------------------------

DESCRIPTIONS = {
    "5-mb": ("d" * 5_000_000, "HUB_API_MAX_FEED_DESCRIPTION_BYTES"),
    "one-byte-over": ("d" * 4097, "4,096"),
    "multibyte-over": ("\u20ac" * 1366, "4,098 bytes"),  # 1,366 characters, 3 bytes each
    "nul": ("before\x00after", "U+0000"),
    "escape": ("\x1b[31mred", "U+001B"),
    "lone-surrogate": ("\ud800", "Unicode"),
}


@pytest.mark.parametrize(("description", "words"), DESCRIPTIONS.values(), ids=DESCRIPTIONS.keys())
def test_a_hostile_description_is_refused_on_create_and_on_update_and_changes_nothing(
    hub: Hub, description: str, words: str
) -> None:
    topic = _topic(OWNER)
    owned = hub.teams[OWNER].topic
    before = hub.snapshot(OWNER), hub.call("admin", "GET", f"/v1/feeds/{owned}").json()

    created = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic, description=description))
    updated = hub.call(OWNER, "PATCH", f"/v1/feeds/{owned}", body={"description": description})

    _refused(created, 422, 42222, "description", words)
    _refused(updated, 422, 42222, "description", words)
    _nothing_of(hub, topic)
    assert (hub.snapshot(OWNER), hub.call("admin", "GET", f"/v1/feeds/{owned}").json()) == before


def test_a_description_of_the_limit_with_line_breaks_and_tabs_is_kept_as_sent(hub: Hub) -> None:
    description = "Orders\tas placed.\r\n" + "\u20ac" * 1359
    assert len(description.encode("utf-8")) == 4096
    topic = _topic(OWNER)

    created = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic, description=description))

    assert created.status_code == 201, created.text
    listed = {feed["topic"]: feed for feed in hub.call("anonymous", "GET", "/v1/feeds").json()}
    assert listed[topic]["description"] == description


# --- settings beyond what Kafka holds, and names beyond its limits -----------------------------

RETENTIONS = {"int64-overflow": 2**63, "far-beyond": 10**400, "zero": 0, "minus-two": -2}


@pytest.mark.parametrize("retention_ms", RETENTIONS.values(), ids=RETENTIONS.keys())
def test_a_retention_kafka_cannot_hold_is_a_422_before_kafka_is_asked(
    hub: Hub, retention_ms: int
) -> None:
    topic = _topic(OWNER)
    owned = hub.teams[OWNER].topic  # an event feed
    before = hub.snapshot(OWNER)

    created = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic, retention_ms=retention_ms))
    updated = hub.call(OWNER, "PATCH", f"/v1/feeds/{owned}", body={"retention_ms": retention_ms})

    _refused(created, 422, 42222, "retention_ms", str(INT64_MAX))
    _refused(updated, 422, 42222, "retention_ms", str(INT64_MAX))
    _nothing_of(hub, topic)
    assert hub.snapshot(OWNER) == before


def test_the_longest_retention_kafka_holds_is_accepted_on_create_and_on_update(hub: Hub) -> None:
    topic = _topic(OWNER)

    created = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic, retention_ms=INT64_MAX))
    updated = hub.call(OWNER, "PATCH", f"/v1/feeds/{topic}", body={"retention_ms": -1})

    assert created.status_code == 201 and created.json()["retention_ms"] == INT64_MAX, created.text
    assert updated.status_code == 200 and updated.json()["retention_ms"] == -1, updated.text


def test_a_topic_whose_dead_letter_topic_would_pass_kafkas_limit_is_refused_before_kafka(
    hub: Hub,
) -> None:
    topic = _topic(OWNER, length=246)  # its `.dlq` would be 250 characters

    answer = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic))

    _refused(answer, 400, 40001, "245", "'<topic>.dlq'", "249")
    _nothing_of(hub, topic)


def test_the_longest_topic_is_created_with_its_dead_letter_topic(hub: Hub) -> None:
    topic = _topic(OWNER, length=245)

    created = hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic))

    assert created.status_code == 201, created.text
    assert hub.kafka.exists(topic) and hub.kafka.exists(f"{topic}.dlq")
    assert hub.call("anonymous", "GET", f"/subjects/{topic}-value/versions").json() == [1]


@pytest.mark.parametrize("tail", ["\n", "\r\n", " ", "-x", "\u00e9"])
def test_a_topic_with_a_character_beyond_the_hubs_names_is_refused_before_kafka(
    hub: Hub, tail: str
) -> None:
    topic = _topic(OWNER) + tail

    _refused(hub.call(OWNER, "POST", "/v1/feeds", body=_feed(topic)), 400, 40001, "Invalid topic")
    assert not hub.kafka.exists(topic) and not hub.kafka.exists(topic.strip())


# --- what Kafka itself refuses --------------------------------------------------------------------


def test_a_topic_kafka_refuses_is_answered_with_kafkas_reason_not_as_kafka_unreachable(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Three replicas on the session's single broker: Kafka answers, and refuses.
    database = f"sqlite:///{tmp_path_factory.mktemp('refused') / 'hub.db'}"
    with serve_api(
        database_url=database, bootstrap_servers=kafka_bootstrap, kafka={"replication_factor": 3}
    ) as url:
        key = create_key(database, team=OWNER)
        answer = httpx.post(
            f"{url}/v1/feeds", headers=bearer(key), json=_feed(_topic(OWNER)), timeout=TIMEOUT
        )

    message = _refused(answer, 500, 50020, "Kafka refused to create topic", "replication")
    assert "reachable" not in message and kafka_bootstrap not in message
