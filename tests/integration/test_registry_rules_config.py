"""Compatibility levels and modes over raw HTTP: per subject, registry-wide and transitive.

Registry-wide settings (global compatibility and mode, IMPORT with explicit ids) go to an API
server of the test's own (`own_http`), so they cannot leak into other tests.
"""

import json
import uuid

import httpx
import pytest

from tests.support.registry_rules import (
    error,
    ok,
    order_schemas,
    record_schema,
    register,
    send,
    unique_subject,
)

pytestmark = pytest.mark.integration


# --- configuration and modes --------------------------------------------------------------


def test_subject_compatibility_configuration(http: httpx.Client) -> None:
    v1, v2, broken = order_schemas()
    subject = unique_subject()
    register(http, subject, v1)
    registry_wide = ok(http.get("/config"))["compatibilityLevel"]

    error(http.get(f"/config/{subject}"), 404, 40408)
    error(http.delete(f"/config/{subject}"), 404, 40408)
    assert ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "true"})) == {
        "compatibilityLevel": registry_wide
    }
    assert ok(send(http, "PUT", f"/config/{subject}", {"compatibility": "NONE"})) == {
        "compatibility": "NONE"
    }
    assert ok(http.get(f"/config/{subject}")) == {"compatibilityLevel": "NONE"}
    assert ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "true"})) == {
        "compatibilityLevel": "NONE"
    }
    register(http, subject, broken)

    ok(send(http, "PUT", f"/config/{subject}", {"compatibility": "FORWARD"}))
    assert ok(http.delete(f"/config/{subject}")) == {"compatibilityLevel": "FORWARD"}
    error(http.get(f"/config/{subject}"), 404, 40408)
    # Back under the registry-wide BACKWARD: v2 cannot read the latest (broken) version.
    error(send(http, "POST", f"/subjects/{subject}/versions", {"schema": v2}), 409, 40901)


def test_a_read_only_subject_refuses_writes_but_serves_reads(http: httpx.Client) -> None:
    v1, v2, _ = order_schemas()
    subject, neighbour = unique_subject(), unique_subject()
    register(http, subject, v1)
    assert ok(send(http, "PUT", f"/mode/{subject}", {"mode": "READONLY"})) == {"mode": "READONLY"}
    assert ok(http.get(f"/mode/{subject}")) == {"mode": "READONLY"}

    error(send(http, "POST", f"/subjects/{subject}/versions", {"schema": v2}), 422, 42205)
    error(http.delete(f"/subjects/{subject}/versions/1"), 422, 42205)
    error(http.delete(f"/subjects/{subject}"), 422, 42205)
    assert ok(http.get(f"/subjects/{subject}/versions/latest"))["version"] == 1
    assert ok(send(http, "POST", f"/subjects/{subject}", {"schema": v1}))["version"] == 1
    register(http, neighbour, v2)

    assert ok(http.delete(f"/mode/{subject}")) == {"mode": "READONLY"}
    error(http.get(f"/mode/{subject}"), 404, 40409)
    error(http.delete(f"/mode/{subject}"), 404, 40409)
    assert ok(http.get(f"/mode/{subject}", params={"defaultToGlobal": "true"})) == {
        "mode": "READWRITE"
    }
    register(http, subject, v2)
    assert ok(http.get(f"/subjects/{subject}/versions")) == [1, 2]


