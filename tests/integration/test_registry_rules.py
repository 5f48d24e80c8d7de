"""The registry's rules as clients rely on them, over raw HTTP: Confluent's paths, codes and shapes.

Most tests share the session's API server and keep to subjects of their own. Registry-wide
settings (global compatibility and mode, IMPORT with explicit ids) go to a server of the test's
own, so they cannot leak into other tests. The rules that depend on the database (ids, purges,
settings rows) also run against the service on SQLite and PostgreSQL alike.
"""

import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event

from hub_core.database import create_database_engine
from migrations import migrate
from registry.errors import (
    CompatibilityNotConfigured,
    ModeNotConfigured,
    SchemaNotFound,
)
from registry.service import RegistryService
from registry.store import SchemaStore
from registry.types import RegisteredSchema, SchemaId, SchemaReference, Subject, Version
from tests.support.api_server import serve_api
from tests.support.hub_client import bearer, create_key

pytestmark = pytest.mark.integration

REGISTRY_TYPE = "application/vnd.schemaregistry.v1+json"


def _subject(kind: str = "value") -> str:
    return f"rules.t{uuid.uuid4().hex[:10]}-{kind}"


def _record(name: str, *fields: tuple[Any, ...], namespace: str | None = None) -> str:
    """A record schema as text; each field is (name, type) or (name, type, default)."""
    document: dict[str, Any] = {"type": "record", "name": name, "fields": []}
    if namespace:
        document["namespace"] = namespace
    for spec in fields:
        field: dict[str, Any] = {"name": spec[0], "type": spec[1]}
        if len(spec) > 2:
            field["default"] = spec[2]
        document["fields"].append(field)
    return json.dumps(document)


def _orders() -> tuple[str, str, str]:
    """v1, a compatible v2 (adds a field with a default), and a v1 with a field's type changed,
    in a namespace of their own so that no other test registers the same schemas."""
    space = f"rules.n{uuid.uuid4().hex[:10]}"
    return (
        _record("Order", ("id", "string"), namespace=space),
        _record("Order", ("id", "string"), ("note", "string", ""), namespace=space),
        _record("Order", ("id", "int"), namespace=space),
    )


def _send(
    http: httpx.Client, method: str, path: str, body: Any = None, **params: Any
) -> httpx.Response:
    """A request as Confluent's clients send it: the registry's media type on any body."""
    headers = {"Content-Type": REGISTRY_TYPE} if body is not None else {}
    content = json.dumps(body) if body is not None else None
    return http.request(method, path, content=content, headers=headers, params=params)


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(REGISTRY_TYPE)
    return response.json()


def _error(response: httpx.Response, status: int, code: int) -> str:
    """Check an error answer's status and Confluent error code; return its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == code, body
    assert body["message"]
    message: str = body["message"]
    return message


def _register(
    http: httpx.Client,
    subject: str,
    schema: str,
    *,
    body: dict[str, Any] | None = None,
    **params: Any,
) -> int:
    """Register `schema` (with more `body` fields, if any) and return its id."""
    request = {"schema": schema, **(body or {})}
    answer = _ok(_send(http, "POST", f"/subjects/{subject}/versions", request, **params))
    schema_id: int = answer["id"]
    return schema_id


@pytest.fixture
def http(api_url: str, admin_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=30) as client:
        yield client


@pytest.fixture
def own_http(kafka_bootstrap: str, tmp_path: Path) -> Iterator[httpx.Client]:
    """A client of an API server of the test's own, on a fresh SQLite file."""
    database = f"sqlite:///{tmp_path / 'hub.db'}"
    with serve_api(database_url=database, bootstrap_servers=kafka_bootstrap) as url:
        key = create_key(database, team=None)
        with httpx.Client(base_url=url, headers=bearer(key), timeout=30) as client:
            yield client


# --- error codes --------------------------------------------------------------------------


def test_missing_things_answer_404_with_their_own_codes(http: httpx.Client) -> None:
    v1, v2, _ = _orders()
    subject, missing = _subject(), _subject()
    _register(http, subject, v1)

    _error(http.get(f"/subjects/{missing}/versions"), 404, 40401)
    _error(http.get(f"/subjects/{missing}/versions/latest"), 404, 40401)
    _error(_send(http, "POST", f"/subjects/{missing}", {"schema": v1}), 404, 40401)
    _error(
        _send(http, "POST", f"/compatibility/subjects/{missing}/versions/latest", {"schema": v1}),
        404,
        40401,
    )
    _error(http.get(f"/subjects/{subject}/versions/5"), 404, 40402)
    _error(http.delete(f"/subjects/{subject}/versions/5"), 404, 40402)
    _error(
        _send(http, "POST", f"/compatibility/subjects/{subject}/versions/5", {"schema": v2}),
        404,
        40402,
    )
    _error(http.get("/schemas/ids/2000000000"), 404, 40403)
    _error(http.get("/schemas/ids/2000000000/subjects"), 404, 40403)
    _error(_send(http, "POST", f"/subjects/{subject}", {"schema": v2}), 404, 40403)
    _error(http.get(f"/config/{subject}"), 404, 40408)
    _error(http.get(f"/mode/{subject}"), 404, 40409)


