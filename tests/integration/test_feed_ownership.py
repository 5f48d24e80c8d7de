"""Feed creation never writes over another team's feed, a reserved topic or a foreign topic."""

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from tests.support.hub_client import bearer, create_feed, unique_topic

pytestmark = pytest.mark.integration

OWNER = "ownership_a"
OTHER = "ownership_b"
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "sales",
    "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}],
}
# Compatible with ORDER (a new optional field), so only ownership can refuse it.
ORDER_V2 = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


@pytest.fixture(scope="module")
def owner_key(team_key: Callable[[str], str]) -> str:
    return team_key(OWNER)


@pytest.fixture(scope="module")
def other_key(team_key: Callable[[str], str]) -> str:
    return team_key(OTHER)


@pytest.fixture(scope="module")
def admin(kafka_bootstrap: str) -> TopicAdmin:
    return TopicAdmin(KafkaSettings(bootstrap_servers=kafka_bootstrap))


def _post_feed(api_url: str, key: str, topic: str, owner: str, schema: Any) -> httpx.Response:
    return httpx.post(
        f"{api_url}/v1/feeds",
        headers=bearer(key),
        json={"topic": topic, "owner": owner, "kind": "event", "value_schema": json.dumps(schema)},
        timeout=60,
    )


def _versions(api_url: str, subject: str) -> Any:
    return httpx.get(f"{api_url}/subjects/{subject}/versions").json()


def _shown(admin: TopicAdmin, topic: str, *, present: bool) -> bool:
    """Whether Kafka's metadata shows `topic` present (or absent), waiting for it to settle."""
    deadline = time.monotonic() + 30
    while admin.exists(topic) is not present:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_another_team_creating_a_feed_on_a_taken_topic_gets_409_and_registers_nothing(
    api_url: str, admin_key: str, owner_key: str, other_key: str
) -> None:
    topic = unique_topic(OTHER)  # the other team's domain, where an admin made OWNER's feed
    create_feed(api_url, admin_key, topic=topic, schema=ORDER, owner=OWNER)
    before = _versions(api_url, f"{topic}-value")

    response = _post_feed(api_url, other_key, topic, OTHER, ORDER_V2)

    assert response.status_code == 409, response.text
    assert response.json()["error_code"] == 40920
    assert OWNER in response.json()["message"]
    assert _versions(api_url, f"{topic}-value") == before == [1]
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").json()["owner"] == OWNER


@pytest.mark.parametrize("reserved", ["x.y.dlq", "_hub_state.orders", "__consumer_offsets"])
def test_a_reserved_topic_is_refused_as_a_feed_and_nothing_is_created(
    api_url: str, owner_key: str, admin: TopicAdmin, reserved: str
) -> None:
    response = _post_feed(api_url, owner_key, reserved, OWNER, ORDER)

    assert response.status_code == 422, response.text
    assert response.json()["error_code"] == 42227
    assert "reserved" in response.json()["message"]
    assert httpx.get(f"{api_url}/subjects/{reserved}-value/versions").status_code == 404
    assert httpx.get(f"{api_url}/v1/feeds/{reserved}").status_code == 404
    if reserved != "__consumer_offsets":  # Kafka's own; may exist on the broker
        assert not admin.exists(reserved)
        assert not admin.exists(f"{reserved}.dlq")


def test_another_feeds_dead_letter_topic_cannot_be_claimed_or_deleted_as_a_feed(
    api_url: str, owner_key: str, other_key: str, admin: TopicAdmin
) -> None:
    topic = unique_topic(OWNER)
    create_feed(api_url, owner_key, topic=topic, schema=ORDER, owner=OWNER)
    dlq = f"{topic}.dlq"
    assert _shown(admin, dlq, present=True)

    created = _post_feed(api_url, other_key, dlq, OTHER, ORDER)
    deleted = httpx.delete(
        f"{api_url}/v1/feeds/{dlq}", headers=bearer(other_key), params={"confirm": dlq}
    )

    assert created.status_code == 422 and created.json()["error_code"] == 42227, created.text
    assert deleted.status_code == 422 and deleted.json()["error_code"] == 42227, deleted.text
    assert "dead-letter" in deleted.json()["message"]
    assert admin.exists(dlq)
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").json()["owner"] == OWNER


def test_a_kafka_topic_created_outside_the_hub_is_not_adopted_as_a_feed(
    api_url: str, owner_key: str, admin: TopicAdmin
) -> None:
    topic = unique_topic(OWNER)
    assert admin.create(topic, partitions=1, config={})

    response = _post_feed(api_url, owner_key, topic, OWNER, ORDER)

    assert response.status_code == 409, response.text
    assert response.json()["error_code"] == 40923
    assert "outside the hub" in response.json()["message"]
    assert httpx.get(f"{api_url}/v1/feeds/{topic}").status_code == 404
    assert httpx.get(f"{api_url}/subjects/{topic}-value/versions").status_code == 404
    assert not admin.exists(f"{topic}.dlq")
    assert admin.exists(topic)  # left as it was


