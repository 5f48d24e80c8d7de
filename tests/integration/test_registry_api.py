"""The registry's REST API in the Confluent shape, over HTTP."""

import json
import uuid

import httpx
import pytest

pytestmark = pytest.mark.integration

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
SCHEMA = json.dumps(
    {"type": "record", "name": "Click", "fields": [{"name": "url", "type": "string"}]}
)


def _subject() -> str:
    return f"api.t{uuid.uuid4().hex[:8]}-value"


def test_register_then_read_back_by_id_and_by_latest_version(api_url: str) -> None:
    subject = _subject()
    with httpx.Client(base_url=api_url) as http:
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
    api_url: str, method: str, path: str, body: dict | None, status: int, code: int
) -> None:
    subject = _subject()
    with httpx.Client(base_url=api_url) as http:
        http.post(f"/subjects/{subject}/versions", json={"schema": SCHEMA}).raise_for_status()
        response = http.request(method, path.format(subject=subject), json=body)
    assert response.status_code == status
    answer = response.json()
    assert answer["error_code"] == code
    assert answer["message"]
