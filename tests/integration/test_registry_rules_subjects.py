"""The registry's subjects over raw HTTP: deletion, re-registration, listings and references,
as Confluent's registry answers them.

The tests share the session's API server and keep to subjects of their own.
"""

import json
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.support.hub_client import bearer
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


# --- deletion -----------------------------------------------------------------------------


def test_soft_then_permanent_deletion(http: httpx.Client) -> None:
    v1, v2, _ = order_schemas()
    subject = unique_subject()
    first = register(http, subject, v1)
    second = register(http, subject, v2)

    error(http.delete(f"/subjects/{subject}/versions/2", params={"permanent": "true"}), 404, 40407)
    assert ok(http.delete(f"/subjects/{subject}/versions/2")) == 2
    error(http.delete(f"/subjects/{subject}/versions/2"), 404, 40406)
    assert ok(http.get(f"/subjects/{subject}/versions")) == [1]
    assert ok(http.get(f"/subjects/{subject}/versions", params={"deleted": "true"})) == [1, 2]
    assert ok(http.get(f"/subjects/{subject}/versions/latest"))["version"] == 1
    error(http.get(f"/subjects/{subject}/versions/2"), 404, 40402)
    assert (
        ok(http.get(f"/subjects/{subject}/versions/2", params={"deleted": "true"}))["id"] == second
    )
    # Records written with a soft-deleted schema still decode: the id still resolves.
    assert json.loads(ok(http.get(f"/schemas/ids/{second}"))["schema"]) == json.loads(v2)

    error(http.delete(f"/subjects/{subject}", params={"permanent": "true"}), 404, 40405)
    assert ok(http.delete(f"/subjects/{subject}")) == [1]
    error(http.delete(f"/subjects/{subject}"), 404, 40404)
    assert subject not in ok(http.get("/subjects"))
    assert subject in ok(http.get("/subjects", params={"deleted": "true"}))
    error(http.get(f"/subjects/{subject}/versions"), 404, 40401)
    error(http.get(f"/subjects/{subject}/versions/latest"), 404, 40401)
    assert json.loads(ok(http.get(f"/schemas/ids/{first}"))["schema"]) == json.loads(v1)

    assert ok(http.delete(f"/subjects/{subject}", params={"permanent": "true"})) == [1, 2]
    assert subject not in ok(http.get("/subjects", params={"deleted": "true"}))
    error(http.get(f"/subjects/{subject}/versions", params={"deleted": "true"}), 404, 40401)
    error(http.get(f"/schemas/ids/{first}"), 404, 40403)
    error(http.get(f"/schemas/ids/{second}"), 404, 40403)
    error(http.get(f"/schemas/ids/{second}/schema"), 404, 40403)

    # Ids are never handed out again: a new schema gets a larger one.
    newcomer = register(http, unique_subject(), record_schema("Newcomer", ("a", "string")))
    assert newcomer > max(first, second)


def test_registering_again_returns_the_existing_id_without_a_new_version(
    http: httpx.Client,
) -> None:
    v1, v2, _ = order_schemas()
    subject = unique_subject()
    first = register(http, subject, v1)
    assert register(http, subject, v1) == first
    assert register(http, subject, json.dumps(json.loads(v1), indent=4)) == first
    second = register(http, subject, v2)
    assert register(http, subject, v1) == first
    assert ok(http.get(f"/subjects/{subject}/versions")) == [1, 2]
    assert ok(http.get(f"/subjects/{subject}/versions/latest"))["id"] == second

    # Once its version is soft-deleted, the same schema comes back as a new version, same id.
    ok(http.delete(f"/subjects/{subject}/versions/1"))
    assert register(http, subject, v1) == first
    assert ok(http.get(f"/subjects/{subject}/versions")) == [2, 3]
    assert ok(http.get(f"/subjects/{subject}/versions/3"))["id"] == first


def test_one_schema_under_two_subjects_has_one_id(http: httpx.Client) -> None:
    v1, _, _ = order_schemas()
    keys, values = unique_subject("key"), unique_subject()
    schema_id = register(http, keys, v1)
    assert register(http, values, v1) == schema_id
    assert ok(http.get(f"/schemas/ids/{schema_id}/subjects")) == sorted([keys, values])
    assert sorted(
        (item["subject"], item["version"])
        for item in ok(http.get(f"/schemas/ids/{schema_id}/versions"))
    ) == sorted([(keys, 1), (values, 1)])

    ok(http.delete(f"/subjects/{keys}"))
    assert ok(http.get(f"/schemas/ids/{schema_id}/subjects")) == [values]
    assert ok(http.get(f"/schemas/ids/{schema_id}/subjects", params={"deleted": "true"})) == sorted(
        [keys, values]
    )
    assert ok(http.get(f"/schemas/ids/{schema_id}/versions")) == [{"subject": values, "version": 1}]
    assert len(ok(http.get(f"/schemas/ids/{schema_id}/versions", params={"deleted": "true"}))) == 2