@pytest.mark.parametrize("version", ["zero", "0", "-2", "2147483648", "1.5"])
def test_versions_that_are_not_numbers_or_latest_are_42202(
    http: httpx.Client, version: str
) -> None:
    v1, _, _ = _orders()
    subject = _subject()
    _register(http, subject, v1)
    message = _error(http.get(f"/subjects/{subject}/versions/{version}"), 422, 42202)
    assert version in message
    _error(http.delete(f"/subjects/{subject}/versions/{version}"), 422, 42202)


def test_invalid_schemas_and_settings_are_422_and_malformed_requests_400(
    http: httpx.Client,
) -> None:
    subject = _subject()
    path = f"/subjects/{subject}/versions"
    _error(_send(http, "POST", path, {"schema": "{not json"}), 422, 42201)
    message = _error(
        _send(http, "POST", path, {"schema": _record("R", ("a", "Nowhere"))}), 422, 42201
    )
    assert "Nowhere" in message
    _error(
        _send(http, "POST", path, {"schema": _record("R", ("a", "int")), "schemaType": "PROTOBUF"}),
        422,
        42201,
    )
    message = _error(
        _send(http, "PUT", f"/config/{subject}", {"compatibility": "SIDEWAYS"}), 422, 42203
    )
    assert "FULL_TRANSITIVE" in message  # names the valid choices
    message = _error(_send(http, "PUT", f"/mode/{subject}", {"mode": "SOMETIMES"}), 422, 42204)
    assert "READONLY" in message

    _error(http.post(path, content=b"{bad", headers={"Content-Type": REGISTRY_TYPE}), 400, 40001)
    _error(_send(http, "POST", path, {"schemaType": "AVRO"}), 400, 40001)
    _error(_send(http, "POST", path, {"schema": 5}), 400, 40001)
    # Nothing was registered by any of these.
    _error(http.get(f"/subjects/{subject}/versions"), 404, 40401)


def test_an_incompatible_schema_is_409_naming_the_field(http: httpx.Client) -> None:
    v1, _, broken = _orders()
    subject = _subject()
    _register(http, subject, v1)
    message = _error(
        _send(http, "POST", f"/subjects/{subject}/versions", {"schema": broken}), 409, 40901
    )
    assert "'id'" in message
    assert "BACKWARD" in message
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [1]


# --- deletion -----------------------------------------------------------------------------


def test_soft_then_permanent_deletion(http: httpx.Client) -> None:
    v1, v2, _ = _orders()
    subject = _subject()
    first = _register(http, subject, v1)
    second = _register(http, subject, v2)

    _error(http.delete(f"/subjects/{subject}/versions/2", params={"permanent": "true"}), 404, 40407)
    assert _ok(http.delete(f"/subjects/{subject}/versions/2")) == 2
    _error(http.delete(f"/subjects/{subject}/versions/2"), 404, 40406)
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [1]
    assert _ok(http.get(f"/subjects/{subject}/versions", params={"deleted": "true"})) == [1, 2]
    assert _ok(http.get(f"/subjects/{subject}/versions/latest"))["version"] == 1
    _error(http.get(f"/subjects/{subject}/versions/2"), 404, 40402)
    assert (
        _ok(http.get(f"/subjects/{subject}/versions/2", params={"deleted": "true"}))["id"] == second
    )
    # Records written with a soft-deleted schema still decode: the id still resolves.
    assert json.loads(_ok(http.get(f"/schemas/ids/{second}"))["schema"]) == json.loads(v2)

    _error(http.delete(f"/subjects/{subject}", params={"permanent": "true"}), 404, 40405)
    assert _ok(http.delete(f"/subjects/{subject}")) == [1]
    _error(http.delete(f"/subjects/{subject}"), 404, 40404)
    assert subject not in _ok(http.get("/subjects"))
    assert subject in _ok(http.get("/subjects", params={"deleted": "true"}))
    _error(http.get(f"/subjects/{subject}/versions"), 404, 40401)
    _error(http.get(f"/subjects/{subject}/versions/latest"), 404, 40401)
    assert json.loads(_ok(http.get(f"/schemas/ids/{first}"))["schema"]) == json.loads(v1)

    assert _ok(http.delete(f"/subjects/{subject}", params={"permanent": "true"})) == [1, 2]
    assert subject not in _ok(http.get("/subjects", params={"deleted": "true"}))
    _error(http.get(f"/subjects/{subject}/versions", params={"deleted": "true"}), 404, 40401)
    _error(http.get(f"/schemas/ids/{first}"), 404, 40403)
    _error(http.get(f"/schemas/ids/{second}"), 404, 40403)
    _error(http.get(f"/schemas/ids/{second}/schema"), 404, 40403)

    # Ids are never handed out again: a new schema gets a larger one.
    newcomer = _register(http, _subject(), _record("Newcomer", ("a", "string")))
    assert newcomer > max(first, second)