def test_a_feed_whose_schema_is_refused_leaves_no_topics_behind_and_can_be_retried(
    api_url: str, owner_key: str, admin: TopicAdmin
) -> None:
    topic = unique_topic(OWNER)  # in the owner's domain, so it may register before the feed
    subject = f"{topic}-value"
    # A subject left from an earlier feed of that topic, which the new schema breaks.
    registered = httpx.post(
        f"{api_url}/subjects/{subject}/versions",
        headers=bearer(owner_key),
        json={"schema": json.dumps(ORDER)},
        timeout=30,
    )
    assert registered.status_code == 200, registered.text
    breaking = {**ORDER, "fields": [{"name": "id", "type": "long"}]}

    refused = _post_feed(api_url, owner_key, topic, OWNER, breaking)

    assert refused.status_code == 409 and refused.json()["error_code"] == 40901, refused.text
    assert _shown(admin, topic, present=False) and _shown(admin, f"{topic}.dlq", present=False)
    assert _versions(api_url, subject) == [1]
    assert _post_feed(api_url, owner_key, topic, OWNER, ORDER_V2).status_code == 201
    assert _versions(api_url, subject) == [1, 2]


def _lookalikes() -> tuple[str, str]:
    """Two topics that differ only in '.' and '_', so both name the table
    `ownership_a_t<id>_orders`; the first is in OWNER's domain."""
    suffix = uuid.uuid4().hex[:10]
    return f"{OWNER}.t{suffix}_orders", f"{OWNER}_t{suffix}.orders"


def test_a_feed_that_would_land_in_another_teams_tables_gets_409_naming_that_feed(
    api_url: str, owner_key: str, admin_key: str, admin: TopicAdmin
) -> None:
    first, lookalike = _lookalikes()
    create_feed(api_url, owner_key, topic=first, schema=ORDER, owner=OWNER)

    # By an admin: a team key may create feeds in its own domain only, which the first is not.
    response = _post_feed(api_url, admin_key, lookalike, OTHER, ORDER_V2)

    assert response.status_code == 409, response.text
    assert response.json()["error_code"] == 40924
    message = response.json()["message"]
    assert f"'{first}'" in message and OWNER in message
    assert f"bronze.{first.replace('.', '_')}" in message
    assert httpx.get(f"{api_url}/v1/feeds/{lookalike}").status_code == 404
    assert httpx.get(f"{api_url}/subjects/{lookalike}-value/versions").status_code == 404
    assert not admin.exists(lookalike) and not admin.exists(f"{lookalike}.dlq")
    assert httpx.get(f"{api_url}/v1/feeds/{first}").json()["owner"] == OWNER


def test_a_topic_that_differs_from_a_kafka_topic_only_in_dots_and_underscores_is_refused(
    api_url: str, owner_key: str, admin: TopicAdmin
) -> None:
    lookalike, outside = _lookalikes()
    assert admin.create(outside, partitions=1, config={})

    response = _post_feed(api_url, owner_key, lookalike, OWNER, ORDER)

    assert response.status_code == 409, response.text
    assert response.json()["error_code"] == 40924
    assert f"'{outside}'" in response.json()["message"]
    assert httpx.get(f"{api_url}/v1/feeds/{lookalike}").status_code == 404
    assert httpx.get(f"{api_url}/subjects/{lookalike}-value/versions").status_code == 404
    assert admin.exists(outside)  # left as it was


# --- registry subjects: who may write them -------------------------------------------------

REGISTRY_TYPE = "application/vnd.schemaregistry.v1+json"


def _write(api_url: str, key: str | None, method: str, path: str, body: Any = None) -> Any:
    headers = {"Content-Type": REGISTRY_TYPE, **(bearer(key) if key else {})}
    content = json.dumps(body) if body is not None else None
    return httpx.request(method, f"{api_url}{path}", headers=headers, content=content, timeout=30)


def _every_write(subject: str, schema: Any) -> list[tuple[str, str, Any]]:
    return [
        ("POST", f"/subjects/{subject}/versions", {"schema": json.dumps(schema)}),
        ("PUT", f"/config/{subject}", {"compatibility": "NONE"}),
        ("DELETE", f"/config/{subject}", None),
        ("PUT", f"/mode/{subject}", {"mode": "READONLY"}),
        ("DELETE", f"/mode/{subject}", None),
        ("DELETE", f"/subjects/{subject}/versions/1", None),
        ("DELETE", f"/subjects/{subject}", None),
    ]


def _state(api_url: str, subject: str) -> tuple[Any, ...]:
    paths = (f"/subjects/{subject}/versions", f"/config/{subject}", f"/mode/{subject}")
    return tuple(httpx.get(f"{api_url}{path}", timeout=30).json() for path in paths)


