"""Schemas the whole pipeline can carry, over HTTP: what breaks a later stage is refused with
422 and 42201 at registration, at compatibility checks and at feed creation, and nothing is
created (rules: registry/schema_rules.py; fixtures and helpers: tests/integration/conftest.py,
tests/support/registry_rules.py)."""

import json
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.hub_client import bearer, unique_topic
from tests.support.registry_rules import (
    error,
    order_schemas,
    record_schema,
    register,
    send,
    unique_subject,
)

pytestmark = pytest.mark.integration

NESTED_UNION = record_schema("Order", ("id", "long"), ("amount", ["null", ["int", "long"]]))
RECURSIVE = record_schema("Node", ("value", "long"), ("next", ["null", "Node"]))

REFUSED: list[tuple[str, str, str]] = [
    (record_schema("Order", ("id", "long"), ("a b", "string")), "$.fields[1].name", "naming"),
    (record_schema("Order", ("id", "long"), ("ID", "string")), "$.fields[1].name", "ignoring case"),
    (record_schema("Order", ("id", "long"), ("_hub_x", "long")), "$.fields[1].name", "reserved"),
    (NESTED_UNION, "$.fields[1].type[1]", "union directly inside a union"),
    (
        record_schema("Order", ("id", ["null", "long", "long"])),
        "$.fields[0].type[2]",
        "two branches of type 'long'",
    ),
    (RECURSIVE, "$.fields[1].type[1]", "cannot flatten"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "path", "rule"), REFUSED)
def test_schemas_breaking_a_rule_are_not_registered(
    http: httpx.Client, schema: str, path: str, rule: str
) -> None:
    subject = unique_subject()
    message = error(
        send(http, "POST", f"/subjects/{subject}/versions", {"schema": schema}), 422, 42201
    )
    assert path in message and rule in message
    error(http.get(f"/subjects/{subject}/versions"), 404, 40401)


@pytest.mark.parametrize(("schema", "path", "rule"), REFUSED)
def test_compatibility_checks_of_schemas_breaking_a_rule_are_422(
    http: httpx.Client, schema: str, path: str, rule: str
) -> None:
    v1, _, _ = order_schemas()
    subject = unique_subject()
    register(http, subject, v1)
    for route in (
        f"/compatibility/subjects/{subject}/versions",
        f"/compatibility/subjects/{subject}/versions/latest",
    ):
        message = error(send(http, "POST", route, {"schema": schema}), 422, 42201)
        assert path in message and rule in message


def test_recursive_schemas_are_registered_under_subjects_that_are_not_a_topics(
    http: httpx.Client,
) -> None:
    subject = f"rules.types.t{uuid.uuid4().hex[:10]}.Node"
    schema = record_schema(
        "Node", ("value", "long"), ("next", ["null", "Node"]), namespace=f"n{uuid.uuid4().hex[:10]}"
    )
    register(http, subject, schema)


def test_over_limit_schemas_are_422_naming_the_limit_and_its_setting(http: httpx.Client) -> None:
    subject = unique_subject()
    path = f"/subjects/{subject}/versions"
    enum = {"type": "enum", "name": "Code", "symbols": [f"C{i}" for i in range(1_001)]}
    message = error(
        send(http, "POST", path, {"schema": record_schema("R", ("code", enum))}), 422, 42201
    )
    assert "1,001" in message and "HUB_REGISTRY_MAX_ENUM_SYMBOLS" in message

    deep = '{"type": "array", "items": ' * 5_000 + '"long"' + "}" * 5_000
    message = error(send(http, "POST", path, {"schema": deep}), 422, 42201)
    assert "HUB_REGISTRY_MAX_SCHEMA_DEPTH" in message

    big = json.dumps({"type": "record", "name": "R", "doc": "x" * 300_000, "fields": []})
    message = error(send(http, "POST", path, {"schema": big}), 422, 42201)
    assert "HUB_REGISTRY_MAX_SCHEMA_BYTES" in message
    error(http.get(f"/subjects/{subject}/versions"), 404, 40401)


def test_a_feed_whose_schema_has_a_field_named_a_b_is_refused_and_nothing_is_created(
    api_url: str, team_key: Callable[[str], str]
) -> None:
    key = team_key("rules")
    topic = unique_topic("rules")
    schema: dict[str, Any] = {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "a b", "type": "string"}],
    }
    response = httpx.post(
        f"{api_url}/v1/feeds",
        headers=bearer(key),
        json={
            "topic": topic,
            "owner": "rules",
            "kind": "event",
            "value_schema": json.dumps(schema),
        },
        timeout=60,
    )
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error_code"] == 42201
    assert "$.fields[1].name" in body["message"] and "'a b'" in body["message"]
    assert httpx.get(f"{api_url}/v1/feeds/{topic}", headers=bearer(key)).status_code == 404
    assert httpx.get(f"{api_url}/subjects/{topic}-value/versions").status_code == 404