def test_registering_again_returns_the_existing_id_without_a_new_version(
    http: httpx.Client,
) -> None:
    v1, v2, _ = _orders()
    subject = _subject()
    first = _register(http, subject, v1)
    assert _register(http, subject, v1) == first
    assert _register(http, subject, json.dumps(json.loads(v1), indent=4)) == first
    second = _register(http, subject, v2)
    assert _register(http, subject, v1) == first
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [1, 2]
    assert _ok(http.get(f"/subjects/{subject}/versions/latest"))["id"] == second

    # Once its version is soft-deleted, the same schema comes back as a new version, same id.
    _ok(http.delete(f"/subjects/{subject}/versions/1"))
    assert _register(http, subject, v1) == first
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [2, 3]
    assert _ok(http.get(f"/subjects/{subject}/versions/3"))["id"] == first


def test_one_schema_under_two_subjects_has_one_id(http: httpx.Client) -> None:
    v1, _, _ = _orders()
    keys, values = _subject("key"), _subject()
    schema_id = _register(http, keys, v1)
    assert _register(http, values, v1) == schema_id
    assert _ok(http.get(f"/schemas/ids/{schema_id}/subjects")) == sorted([keys, values])
    assert sorted(
        (item["subject"], item["version"])
        for item in _ok(http.get(f"/schemas/ids/{schema_id}/versions"))
    ) == sorted([(keys, 1), (values, 1)])

    _ok(http.delete(f"/subjects/{keys}"))
    assert _ok(http.get(f"/schemas/ids/{schema_id}/subjects")) == [values]
    assert _ok(
        http.get(f"/schemas/ids/{schema_id}/subjects", params={"deleted": "true"})
    ) == sorted([keys, values])
    assert _ok(http.get(f"/schemas/ids/{schema_id}/versions")) == [
        {"subject": values, "version": 1}
    ]
    assert len(_ok(http.get(f"/schemas/ids/{schema_id}/versions", params={"deleted": "true"}))) == 2


def test_concurrent_registrations_of_the_same_schemas_make_one_version_each(
    api_url: str, admin_key: str
) -> None:
    """Producers starting together all auto-register the same schemas at once."""
    subject = _subject()
    space = f"rules.c{uuid.uuid4().hex[:10]}"
    schemas = [_record(f"C{n}", ("a", "string"), namespace=space) for n in range(6)]
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=60) as http:
        _ok(_send(http, "PUT", f"/config/{subject}", {"compatibility": "NONE"}))
    start = threading.Barrier(8)

    def producer(_: int) -> list[tuple[str, int, str]]:
        with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=60) as http:
            start.wait()
            answers = [
                _send(http, "POST", f"/subjects/{subject}/versions", {"schema": schema})
                for schema in schemas
            ]
        return [(schema, a.status_code, a.text) for schema, a in zip(schemas, answers, strict=True)]

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = [a for batch in pool.map(producer, range(8)) for a in batch]

    assert [a for a in answers if a[1] != 200] == []
    ids = {
        schema: {json.loads(text)["id"] for s, _, text in answers if s == schema}
        for schema in schemas
    }
    assert all(len(found) == 1 for found in ids.values()), ids
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=30) as http:
        versions = _ok(http.get(f"/subjects/{subject}/versions"))
        held = [_ok(http.get(f"/subjects/{subject}/versions/{v}"))["id"] for v in versions]
    assert versions == list(range(1, len(schemas) + 1))
    assert sorted(held) == sorted(next(iter(found)) for found in ids.values())


# --- listings -----------------------------------------------------------------------------


