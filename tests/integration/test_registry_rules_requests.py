"""Registry requests as Confluent's clients write them, and how bad ones are answered: the
paths, error codes, parameters and media types clients rely on, over raw HTTP.

The tests share the session's API server and keep to subjects of their own
(fixtures and helpers: tests/integration/conftest.py, tests/support/registry_rules.py).
"""

import json
import uuid
from typing import Any

import httpx
import pytest

from tests.support.registry_rules import (
    REGISTRY_TYPE,
    error,
    ok,
    order_schemas,
    record_schema,
    register,
    send,
    unique_subject,
)

pytestmark = pytest.mark.integration


# --- error codes --------------------------------------------------------------------------


def test_missing_things_answer_404_with_their_own_codes(http: httpx.Client) -> None:
    v1, v2, _ = order_schemas()
    subject, missing = unique_subject(), unique_subject()
    register(http, subject, v1)

    error(http.get(f"/subjects/{missing}/versions"), 404, 40401)
    error(http.get(f"/subjects/{missing}/versions/latest"), 404, 40401)
    error(send(http, "POST", f"/subjects/{missing}", {"schema": v1}), 404, 40401)
    error(
        send(http, "POST", f"/compatibility/subjects/{missing}/versions/latest", {"schema": v1}),
        404,
        40401,
    )
    error(http.get(f"/subjects/{subject}/versions/5"), 404, 40402)
    error(http.delete(f"/subjects/{subject}/versions/5"), 404, 40402)
    error(
        send(http, "POST", f"/compatibility/subjects/{subject}/versions/5", {"schema": v2}),
        404,
        40402,
    )
    error(http.get("/schemas/ids/2000000000"), 404, 40403)
    error(http.get("/schemas/ids/2000000000/subjects"), 404, 40403)
    error(send(http, "POST", f"/subjects/{subject}", {"schema": v2}), 404, 40403)
    error(http.get(f"/config/{subject}"), 404, 40408)
    error(http.get(f"/mode/{subject}"), 404, 40409)


@pytest.mark.parametrize("version", ["zero", "0", "-2", "2147483648", "1.5"])
def test_versions_that_are_not_numbers_or_latest_are_42202(
    http: httpx.Client, version: str
) -> None:
    v1, _, _ = order_schemas()
    subject = unique_subject()
    register(http, subject, v1)
    message = error(http.get(f"/subjects/{subject}/versions/{version}"), 422, 42202)
    assert version in message
    error(http.delete(f"/subjects/{subject}/versions/{version}"), 422, 42202)


def test_invalid_schemas_and_settings_are_422_and_malformed_requests_400(
    http: httpx.Client,
) -> None:
    subject = unique_subject()
    path = f"/subjects/{subject}/versions"
    error(send(http, "POST", path, {"schema": "{not json"}), 422, 42201)
    message = error(
        send(http, "POST", path, {"schema": record_schema("R", ("a", "Nowhere"))}), 422, 42201
    )
    assert "Nowhere" in message
    error(
        send(
            http,
            "POST",
            path,
            {"schema": record_schema("R", ("a", "int")), "schemaType": "PROTOBUF"},
        ),
        422,
        42201,
    )
    message = error(
        send(http, "PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"}), 422, 42203
    )
    assert "FULL_TRANSITIVE" in message  # names the valid choices
    message = error(send(http, "PUT", f"/mode/{subject}", {"mode": "SOMETIMES"}), 422, 42204)
    assert "READONLY" in message

    error(http.post(path, content=b"{bad", headers={"Content-Type": REGISTRY_TYPE}), 400, 40001)
    error(send(http, "POST", path, {"schemaType": "AVRO"}), 400, 40001)
    error(send(http, "POST", path, {"schema": 5}), 400, 40001)
    # Nothing was registered by any of these.
    error(http.get(f"/subjects/{subject}/versions"), 404, 40401)


