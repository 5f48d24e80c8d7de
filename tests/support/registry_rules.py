"""Helpers of the registry rules tests (tests/integration/test_registry_rules_*.py): requests
written as Confluent's clients write them, and checks of the answers."""

import json
import uuid
from typing import Any

import httpx

REGISTRY_TYPE = "application/vnd.schemaregistry.v1+json"


def unique_subject(kind: str = "value") -> str:
    return f"rules.t{uuid.uuid4().hex[:10]}-{kind}"


def record_schema(name: str, *fields: tuple[Any, ...], namespace: str | None = None) -> str:
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


def order_schemas() -> tuple[str, str, str]:
    """v1, a compatible v2 (adds a field with a default), and a v1 with a field's type changed,
    in a namespace of their own so that no other test registers the same schemas."""
    space = f"rules.n{uuid.uuid4().hex[:10]}"
    return (
        record_schema("Order", ("id", "string"), namespace=space),
        record_schema("Order", ("id", "string"), ("note", "string", ""), namespace=space),
        record_schema("Order", ("id", "int"), namespace=space),
    )


def send(
    http: httpx.Client, method: str, path: str, body: Any = None, **params: Any
) -> httpx.Response:
    """A request as Confluent's clients send it: the registry's media type on any body."""
    headers = {"Content-Type": REGISTRY_TYPE} if body is not None else {}
    content = json.dumps(body) if body is not None else None
    return http.request(method, path, content=content, headers=headers, params=params)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(REGISTRY_TYPE)
    return response.json()


def error(response: httpx.Response, status: int, code: int) -> str:
    """Check an error answer's status and Confluent error code; return its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == code, body
    assert body["message"]
    message: str = body["message"]
    return message


def register(
    http: httpx.Client,
    subject: str,
    schema: str,
    *,
    body: dict[str, Any] | None = None,
    **params: Any,
) -> int:
    """Register `schema` (with more `body` fields, if any) and return its id."""
    request = {"schema": schema, **(body or {})}
    answer = ok(send(http, "POST", f"/subjects/{subject}/versions", request, **params))
    schema_id: int = answer["id"]
    return schema_id
