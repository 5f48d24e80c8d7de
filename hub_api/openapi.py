"""The OpenAPI document: request bodies that routes read themselves, documented as components.

The publish routes read their body raw (to fingerprint it for idempotency, bound its size and
depth, and parse it once), so FastAPI does not see a body model to document. They name it with
`raw_body` instead, and `install_openapi` puts the model, and every model it uses, into
`components/schemas`, where the document's `$ref`s point.
"""

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

_REF_TEMPLATE = "#/components/schemas/{model}"


def raw_body(model: type[BaseModel], media_type: str) -> dict[str, Any]:
    """`openapi_extra` for a route reading its body itself: the body is `model` in `media_type`.

    List `model` in `install_openapi(..., raw_bodies=...)` too, or the `$ref` does not resolve.
    """
    schema = {"$ref": _REF_TEMPLATE.format(model=model.__name__)}
    return {"requestBody": {"content": {media_type: {"schema": schema}}, "required": True}}


def install_openapi(app: FastAPI, *, raw_bodies: Iterable[type[BaseModel]]) -> None:
    """Generate the app's document as FastAPI does, then add the raw bodies' schemas."""
    models = tuple(raw_bodies)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = generate()  # also caches it in app.openapi_schema
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                _add_schemas(schemas, model)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]


def _add_schemas(schemas: dict[str, Any], model: type[BaseModel]) -> None:
    schema = model.model_json_schema(ref_template=_REF_TEMPLATE)
    found = {**schema.pop("$defs", {}), model.__name__: schema}
    for name, definition in found.items():
        known = schemas.setdefault(name, definition)
        if known != definition:
            # Two different models under one name: one route's $ref would show the other's.
            raise ValueError(
                f"OpenAPI component '{name}' is defined twice, differently; rename one model."
            )