def test_subject_prefix_filters_subjects_and_schemas_literally(http: httpx.Client) -> None:
    base = f"rules.p{uuid.uuid4().hex[:10]}"
    # `_` is a LIKE wildcard; the prefix must match it literally.
    one, two, lookalike = f"{base}_one-value", f"{base}_two-value", f"{base}Xone-value"
    for subject in (one, two, lookalike):
        _register(http, subject, _record("P", ("a", "string"), namespace=base.replace(".", "_")))

    assert _ok(http.get("/subjects", params={"subjectPrefix": f"{base}_"})) == [one, two]
    assert _ok(http.get("/subjects", params={"subjectPrefix": base})) == sorted(
        [one, two, lookalike]
    )
    listed = _ok(http.get("/schemas", params={"subjectPrefix": f"{base}_"}))
    assert [item["subject"] for item in listed] == [one, two]
    assert _ok(http.get("/subjects", params={"subjectPrefix": f"{base}-none"})) == []


def test_schemas_listing_with_latest_only_offset_and_limit(http: httpx.Client) -> None:
    base = f"rules.l{uuid.uuid4().hex[:10]}"
    a, b = f"{base}.a-value", f"{base}.b-value"
    v1, v2, _ = _orders()
    ids = {(a, 1): _register(http, a, v1), (a, 2): _register(http, a, v2)}
    ids[(b, 1)] = _register(http, b, _record("B", ("x", "string"), namespace=base))

    def listed(**params: Any) -> list[tuple[str, int, int]]:
        items = _ok(http.get("/schemas", params={"subjectPrefix": base, **params}))
        assert all(json.loads(item["schema"]) for item in items)
        return [(item["subject"], item["version"], item["id"]) for item in items]

    everything = [(a, 1, ids[(a, 1)]), (a, 2, ids[(a, 2)]), (b, 1, ids[(b, 1)])]
    assert listed() == everything
    assert listed(latestOnly="true") == [everything[1], everything[2]]
    assert listed(offset=1, limit=1) == [everything[1]]
    assert listed(limit=2) == everything[:2]
    assert listed(offset=2) == everything[2:]
    assert listed(offset=5) == []

    _ok(http.delete(f"/subjects/{a}/versions/2"))
    assert listed(latestOnly="true") == [everything[0], everything[2]]
    assert listed(deleted="true") == everything


def test_schema_text_endpoints_answer_the_schema_alone(http: httpx.Client) -> None:
    v1, v2, _ = _orders()
    subject = _subject()
    first = _register(http, subject, v1)
    _register(http, subject, v2)
    assert _ok(http.get(f"/schemas/ids/{first}/schema")) == json.loads(v1)
    assert _ok(http.get(f"/subjects/{subject}/versions/1/schema")) == json.loads(v1)
    assert _ok(http.get(f"/subjects/{subject}/versions/latest/schema")) == json.loads(v2)
    _error(http.get(f"/subjects/{subject}/versions/3/schema"), 404, 40402)


def test_schema_types_are_avro_only(http: httpx.Client) -> None:
    assert _ok(http.get("/schemas/types")) == ["AVRO"]


# --- references ---------------------------------------------------------------------------


def test_references_are_kept_listed_and_protect_what_they_name(http: httpx.Client) -> None:
    space = f"rules.r{uuid.uuid4().hex[:8]}"
    address = _record("Address", ("street", "string"), namespace=space)
    person = _record("Person", ("name", "string"), ("home", f"{space}.Address"), namespace=space)
    address_subject, person_subject = _subject("address"), _subject()
    _register(http, address_subject, address)
    reference = {"name": f"{space}.Address", "subject": address_subject, "version": 1}
    person_id = _register(http, person_subject, person, body={"references": [reference]})

    assert _ok(http.get(f"/schemas/ids/{person_id}"))["references"] == [reference]
    assert _ok(http.get(f"/subjects/{person_subject}/versions/1"))["references"] == [reference]
    assert "references" not in _ok(http.get(f"/subjects/{address_subject}/versions/1"))
    assert _ok(http.get(f"/subjects/{address_subject}/versions/1/referencedby")) == [person_id]
    assert _ok(http.get(f"/subjects/{address_subject}/versions/latest/referencedby")) == [person_id]

    _error(http.delete(f"/subjects/{address_subject}/versions/1"), 422, 42206)
    _error(http.delete(f"/subjects/{address_subject}"), 422, 42206)
    # A reference to a version that does not exist makes the schema invalid.
    dangling = {**reference, "version": 9}
    message = _error(
        _send(
            http,
            "POST",
            f"/subjects/{_subject()}/versions",
            {"schema": person, "references": [dangling]},
        ),
        422,
        42201,
    )
    assert address_subject in message

    _ok(http.delete(f"/subjects/{person_subject}"))
    assert _ok(http.get(f"/subjects/{address_subject}/versions/1/referencedby")) == []
    assert _ok(http.delete(f"/subjects/{address_subject}")) == [1]
    # Both soft-deleted: the person schema still resolves, with the type it references.
    assert _ok(http.get(f"/schemas/ids/{person_id}"))["references"] == [reference]


# --- configuration and modes --------------------------------------------------------------