def test_an_incompatible_schema_is_409_naming_the_field(http: httpx.Client) -> None:
    v1, _, broken = order_schemas()
    subject = unique_subject()
    register(http, subject, v1)
    message = error(
        send(http, "POST", f"/subjects/{subject}/versions", {"schema": broken}), 409, 40901
    )
    assert "'id'" in message
    assert "BACKWARD" in message
    assert ok(http.get(f"/subjects/{subject}/versions")) == [1]


# --- how requests may be written ----------------------------------------------------------


def test_python_style_booleans_and_unknown_parameters_are_accepted(http: httpx.Client) -> None:
    v1, _, broken = order_schemas()
    subject = unique_subject()
    register(http, subject, v1, normalize="False", client_hint="x")
    assert ok(http.get("/subjects", params={"deleted": "False", "offset": 0, "limit": -1}))
    assert ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "True"}))
    verdict = ok(
        send(
            http,
            "POST",
            f"/compatibility/subjects/{subject}/versions/latest",
            {"schema": broken},
            verbose="True",
            normalize="False",
        )
    )
    assert verdict["messages"]

    ok(http.delete(f"/subjects/{subject}", params={"permanent": "False", "trace": "1"}))
    assert subject not in ok(http.get("/subjects", params={"deleted": "False"}))
    assert subject in ok(http.get("/subjects", params={"deleted": "True", "deleted_only": "False"}))
    assert ok(http.get(f"/subjects/{subject}/versions", params={"deleted": "True"})) == [1]
    found = ok(send(http, "POST", f"/subjects/{subject}", {"schema": v1}, deleted="True"))
    assert found["version"] == 1
    assert ok(http.delete(f"/subjects/{subject}", params={"permanent": "True"})) == [1]
    assert subject not in ok(http.get("/subjects", params={"deleted": "True"}))
    error(http.get("/subjects", params={"deleted": "perhaps"}), 400, 40001)


def test_normalize_matches_equivalent_spellings_of_a_schema(http: httpx.Client) -> None:
    space = f"rules.z{uuid.uuid4().hex[:10]}"
    separate = json.dumps(
        {
            "type": "record",
            "name": "Visit",
            "namespace": space,
            "fields": [{"name": "page", "type": "string"}],
        }
    )
    full_name = json.dumps(
        {"fields": [{"type": "string", "name": "page"}], "name": f"{space}.Visit", "type": "record"}
    )
    subject = unique_subject()
    schema_id = register(http, subject, separate)

    # Normalized, the other spelling is the same schema: same id, same version.
    found = ok(send(http, "POST", f"/subjects/{subject}", {"schema": full_name}, normalize="true"))
    assert (found["id"], found["version"]) == (schema_id, 1)
    assert register(http, subject, full_name, normalize="true") == schema_id
    assert ok(http.get(f"/subjects/{subject}/versions")) == [1]


@pytest.mark.parametrize(
    "content_type",
    [REGISTRY_TYPE, "application/vnd.schemaregistry+json", "application/json"],
)
def test_every_registry_content_type_is_accepted(http: httpx.Client, content_type: str) -> None:
    v1, v2, _ = order_schemas()
    subject = unique_subject()
    headers = {"Content-Type": content_type, "Accept": content_type}

    def send(method: str, path: str, body: dict[str, Any]) -> Any:
        return ok(http.request(method, path, content=json.dumps(body), headers=headers))

    schema_id = send("POST", f"/subjects/{subject}/versions", {"schema": v1})["id"]
    assert send("POST", f"/subjects/{subject}", {"schema": v1})["id"] == schema_id
    assert send("POST", f"/compatibility/subjects/{subject}/versions/latest", {"schema": v2}) == {
        "is_compatible": True
    }
    assert send("PUT", f"/config/{subject}", {"compatibility": "FULL"}) == {"compatibility": "FULL"}
    assert send("PUT", f"/mode/{subject}", {"mode": "READWRITE"}) == {"mode": "READWRITE"}
    assert ok(http.get(f"/subjects/{subject}/versions", headers={"Accept": content_type})) == [1]


def test_error_answers_carry_the_registry_media_type(http: httpx.Client) -> None:
    response = http.get(f"/subjects/{unique_subject()}/versions")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith(REGISTRY_TYPE)