def test_registry_wide_compatibility_and_mode(own_http: httpx.Client) -> None:
    http = own_http
    v1, v2, broken = order_schemas()
    subject, newcomer = unique_subject(), unique_subject()
    register(http, subject, v1)
    assert ok(http.get("/config")) == {"compatibilityLevel": "BACKWARD"}
    assert ok(http.get("/mode")) == {"mode": "READWRITE"}

    assert ok(send(http, "PUT", "/config", {"compatibility": "NONE"})) == {"compatibility": "NONE"}
    assert ok(http.get("/config")) == {"compatibilityLevel": "NONE"}
    assert ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "true"})) == {
        "compatibilityLevel": "NONE"
    }
    register(http, subject, broken)
    assert ok(http.delete("/config")) == {"compatibilityLevel": "NONE"}
    assert ok(http.get("/config")) == {"compatibilityLevel": "BACKWARD"}
    error(send(http, "PUT", "/config", {"compatibility": "SIDEWAYS"}), 422, 42203)
    error(send(http, "POST", f"/subjects/{subject}/versions", {"schema": v2}), 409, 40901)

    assert ok(send(http, "PUT", "/mode", {"mode": "READONLY"})) == {"mode": "READONLY"}
    error(send(http, "POST", f"/subjects/{newcomer}/versions", {"schema": v1}), 422, 42205)
    error(http.delete(f"/subjects/{subject}"), 422, 42205)
    # A subject's own mode overrides the registry-wide one.
    ok(send(http, "PUT", f"/mode/{subject}", {"mode": "READWRITE"}))
    assert ok(http.delete(f"/subjects/{subject}/versions/2")) == 2
    error(send(http, "PUT", "/mode", {"mode": "SOMETIMES"}), 422, 42204)

    # IMPORT on a registry that holds schemas needs force.
    error(send(http, "PUT", "/mode", {"mode": "IMPORT"}), 422, 42205)
    assert ok(send(http, "PUT", "/mode", {"mode": "IMPORT"}, force="true")) == {"mode": "IMPORT"}
    assert ok(http.delete("/mode")) == {"mode": "IMPORT"}
    assert ok(http.get("/mode")) == {"mode": "READWRITE"}
    register(http, newcomer, v1)


def test_import_mode_keeps_the_given_ids_and_versions(own_http: httpx.Client) -> None:
    http = own_http
    v1, v2, broken = order_schemas()
    subject = unique_subject()
    # An empty registry switches to IMPORT without force.
    assert ok(send(http, "PUT", "/mode", {"mode": "IMPORT"})) == {"mode": "IMPORT"}
    assert register(http, subject, v1, body={"id": 1000, "version": 5}) == 1000
    # IMPORT checks no compatibility: the broken schema goes in as imported.
    assert register(http, subject, broken, body={"id": 1001, "version": 6}) == 1001
    assert ok(http.get(f"/subjects/{subject}/versions")) == [5, 6]
    assert ok(http.get(f"/subjects/{subject}/versions/5"))["id"] == 1000
    assert json.loads(ok(http.get("/schemas/ids/1001"))["schema"]) == json.loads(broken)

    path = f"/subjects/{subject}/versions"
    error(send(http, "POST", path, {"schema": v1, "id": 1002}), 422, 42207)
    error(send(http, "POST", path, {"schema": v2, "id": 1000, "version": 7}), 422, 42207)
    error(send(http, "POST", path, {"schema": v2, "id": 1002, "version": 5}), 422, 42205)

    assert ok(http.delete("/mode")) == {"mode": "IMPORT"}
    error(send(http, "POST", path, {"schema": v2, "id": 1002}), 422, 42205)
    # Setting IMPORT on a subject that holds versions needs force, too.
    error(send(http, "PUT", f"/mode/{subject}", {"mode": "IMPORT"}), 422, 42205)
    ok(send(http, "PUT", f"/mode/{subject}", {"mode": "IMPORT"}, force="true"))
    ok(http.delete(f"/mode/{subject}"))

    # Ids allocated afterwards never collide with imported ones.
    assert register(http, unique_subject(), record_schema("After", ("a", "string"))) > 1001
    assert register(http, subject, record_schema("Order", ("id", "int"), ("x", "int", 0))) > 1001
    assert ok(http.get(f"/subjects/{subject}/versions")) == [5, 6, 7]