def test_subject_compatibility_configuration(http: httpx.Client) -> None:
    v1, v2, broken = _orders()
    subject = _subject()
    _register(http, subject, v1)
    registry_wide = _ok(http.get("/config"))["compatibilityLevel"]

    _error(http.get(f"/config/{subject}"), 404, 40408)
    _error(http.delete(f"/config/{subject}"), 404, 40408)
    assert _ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "true"})) == {
        "compatibilityLevel": registry_wide
    }
    assert _ok(_send(http, "PUT", f"/config/{subject}", {"compatibility": "NONE"})) == {
        "compatibility": "NONE"
    }
    assert _ok(http.get(f"/config/{subject}")) == {"compatibilityLevel": "NONE"}
    assert _ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "true"})) == {
        "compatibilityLevel": "NONE"
    }
    _register(http, subject, broken)

    _ok(_send(http, "PUT", f"/config/{subject}", {"compatibility": "FORWARD"}))
    assert _ok(http.delete(f"/config/{subject}")) == {"compatibilityLevel": "FORWARD"}
    _error(http.get(f"/config/{subject}"), 404, 40408)
    # Back under the registry-wide BACKWARD: v2 cannot read the latest (broken) version.
    _error(_send(http, "POST", f"/subjects/{subject}/versions", {"schema": v2}), 409, 40901)


def test_a_read_only_subject_refuses_writes_but_serves_reads(http: httpx.Client) -> None:
    v1, v2, _ = _orders()
    subject, neighbour = _subject(), _subject()
    _register(http, subject, v1)
    assert _ok(_send(http, "PUT", f"/mode/{subject}", {"mode": "READONLY"})) == {"mode": "READONLY"}
    assert _ok(http.get(f"/mode/{subject}")) == {"mode": "READONLY"}

    _error(_send(http, "POST", f"/subjects/{subject}/versions", {"schema": v2}), 422, 42205)
    _error(http.delete(f"/subjects/{subject}/versions/1"), 422, 42205)
    _error(http.delete(f"/subjects/{subject}"), 422, 42205)
    assert _ok(http.get(f"/subjects/{subject}/versions/latest"))["version"] == 1
    assert _ok(_send(http, "POST", f"/subjects/{subject}", {"schema": v1}))["version"] == 1
    _register(http, neighbour, v2)

    assert _ok(http.delete(f"/mode/{subject}")) == {"mode": "READONLY"}
    _error(http.get(f"/mode/{subject}"), 404, 40409)
    _error(http.delete(f"/mode/{subject}"), 404, 40409)
    assert _ok(http.get(f"/mode/{subject}", params={"defaultToGlobal": "true"})) == {
        "mode": "READWRITE"
    }
    _register(http, subject, v2)
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [1, 2]


def test_registry_wide_compatibility_and_mode(own_http: httpx.Client) -> None:
    http = own_http
    v1, v2, broken = _orders()
    subject, newcomer = _subject(), _subject()
    _register(http, subject, v1)
    assert _ok(http.get("/config")) == {"compatibilityLevel": "BACKWARD"}
    assert _ok(http.get("/mode")) == {"mode": "READWRITE"}

    assert _ok(_send(http, "PUT", "/config", {"compatibility": "NONE"})) == {
        "compatibility": "NONE"
    }
    assert _ok(http.get("/config")) == {"compatibilityLevel": "NONE"}
    assert _ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "true"})) == {
        "compatibilityLevel": "NONE"
    }
    _register(http, subject, broken)
    assert _ok(http.delete("/config")) == {"compatibilityLevel": "NONE"}
    assert _ok(http.get("/config")) == {"compatibilityLevel": "BACKWARD"}
    _error(_send(http, "PUT", "/config", {"compatibility": "SIDEWAYS"}), 422, 42203)
    _error(_send(http, "POST", f"/subjects/{subject}/versions", {"schema": v2}), 409, 40901)

    assert _ok(_send(http, "PUT", "/mode", {"mode": "READONLY"})) == {"mode": "READONLY"}
    _error(_send(http, "POST", f"/subjects/{newcomer}/versions", {"schema": v1}), 422, 42205)
    _error(http.delete(f"/subjects/{subject}"), 422, 42205)
    # A subject's own mode overrides the registry-wide one.
    _ok(_send(http, "PUT", f"/mode/{subject}", {"mode": "READWRITE"}))
    assert _ok(http.delete(f"/subjects/{subject}/versions/2")) == 2
    _error(_send(http, "PUT", "/mode", {"mode": "SOMETIMES"}), 422, 42204)

    # IMPORT on a registry that holds schemas needs force.
    _error(_send(http, "PUT", "/mode", {"mode": "IMPORT"}), 422, 42205)
    assert _ok(_send(http, "PUT", "/mode", {"mode": "IMPORT"}, force="true")) == {"mode": "IMPORT"}
    assert _ok(http.delete("/mode")) == {"mode": "IMPORT"}
    assert _ok(http.get("/mode")) == {"mode": "READWRITE"}
    _register(http, newcomer, v1)


