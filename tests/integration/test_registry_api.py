"""The registry's REST API in the Confluent shape, over HTTP."""

import json
import uuid
from collections.abc import Callable

import httpx
import pytest

from tests.support.hub_client import bearer, create_feed, unique_topic

pytestmark = pytest.mark.integration

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA = json.dumps(
    {"type": "record", "name": "Click", "fields": [{"name": "url", "type": "string"}]}
)


def _subject() -> str:
    return f"api.t{uuid.uuid4().hex[:8]}-value"


def test_register_then_read_back_by_id_and_by_latest_version(api_url: str, admin_key: str) -> None:
    subject = _subject()
    with httpx.Client(base_url=api_url, headers=bearer(admin_key)) as http:
        created = http.post(
            f"/subjects/{subject}/versions",
            content=json.dumps({"schema": SCHEMA}),
            headers={"Content-Type": CONTENT_TYPE},
        )
        assert created.status_code == 200
        assert created.headers["content-type"].startswith(CONTENT_TYPE)
        schema_id = created.json()["id"]

        by_id = http.get(f"/schemas/ids/{schema_id}").json()
        assert json.loads(by_id["schema"]) == json.loads(SCHEMA)

        latest = http.get(f"/subjects/{subject}/versions/latest").json()
        assert latest == {
            "subject": subject,
            "id": schema_id,
            "version": 1,
            "schema": by_id["schema"],
        }
        assert http.get(f"/subjects/{subject}/versions/1").json() == latest
        assert subject in http.get("/subjects").json()


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/subjects/none.such-value/versions/latest", None, 404, 40401),
        ("GET", "/schemas/ids/987654", None, 404, 40403),
        ("GET", "/subjects/{subject}/versions/7", None, 404, 40402),
        ("GET", "/subjects/{subject}/versions/zero", None, 422, 42202),
        ("POST", "/subjects/{subject}/versions", {"schema": "{not json"}, 422, 42201),
        ("POST", "/subjects/{subject}/versions", {"schema": '{"type": "wat"}'}, 422, 42201),
        (
            "POST",
            "/subjects/{subject}/versions",
            {"schema": SCHEMA, "schemaType": "PROTOBUF"},
            422,
            42201,
        ),
        ("POST", "/subjects/{subject}/versions", {"nothing": 1}, 400, 40001),
    ],
)
def test_errors_have_confluent_codes_and_statuses(
    api_url: str, admin_key: str, method: str, path: str, body: dict | None, status: int, code: int
) -> None:
    subject = _subject()
    with httpx.Client(base_url=api_url, headers=bearer(admin_key)) as http:
        http.post(f"/subjects/{subject}/versions", json={"schema": SCHEMA}).raise_for_status()
        response = http.request(method, path.format(subject=subject), json=body)
    assert response.status_code == status
    answer = response.json()
    assert answer["error_code"] == code
    assert answer["message"]


def test_registry_writes_need_a_key_and_the_subjects_owner(
    api_url: str, admin_key: str, team_key: Callable[[str], str]
) -> None:
    owner, other = team_key("registry_owner"), team_key("registry_other")
    topic = unique_topic("registry_owner")
    create_feed(api_url, owner, topic=topic, schema=json.loads(SCHEMA), owner="registry_owner")
    v2 = json.dumps({**json.loads(SCHEMA), "fields": [*json.loads(SCHEMA)["fields"],
                     {"name": "ref", "type": "string", "default": ""}]})  # fmt: skip
    feed_subject = f"/subjects/{topic}-value/versions"

    anonymous = httpx.post(api_url + feed_subject, json={"schema": v2})
    assert (anonymous.status_code, anonymous.json()["error_code"]) == (401, 40101)
    foreign = httpx.post(api_url + feed_subject, json={"schema": v2}, headers=bearer(other))
    assert (foreign.status_code, foreign.json()["error_code"]) == (403, 40301)
    assert (
        httpx.post(api_url + feed_subject, json={"schema": v2}, headers=bearer(owner)).status_code
        == 200
    )

    # A subject of no feed belongs to the team named by its domain (`<team>.<name>`);
    # registry-wide settings only an admin key.
    foreign_domain = httpx.post(f"{api_url}/subjects/{_subject()}/versions",
                                json={"schema": SCHEMA}, headers=bearer(other))  # fmt: skip
    assert (foreign_domain.status_code, foreign_domain.json()["error_code"]) == (403, 40301)
    own_domain = httpx.post(f"{api_url}/subjects/registry_other.{_subject()}/versions",
                            json={"schema": SCHEMA}, headers=bearer(other))  # fmt: skip
    assert own_domain.status_code == 200, own_domain.text
    assert (
        httpx.put(f"{api_url}/mode", json={"mode": "READWRITE"}, headers=bearer(other)).status_code
        == 403
    )
    assert (
        httpx.put(
            f"{api_url}/mode", json={"mode": "READWRITE"}, headers=bearer(admin_key)
        ).status_code
        == 200
    )
    # Reads stay public.
    assert httpx.get(f"{api_url}/subjects/{topic}-value/versions").json() == [1, 2]


def test_put_config_takes_compatibility_level_as_newer_clients_send_it(
    api_url: str, admin_key: str
) -> None:
    subject = _subject()
    answer = httpx.put(f"{api_url}/config/{subject}", json={"compatibilityLevel": "full"},
                       headers=bearer(admin_key))  # fmt: skip
    assert answer.json() == {"compatibility": "FULL"}
    assert httpx.get(f"{api_url}/config/{subject}").json() == {"compatibilityLevel": "FULL"}