def test_explicit_ids_stay_in_range_and_never_exhaust_the_automatic_ids(
    own_http: httpx.Client,
) -> None:
    http = own_http
    v1, _v2, _broken = order_schemas()
    subject = unique_subject()
    path = f"/subjects/{subject}/versions"
    assert ok(send(http, "PUT", "/mode", {"mode": "IMPORT"})) == {"mode": "IMPORT"}
    # Outside 1..2^30-1: refused with a code and a message naming the range.
    for bad in (0, -5, 2**30, 2**31 - 1, 2**31, 2**63):
        message = error(send(http, "POST", path, {"schema": v1, "id": bad}), 422, 42228)
        assert "1073741823" in message
    error(send(http, "POST", path, {"schema": v1, "version": 2**31}), 422, 42202)
    assert ok(http.get("/subjects")) == []
    # -1 means "no id", as Confluent's clients send it.
    assert register(http, subject, v1, body={"id": 2**30 - 1, "version": -1}) == 2**30 - 1
    assert ok(http.delete("/mode")) == {"mode": "IMPORT"}
    # Automatic ids go on after the largest imported one, still within an int32.
    after = register(http, unique_subject(), record_schema("After", ("a", "string")))
    assert after == 2**30
    assert ok(http.get(f"/schemas/ids/{after}"))


# --- compatibility checks -----------------------------------------------------------------


def test_compatibility_checks_list_their_reasons_when_verbose(http: httpx.Client) -> None:
    v1, v2, broken = order_schemas()
    subject = unique_subject()
    register(http, subject, v1)

    for path in (
        f"/compatibility/subjects/{subject}/versions/latest",
        f"/compatibility/subjects/{subject}/versions/1",
        f"/compatibility/subjects/{subject}/versions",
    ):
        assert ok(send(http, "POST", path, {"schema": v2})) == {"is_compatible": True}
        assert ok(send(http, "POST", path, {"schema": broken})) == {"is_compatible": False}
        verbose = ok(send(http, "POST", path, {"schema": broken}, verbose="true"))
        assert verbose["is_compatible"] is False
        assert verbose["messages"]
        assert any("'id'" in message for message in verbose["messages"]), verbose
    assert ok(http.get(f"/subjects/{subject}/versions")) == [1]


# Three versions where each step is compatible and the first and last are not.
_TRANSITIVE_CASES = {
    "BACKWARD_TRANSITIVE": (
        record_schema("T", ("a", "string")),
        record_schema("T"),
        record_schema("T", ("a", "int", 0)),
    ),
    "FORWARD_TRANSITIVE": (
        record_schema("T", ("a", "string")),
        record_schema("T", ("a", "string", "")),
        record_schema("T"),
    ),
    "FULL_TRANSITIVE": (
        record_schema("T", ("a", "string", "")),
        record_schema("T"),
        record_schema("T", ("a", "int", 0)),
    ),
}


@pytest.mark.parametrize("level", list(_TRANSITIVE_CASES))
def test_transitive_levels_check_every_version(http: httpx.Client, level: str) -> None:
    space = f"rules.x{uuid.uuid4().hex[:10]}"
    v1, v2, v3 = (
        json.dumps({**json.loads(text), "namespace": space}) for text in _TRANSITIVE_CASES[level]
    )
    transitive, single = unique_subject(), unique_subject()
    ok(send(http, "PUT", f"/config/{transitive}", {"compatibility": level}))
    ok(send(http, "PUT", f"/config/{single}", {"compatibility": level.removesuffix("_TRANSITIVE")}))
    for subject in (transitive, single):
        register(http, subject, v1)
        register(http, subject, v2)

    # Against the latest alone v3 is fine, so the plain level takes it.
    register(http, single, v3)
    check = f"/compatibility/subjects/{transitive}/versions"
    assert ok(send(http, "POST", f"{check}/latest", {"schema": v3})) == {"is_compatible": True}
    verdict = ok(send(http, "POST", check, {"schema": v3}, verbose="true"))
    assert verdict["is_compatible"] is False
    assert any("'a'" in m and "version 1" in m for m in verdict["messages"]), verdict
    message = error(
        send(http, "POST", f"/subjects/{transitive}/versions", {"schema": v3}), 409, 40901
    )
    assert level in message
    assert ok(http.get(f"/subjects/{transitive}/versions")) == [1, 2]