def test_import_mode_keeps_the_given_ids_and_versions(own_http: httpx.Client) -> None:
    http = own_http
    v1, v2, broken = _orders()
    subject = _subject()
    # An empty registry switches to IMPORT without force.
    assert _ok(_send(http, "PUT", "/mode", {"mode": "IMPORT"})) == {"mode": "IMPORT"}
    assert _register(http, subject, v1, body={"id": 1000, "version": 5}) == 1000
    # IMPORT checks no compatibility: the broken schema goes in as imported.
    assert _register(http, subject, broken, body={"id": 1001, "version": 6}) == 1001
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [5, 6]
    assert _ok(http.get(f"/subjects/{subject}/versions/5"))["id"] == 1000
    assert json.loads(_ok(http.get("/schemas/ids/1001"))["schema"]) == json.loads(broken)

    path = f"/subjects/{subject}/versions"
    _error(_send(http, "POST", path, {"schema": v1, "id": 1002}), 422, 42207)
    _error(_send(http, "POST", path, {"schema": v2, "id": 1000, "version": 7}), 422, 42207)
    _error(_send(http, "POST", path, {"schema": v2, "id": 1002, "version": 5}), 422, 42205)

    assert _ok(http.delete("/mode")) == {"mode": "IMPORT"}
    _error(_send(http, "POST", path, {"schema": v2, "id": 1002}), 422, 42205)
    # Setting IMPORT on a subject that holds versions needs force, too.
    _error(_send(http, "PUT", f"/mode/{subject}", {"mode": "IMPORT"}), 422, 42205)
    _ok(_send(http, "PUT", f"/mode/{subject}", {"mode": "IMPORT"}, force="true"))
    _ok(http.delete(f"/mode/{subject}"))

    # Ids allocated afterwards never collide with imported ones.
    assert _register(http, _subject(), _record("After", ("a", "string"))) > 1001
    assert _register(http, subject, _record("Order", ("id", "int"), ("x", "int", 0))) > 1001
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [5, 6, 7]


# --- compatibility checks -----------------------------------------------------------------


def test_compatibility_checks_list_their_reasons_when_verbose(http: httpx.Client) -> None:
    v1, v2, broken = _orders()
    subject = _subject()
    _register(http, subject, v1)

    for path in (
        f"/compatibility/subjects/{subject}/versions/latest",
        f"/compatibility/subjects/{subject}/versions/1",
        f"/compatibility/subjects/{subject}/versions",
    ):
        assert _ok(_send(http, "POST", path, {"schema": v2})) == {"is_compatible": True}
        assert _ok(_send(http, "POST", path, {"schema": broken})) == {"is_compatible": False}
        verbose = _ok(_send(http, "POST", path, {"schema": broken}, verbose="true"))
        assert verbose["is_compatible"] is False
        assert verbose["messages"]
        assert any("'id'" in message for message in verbose["messages"]), verbose
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [1]


# Three versions where each step is compatible and the first and last are not.
_TRANSITIVE_CASES = {
    "BACKWARD_TRANSITIVE": (
        _record("T", ("a", "string")),
        _record("T"),
        _record("T", ("a", "int", 0)),
    ),
    "FORWARD_TRANSITIVE": (
        _record("T", ("a", "string")),
        _record("T", ("a", "string", "")),
        _record("T"),
    ),
    "FULL_TRANSITIVE": (
        _record("T", ("a", "string", "")),
        _record("T"),
        _record("T", ("a", "int", 0)),
    ),
}


@pytest.mark.parametrize("level", list(_TRANSITIVE_CASES))
def test_transitive_levels_check_every_version(http: httpx.Client, level: str) -> None:
    space = f"rules.x{uuid.uuid4().hex[:10]}"
    v1, v2, v3 = (
        json.dumps({**json.loads(text), "namespace": space}) for text in _TRANSITIVE_CASES[level]
    )
    transitive, single = _subject(), _subject()
    _ok(_send(http, "PUT", f"/config/{transitive}", {"compatibility": level}))
    _ok(
        _send(
            http, "PUT", f"/config/{single}", {"compatibility": level.removesuffix("_TRANSITIVE")}
        )
    )
    for subject in (transitive, single):
        _register(http, subject, v1)
        _register(http, subject, v2)

    # Against the latest alone v3 is fine, so the plain level takes it.
    _register(http, single, v3)
    check = f"/compatibility/subjects/{transitive}/versions"
    assert _ok(_send(http, "POST", f"{check}/latest", {"schema": v3})) == {"is_compatible": True}
    verdict = _ok(_send(http, "POST", check, {"schema": v3}, verbose="true"))
    assert verdict["is_compatible"] is False
    assert any("'a'" in m and "version 1" in m for m in verdict["messages"]), verdict
    message = _error(
        _send(http, "POST", f"/subjects/{transitive}/versions", {"schema": v3}), 409, 40901
    )
    assert level in message
    assert _ok(http.get(f"/subjects/{transitive}/versions")) == [1, 2]