def _refused_everywhere(api_url: str, key: str | None, subject: str, status: int) -> None:
    before = _state(api_url, subject)
    for method, path, body in _every_write(subject, ORDER_V2):
        answer = _write(api_url, key, method, path, body)
        assert answer.status_code == status, (method, path, answer.text)
        assert answer.json()["error_code"] == (40301 if status == 403 else 40101)
    assert _state(api_url, subject) == before


@pytest.mark.parametrize(
    "subject_of",
    [
        pytest.param(lambda topic: f"{topic}-value", id="feed-value"),
        pytest.param(lambda topic: f"{topic}-key", id="feed-key"),
    ],
)
def test_only_the_feed_team_or_an_admin_writes_a_feeds_subjects(
    api_url: str,
    owner_key: str,
    other_key: str,
    admin_key: str,
    subject_of: Callable[[str], str],
) -> None:
    topic = unique_topic("sales")  # another domain: the feed's team owns its subjects anyway
    create_feed(api_url, admin_key, topic=topic, schema=ORDER, owner=OWNER)
    subject = subject_of(topic)
    if subject.endswith("-key"):
        registered = _write(api_url, owner_key, "POST", f"/subjects/{subject}/versions",
                            {"schema": json.dumps(ORDER)})  # fmt: skip
        assert registered.status_code == 200, registered.text

    _refused_everywhere(api_url, other_key, subject, 403)
    _refused_everywhere(api_url, None, subject, 401)
    message = _write(api_url, other_key, "PUT", f"/mode/{subject}", {"mode": "READONLY"}).json()
    assert f"belongs to team '{OWNER}'" in message["message"]

    for key in (owner_key, admin_key):
        for method, path, body in _every_write(subject, ORDER_V2)[:5]:
            answer = _write(api_url, key, method, path, body)
            assert answer.status_code == 200, (method, path, answer.text)


@pytest.mark.parametrize("suffix", ["-value", "-key", ".customer_type"])
def test_a_subject_of_no_feed_belongs_to_the_team_named_by_its_domain(
    api_url: str, owner_key: str, other_key: str, admin_key: str, suffix: str
) -> None:
    subject = f"{unique_topic(OWNER)}{suffix}"  # e.g. a future feed's subject, or a shared type
    # Another team can neither pre-register it nor put it in READONLY.
    _refused_everywhere(api_url, other_key, subject, 403)
    assert httpx.get(f"{api_url}/subjects/{subject}/versions").status_code == 404

    for method, path, body in _every_write(subject, ORDER)[:5]:
        answer = _write(api_url, owner_key, method, path, body)
        assert answer.status_code == 200, (method, path, answer.text)
    assert _versions(api_url, subject) == [1]
    _refused_everywhere(api_url, other_key, subject, 403)
    _refused_everywhere(api_url, None, subject, 401)
    deleted = _write(api_url, admin_key, "DELETE", f"/subjects/{subject}")
    assert deleted.status_code == 200 and deleted.json() == [1], deleted.text


def test_a_subject_without_a_domain_is_written_by_admins_only(
    api_url: str, owner_key: str, admin_key: str
) -> None:
    subject = f"nodomain_{uuid.uuid4().hex[:10]}-value"
    _refused_everywhere(api_url, owner_key, subject, 403)
    registered = _write(api_url, admin_key, "POST", f"/subjects/{subject}/versions",
                        {"schema": json.dumps(ORDER)})  # fmt: skip
    assert registered.status_code == 200, registered.text


def test_a_team_can_neither_set_import_nor_register_explicit_ids(
    api_url: str, owner_key: str, admin_key: str
) -> None:
    subject = f"{unique_topic(OWNER)}-value"
    schema = json.dumps(ORDER)
    path = f"/subjects/{subject}/versions"
    refused = _write(api_url, owner_key, "PUT", f"/mode/{subject}", {"mode": "import"})
    assert refused.status_code == 403 and refused.json()["error_code"] == 40301, refused.text
    assert httpx.get(f"{api_url}/mode/{subject}").status_code == 404
    assert _write(api_url, owner_key, "PUT", "/mode", {"mode": "IMPORT"}).status_code == 403

    # Even in IMPORT mode set by an admin, explicit ids and versions stay the admin's.
    assert _write(api_url, admin_key, "PUT", f"/mode/{subject}", {"mode": "IMPORT"}).is_success
    for extra in ({"id": 123_456}, {"version": 3}, {"id": 2**40}):
        answer = _write(api_url, owner_key, "POST", path, {"schema": schema, **extra})
        assert answer.status_code == 403 and answer.json()["error_code"] == 40301, answer.text
    too_big = _write(api_url, admin_key, "POST", path, {"schema": schema, "id": 2**31})
    assert too_big.status_code == 422 and too_big.json()["error_code"] == 42228, too_big.text
    assert httpx.get(f"{api_url}/subjects/{subject}/versions").status_code == 404
    # Without an id the owner may still register into its subject.
    assert _write(api_url, owner_key, "POST", path, {"schema": schema}).status_code == 200
