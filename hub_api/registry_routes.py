"""The Confluent Schema Registry REST API (Avro), served at the API's base URL."""

from typing import Annotated

from fastapi import APIRouter, Body

from hub_api.deps import Registry
from hub_api.errors import REGISTRY_MEDIA_TYPE, RegistryJSONResponse
from hub_api.models import SchemaCreate, SchemaIdPublic, SchemaPublic, SubjectVersionPublic
from registry.errors import InvalidSchema
from registry.service import parse_version
from registry.types import SchemaId, SchemaType, Subject

router = APIRouter(tags=["registry"], default_response_class=RegistryJSONResponse)

_CONTENT_TYPES = [REGISTRY_MEDIA_TYPE, "application/vnd.schemaregistry+json", "application/json"]


@router.get("/subjects", response_model=list[str])
def list_subjects(registry: Registry) -> list[str]:
    """Every subject with at least one live version."""
    return list(registry.subjects())


@router.post(
    "/subjects/{subject}/versions",
    response_model=SchemaIdPublic,
    openapi_extra={"requestBody": {"content": {t: {} for t in _CONTENT_TYPES}}},
)
def register_schema(
    subject: str,
    registry: Registry,
    body: Annotated[SchemaCreate, Body(media_type=REGISTRY_MEDIA_TYPE)],
) -> SchemaIdPublic:
    """Register a schema under a subject; an identical schema returns its existing id."""
    if body.schema_type.upper() != SchemaType.AVRO:
        raise InvalidSchema(
            f"Schema type '{body.schema_type}' is not supported; supported types: AVRO."
        )
    registered = registry.register(subject=Subject(subject), schema_text=body.schema_)
    return SchemaIdPublic(id=registered.schema_id)


@router.get("/schemas/ids/{schema_id}", response_model=SchemaPublic, response_model_by_alias=True)
def get_schema_by_id(schema_id: int, registry: Registry) -> SchemaPublic:
    """The schema with this id."""
    return SchemaPublic(schema_=registry.schema(schema_id=SchemaId(schema_id)).canonical)


@router.get(
    "/subjects/{subject}/versions/{version}",
    response_model=SubjectVersionPublic,
    response_model_by_alias=True,
)
def get_subject_version(subject: str, version: str, registry: Registry) -> SubjectVersionPublic:
    """A version of a subject: an integer, or `latest`."""
    found = registry.version(subject=Subject(subject), version=parse_version(version))
    return SubjectVersionPublic(
        subject=found.subject, id=found.schema_id, version=found.version, schema_=found.schema
    )