# --- how requests may be written ----------------------------------------------------------


def test_python_style_booleans_and_unknown_parameters_are_accepted(http: httpx.Client) -> None:
    v1, _, broken = _orders()
    subject = _subject()
    _register(http, subject, v1, normalize="False", client_hint="x")
    assert _ok(http.get("/subjects", params={"deleted": "False", "offset": 0, "limit": -1}))
    assert _ok(http.get(f"/config/{subject}", params={"defaultToGlobal": "True"}))
    verdict = _ok(
        _send(
            http,
            "POST",
            f"/compatibility/subjects/{subject}/versions/latest",
            {"schema": broken},
            verbose="True",
            normalize="False",
        )
    )
    assert verdict["messages"]

    _ok(http.delete(f"/subjects/{subject}", params={"permanent": "False", "trace": "1"}))
    assert subject not in _ok(http.get("/subjects", params={"deleted": "False"}))
    assert subject in _ok(
        http.get("/subjects", params={"deleted": "True", "deleted_only": "False"})
    )
    assert _ok(http.get(f"/subjects/{subject}/versions", params={"deleted": "True"})) == [1]
    found = _ok(_send(http, "POST", f"/subjects/{subject}", {"schema": v1}, deleted="True"))
    assert found["version"] == 1
    assert _ok(http.delete(f"/subjects/{subject}", params={"permanent": "True"})) == [1]
    assert subject not in _ok(http.get("/subjects", params={"deleted": "True"}))
    _error(http.get("/subjects", params={"deleted": "perhaps"}), 400, 40001)


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
    subject = _subject()
    schema_id = _register(http, subject, separate)

    # Normalized, the other spelling is the same schema: same id, same version.
    found = _ok(
        _send(http, "POST", f"/subjects/{subject}", {"schema": full_name}, normalize="true")
    )
    assert (found["id"], found["version"]) == (schema_id, 1)
    assert _register(http, subject, full_name, normalize="true") == schema_id
    assert _ok(http.get(f"/subjects/{subject}/versions")) == [1]


@pytest.mark.parametrize(
    "content_type",
    [REGISTRY_TYPE, "application/vnd.schemaregistry+json", "application/json"],
)
def test_every_registry_content_type_is_accepted(http: httpx.Client, content_type: str) -> None:
    v1, v2, _ = _orders()
    subject = _subject()
    headers = {"Content-Type": content_type, "Accept": content_type}

    def send(method: str, path: str, body: dict[str, Any]) -> Any:
        return _ok(http.request(method, path, content=json.dumps(body), headers=headers))

    schema_id = send("POST", f"/subjects/{subject}/versions", {"schema": v1})["id"]
    assert send("POST", f"/subjects/{subject}", {"schema": v1})["id"] == schema_id
    assert send("POST", f"/compatibility/subjects/{subject}/versions/latest", {"schema": v2}) == {
        "is_compatible": True
    }
    assert send("PUT", f"/config/{subject}", {"compatibility": "FULL"}) == {"compatibility": "FULL"}
    assert send("PUT", f"/mode/{subject}", {"mode": "READWRITE"}) == {"mode": "READWRITE"}
    assert _ok(http.get(f"/subjects/{subject}/versions", headers={"Accept": content_type})) == [1]


def test_error_answers_carry_the_registry_media_type(http: httpx.Client) -> None:
    response = http.get(f"/subjects/{_subject()}/versions")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith(REGISTRY_TYPE)


# --- the same rules on SQLite and PostgreSQL ----------------------------------------------


@pytest.fixture
def registry(database_url: str) -> Iterator[RegistryService]:
    migrate.upgrade(database_url)
    engine = create_database_engine(database_url)
    yield RegistryService(SchemaStore(engine))
    engine.dispose()