def test_concurrent_registrations_of_the_same_schemas_make_one_version_each(
    api_url: str, admin_key: str
) -> None:
    """Producers starting together all auto-register the same schemas at once."""
    subject = unique_subject()
    space = f"rules.c{uuid.uuid4().hex[:10]}"
    schemas = [record_schema(f"C{n}", ("a", "string"), namespace=space) for n in range(6)]
    with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=60) as http:
        ok(send(http, "PUT", f"/config/{subject}", {"compatibility": "NONE"}))
    start = threading.Barrier(8)

    def producer(_: int) -> list[tuple[str, int, str]]:
        with httpx.Client(base_url=api_url, headers=bearer(admin_key), timeout=60) as http:
            start.wait()
            answers = [
                send(http, "POST", f"/subjects/{subject}/versions", {"schema": schema})
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
        versions = ok(http.get(f"/subjects/{subject}/versions"))
        held = [ok(http.get(f"/subjects/{subject}/versions/{v}"))["id"] for v in versions]
    assert versions == list(range(1, len(schemas) + 1))
    assert sorted(held) == sorted(next(iter(found)) for found in ids.values())


# --- listings -----------------------------------------------------------------------------


def test_subject_prefix_filters_subjects_and_schemas_literally(http: httpx.Client) -> None:
    base = f"rules.p{uuid.uuid4().hex[:10]}"
    # `_` is a LIKE wildcard; the prefix must match it literally.
    one, two, lookalike = f"{base}_one-value", f"{base}_two-value", f"{base}Xone-value"
    for subject in (one, two, lookalike):
        register(
            http, subject, record_schema("P", ("a", "string"), namespace=base.replace(".", "_"))
        )

    assert ok(http.get("/subjects", params={"subjectPrefix": f"{base}_"})) == [one, two]
    assert ok(http.get("/subjects", params={"subjectPrefix": base})) == sorted(
        [one, two, lookalike]
    )
    listed = ok(http.get("/schemas", params={"subjectPrefix": f"{base}_"}))
    assert [item["subject"] for item in listed] == [one, two]
    assert ok(http.get("/subjects", params={"subjectPrefix": f"{base}-none"})) == []


def test_schemas_listing_with_latest_only_offset_and_limit(http: httpx.Client) -> None:
    base = f"rules.l{uuid.uuid4().hex[:10]}"
    a, b = f"{base}.a-value", f"{base}.b-value"
    v1, v2, _ = order_schemas()
    ids = {(a, 1): register(http, a, v1), (a, 2): register(http, a, v2)}
    ids[(b, 1)] = register(http, b, record_schema("B", ("x", "string"), namespace=base))

    def listed(**params: Any) -> list[tuple[str, int, int]]:
        items = ok(http.get("/schemas", params={"subjectPrefix": base, **params}))
        assert all(json.loads(item["schema"]) for item in items)
        return [(item["subject"], item["version"], item["id"]) for item in items]

    everything = [(a, 1, ids[(a, 1)]), (a, 2, ids[(a, 2)]), (b, 1, ids[(b, 1)])]
    assert listed() == everything
    assert listed(latestOnly="true") == [everything[1], everything[2]]
    assert listed(offset=1, limit=1) == [everything[1]]
    assert listed(limit=2) == everything[:2]
    assert listed(offset=2) == everything[2:]
    assert listed(offset=5) == []

    ok(http.delete(f"/subjects/{a}/versions/2"))
    assert listed(latestOnly="true") == [everything[0], everything[2]]
    assert listed(deleted="true") == everything


def test_schema_text_endpoints_answer_the_schema_alone(http: httpx.Client) -> None:
    v1, v2, _ = order_schemas()
    subject = unique_subject()
    first = register(http, subject, v1)
    register(http, subject, v2)
    assert ok(http.get(f"/schemas/ids/{first}/schema")) == json.loads(v1)
    assert ok(http.get(f"/subjects/{subject}/versions/1/schema")) == json.loads(v1)
    assert ok(http.get(f"/subjects/{subject}/versions/latest/schema")) == json.loads(v2)
    error(http.get(f"/subjects/{subject}/versions/3/schema"), 404, 40402)


def test_schema_types_are_avro_only(http: httpx.Client) -> None:
    assert ok(http.get("/schemas/types")) == ["AVRO"]


# --- references ---------------------------------------------------------------------------


def test_references_are_kept_listed_and_protect_what_they_name(http: httpx.Client) -> None:
    space = f"rules.r{uuid.uuid4().hex[:8]}"
    address = record_schema("Address", ("street", "string"), namespace=space)
    person = record_schema(
        "Person", ("name", "string"), ("home", f"{space}.Address"), namespace=space
    )
    address_subject, person_subject = unique_subject("address"), unique_subject()
    register(http, address_subject, address)
    reference = {"name": f"{space}.Address", "subject": address_subject, "version": 1}
    person_id = register(http, person_subject, person, body={"references": [reference]})

    assert ok(http.get(f"/schemas/ids/{person_id}"))["references"] == [reference]
    assert ok(http.get(f"/subjects/{person_subject}/versions/1"))["references"] == [reference]
    assert "references" not in ok(http.get(f"/subjects/{address_subject}/versions/1"))
    assert ok(http.get(f"/subjects/{address_subject}/versions/1/referencedby")) == [person_id]
    assert ok(http.get(f"/subjects/{address_subject}/versions/latest/referencedby")) == [person_id]

    error(http.delete(f"/subjects/{address_subject}/versions/1"), 422, 42206)
    error(http.delete(f"/subjects/{address_subject}"), 422, 42206)
    # A reference to a version that does not exist makes the schema invalid.
    dangling = {**reference, "version": 9}
    message = error(
        send(
            http,
            "POST",
            f"/subjects/{unique_subject()}/versions",
            {"schema": person, "references": [dangling]},
        ),
        422,
        42201,
    )
    assert address_subject in message

    ok(http.delete(f"/subjects/{person_subject}"))
    assert ok(http.get(f"/subjects/{address_subject}/versions/1/referencedby")) == []
    assert ok(http.delete(f"/subjects/{address_subject}")) == [1]
    # Both soft-deleted: the person schema still resolves, with the type it references.
    assert ok(http.get(f"/schemas/ids/{person_id}"))["references"] == [reference]