def test_store_purged_schemas_stop_resolving_and_ids_move_on(registry: RegistryService) -> None:
    subject = Subject("purge.me-value")
    v1, v2, _ = _orders()
    first = registry.register(subject=subject, schema_text=v1).schema_id
    second = registry.register(subject=subject, schema_text=v2).schema_id
    registry.delete_subject(subject=subject)
    # Soft-deleted schemas resolve (and are now in the parse cache).
    assert registry.schema(schema_id=first).json == json.loads(v1)
    assert registry.schema(schema_id=second).json == json.loads(v2)

    assert registry.delete_subject(subject=subject, permanent=True) == [1, 2]
    for gone in (first, second):
        with pytest.raises(SchemaNotFound):
            registry.schema(schema_id=gone)
    newcomer = registry.register(
        subject=Subject("after-value"), schema_text=_record("N", ("a", "int"))
    )
    assert newcomer.schema_id > max(first, second)


@pytest.mark.parametrize("settings", ["none", "compatibility", "mode", "both"])
def test_store_permanent_delete_removes_the_subject_settings(
    registry: RegistryService, settings: str
) -> None:
    subject = Subject("settings.purge-value")
    v1, _, _ = _orders()
    registry.register(subject=subject, schema_text=v1)
    if settings in ("compatibility", "both"):
        registry.set_compatibility(subject=subject, level="FULL")
    if settings in ("mode", "both"):
        registry.set_mode(subject=subject, mode="READWRITE")
    registry.delete_subject(subject=subject)
    assert registry.delete_subject(subject=subject, permanent=True) == [1]
    with pytest.raises(CompatibilityNotConfigured):
        registry.compatibility(subject=subject, default_to_global=False)
    with pytest.raises(ModeNotConfigured):
        registry.mode(subject=subject, default_to_global=False)
    # The subject starts over.
    assert registry.register(subject=subject, schema_text=v1).version == 1


def test_store_ids_allocated_after_an_import_stay_above_it(registry: RegistryService) -> None:
    subject = Subject("imported-value")
    registry.set_mode(subject=subject, mode="IMPORT")
    imported = registry.register(
        subject=subject,
        schema_text=_record("Imp", ("a", "string")),
        schema_id=SchemaId(5000),
        version=Version(12),
    )
    assert (imported.schema_id, imported.version) == (5000, 12)
    registry.delete_mode(subject=subject)
    later = [
        registry.register(
            subject=Subject(f"later{n}-value"), schema_text=_record(f"L{n}", ("a", "int"))
        )
        for n in range(3)
    ]
    assert [r.schema_id > 5000 for r in later] == [True, True, True]
    assert len({r.schema_id for r in later}) == 3
    assert (
        registry.register(subject=subject, schema_text=_record("Imp", ("a", "string"))).version
        == 12
    )


def test_store_soft_deleted_references_still_resolve(
    database_url: str, registry: RegistryService
) -> None:
    address = _record("Address", ("street", "string"), namespace="refs")
    person = _record("Person", ("home", "refs.Address"), namespace="refs")
    registry.register(subject=Subject("refs.address"), schema_text=address)
    reference = SchemaReference(
        name="refs.Address", subject=Subject("refs.address"), version=Version(1)
    )
    person_id = registry.register(
        subject=Subject("refs.person-value"), schema_text=person, references=[reference]
    ).schema_id
    registry.delete_subject(subject=Subject("refs.person-value"))
    registry.delete_subject(subject=Subject("refs.address"))

    # A fresh service (another process) has nothing cached.
    engine = create_database_engine(database_url)
    try:
        fresh = RegistryService(SchemaStore(engine))
        resolved = fresh.schema(schema_id=person_id)
    finally:
        engine.dispose()
    assert resolved.references == (reference,)
    assert resolved.json == json.loads(person)


def test_store_a_registration_racing_the_same_one_adds_no_second_version(
    database_url: str,
) -> None:
    migrate.upgrade(database_url)
    # Two engines stand in for two API processes on one database.
    engines = [create_database_engine(database_url) for _ in range(2)]
    first, second = (RegistryService(SchemaStore(engine)) for engine in engines)
    subject = Subject("raced-value")
    schema = _record("Raced", ("a", "string"))
    # The schema row exists already, so its unique fingerprint cannot serialize the two.
    first.register(subject=Subject("elsewhere-value"), schema_text=schema)
    raced: list[RegisteredSchema] = []

    def meanwhile(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        # Once `first` has looked for a live version and is about to number a new one, the
        # other process registers the same schema under the same subject.
        if "max(" in statement.lower() and not raced:
            raced.append(second.register(subject=subject, schema_text=schema))

    event.listen(engines[0], "before_cursor_execute", meanwhile)
    try:
        mine = first.register(subject=subject, schema_text=schema)
        versions = first.versions(subject=subject)
    finally:
        event.remove(engines[0], "before_cursor_execute", meanwhile)
        for engine in engines:
            engine.dispose()
    assert raced, "the interleaving never happened: registration no longer numbers versions"
    assert mine == raced[0]
    assert versions == [1]
