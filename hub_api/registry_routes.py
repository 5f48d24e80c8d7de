"""The Confluent Schema Registry REST API (Avro): subjects, versions and schemas."""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

from hub_api.auth import SubjectWriter, require_admin, require_reader
from hub_api.deps import Registry
from hub_api.errors import REGISTRY_MEDIA_TYPE, RegistryJSONResponse
from hub_api.limits import CheckedBodyRoute
from hub_api.registry_models import (
    SchemaCreate,
    SchemaIdPublic,
    SchemaPublic,
    SubjectVersionPublic,
    SubjectVersionRef,
    references_of,
)
from registry.errors import InvalidSchema
from registry.service import MAX_SUBJECT_LENGTH, parse_subject, parse_version
from registry.types import (
    RegisteredSchema,
    SchemaId,
    SchemaType,
    StoredSchema,
    Subject,
    Version,
)


async def valid_subject_names(request: Request) -> None:
    """42208 for a subject in the path or a `subjectPrefix` that no store can hold, before any
    route looks it up (see `registry.service.parse_subject`)."""
    subject = request.path_params.get("subject")
    if subject is not None:
        parse_subject(subject)
    prefix = request.query_params.get("subjectPrefix")
    if prefix:
        parse_subject(prefix, what="Subject prefix")


router = APIRouter(
    route_class=CheckedBodyRoute,
    tags=["registry"],
    default_response_class=RegistryJSONResponse,
    dependencies=[Depends(require_reader), Depends(valid_subject_names)],
)

SchemaBody = Annotated[SchemaCreate, Body(media_type=REGISTRY_MEDIA_TYPE)]
Deleted = Annotated[bool, Query(description="Include soft-deleted items.")]
Permanent = Annotated[bool, Query(description="Delete for good (after a soft delete).")]
Normalize = Annotated[bool, Query(description="Compare and store schemas in normal form.")]
SubjectPrefix = Annotated[
    str,
    Query(
        alias="subjectPrefix",
        description=f"Only these subjects (at most {MAX_SUBJECT_LENGTH} characters).",
    ),
]


def _avro_only(body: SchemaCreate) -> None:
    if body.schema_type.upper() != SchemaType.AVRO:
        raise InvalidSchema(
            f"Schema type '{body.schema_type}' is not supported; supported types: AVRO."
        )


def _answer(model: BaseModel) -> RegistryJSONResponse:
    """The model as the answer, serialized once: the two hottest routes skip FastAPI's second
    validation of their return value (their `response_model` still documents them)."""
    return RegistryJSONResponse(model.model_dump(by_alias=True, exclude_none=True))


def schema_answer(stored: StoredSchema) -> RegistryJSONResponse:
    """The answer to `GET /schemas/ids/{id}`."""
    return _answer(SchemaPublic(schema_=stored.schema, references=references_of(stored.references)))


def lookup_answer(found: RegisteredSchema) -> RegistryJSONResponse:
    """The answer to a lookup, `POST /subjects/{subject}`."""
    return _answer(SubjectVersionPublic.of(found))


def _raw(text: str) -> Response:
    return Response(content=text, media_type=REGISTRY_MEDIA_TYPE)


@router.get("/subjects", response_model=list[str])
def list_subjects(
    registry: Registry, deleted: Deleted = False, prefix: SubjectPrefix = ""
) -> list[str]:
    """Every subject with a live version (or any, with `deleted=true`)."""
    return list(registry.subjects(prefix=prefix, include_deleted=deleted))


@router.post(
    "/subjects/{subject}", response_model=SubjectVersionPublic, response_model_exclude_none=True
)
def lookup_schema(
    subject: str,
    body: SchemaBody,
    registry: Registry,
    normalize: Normalize = False,
    deleted: Deleted = False,
) -> RegistryJSONResponse:
    """Which version of the subject holds this schema (40401 no subject, 40403 not under it)."""
    _avro_only(body)
    found = registry.lookup(
        subject=Subject(subject),
        schema_text=body.schema_,
        references=body.domain_references(),
        normalize=normalize,
        include_deleted=deleted,
    )
    return lookup_answer(found)


@router.delete("/subjects/{subject}", response_model=list[int])
def delete_subject(
    subject: str, registry: Registry, _writer: SubjectWriter, permanent: Permanent = False
) -> list[int]:
    """Soft-delete every version; with `permanent=true`, purge a soft-deleted subject."""
    return list(registry.delete_subject(subject=Subject(subject), permanent=permanent))


@router.get("/subjects/{subject}/versions", response_model=list[int])
def list_versions(subject: str, registry: Registry, deleted: Deleted = False) -> list[int]:
    """The subject's version numbers."""
    return list(registry.versions(subject=Subject(subject), include_deleted=deleted))


@router.post("/subjects/{subject}/versions", response_model=SchemaIdPublic)
def register_schema(
    subject: str,
    body: SchemaBody,
    registry: Registry,
    writer: SubjectWriter,
    normalize: Normalize = False,
) -> SchemaIdPublic:
    """Register a schema; an identical live schema returns its id, an incompatible one is 409.

    An explicit `id` or `version` (an import) needs an admin key; -1 (and a version of 0)
    mean "none", as in Confluent's clients."""
    _avro_only(body)
    schema_id = None if body.id is None or body.id == -1 else body.id
    version = None if body.version is None or body.version in (0, -1) else body.version
    if schema_id is not None or version is not None:
        require_admin(writer, action="register a schema with an explicit id or version")
    registered = registry.register(
        subject=Subject(subject),
        schema_text=body.schema_,
        references=body.domain_references(),
        normalize=normalize,
        schema_id=SchemaId(schema_id) if schema_id is not None else None,
        version=Version(version) if version is not None else None,
    )
    return SchemaIdPublic(id=registered.schema_id)


@router.get(
    "/subjects/{subject}/versions/{version}",
    response_model=SubjectVersionPublic,
    response_model_by_alias=True,
    response_model_exclude_none=True,
)
def get_version(
    subject: str, version: str, registry: Registry, deleted: Deleted = False
) -> SubjectVersionPublic:
    """A version of the subject: a number, or `latest`."""
    found = registry.version(
        subject=Subject(subject), version=parse_version(version), include_deleted=deleted
    )
    return SubjectVersionPublic.of(found)


@router.get("/subjects/{subject}/versions/{version}/schema", response_class=Response)
def get_version_schema(
    subject: str, version: str, registry: Registry, deleted: Deleted = False
) -> Response:
    """Only the schema text of a version."""
    found = registry.version(
        subject=Subject(subject), version=parse_version(version), include_deleted=deleted
    )
    return _raw(found.schema)


@router.delete("/subjects/{subject}/versions/{version}", response_model=int)
def delete_version(
    subject: str,
    version: str,
    registry: Registry,
    _writer: SubjectWriter,
    permanent: Permanent = False,
) -> int:
    """Soft-delete a version; with `permanent=true`, purge a soft-deleted one."""
    return registry.delete_version(
        subject=Subject(subject), version=parse_version(version), permanent=permanent
    )


@router.get("/subjects/{subject}/versions/{version}/referencedby", response_model=list[int])
def referenced_by(subject: str, version: str, registry: Registry) -> list[int]:
    """Ids of the schemas that reference this version."""
    return list(registry.referenced_by(subject=Subject(subject), version=parse_version(version)))


@router.get("/schemas", response_model=list[SubjectVersionPublic], response_model_exclude_none=True)
def list_schemas(
    registry: Registry,
    prefix: SubjectPrefix = "",
    deleted: Deleted = False,
    latest_only: Annotated[bool, Query(alias="latestOnly")] = False,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query()] = -1,
) -> list[SubjectVersionPublic]:
    """Every subject version, by subject then version."""
    found = registry.schemas(
        prefix=prefix, include_deleted=deleted, latest_only=latest_only, offset=offset, limit=limit
    )
    return [SubjectVersionPublic.of(item) for item in found]


@router.get("/schemas/types", response_model=list[str])
def schema_types() -> list[str]:
    """The schema languages this registry accepts."""
    return [t.value for t in SchemaType]


@router.get(
    "/schemas/ids/{schema_id}",
    response_model=SchemaPublic,
    response_model_by_alias=True,
    response_model_exclude_none=True,
)
def get_schema(schema_id: int, registry: Registry) -> RegistryJSONResponse:
    """The schema with this id (soft-deleted schemas still resolve)."""
    return schema_answer(registry.stored_schema(schema_id=SchemaId(schema_id)))


@router.get("/schemas/ids/{schema_id}/schema", response_class=Response)
def get_schema_text(schema_id: int, registry: Registry) -> Response:
    """Only the schema text."""
    return _raw(registry.stored_schema(schema_id=SchemaId(schema_id)).schema)


@router.get("/schemas/ids/{schema_id}/subjects", response_model=list[str])
def schema_subjects(schema_id: int, registry: Registry, deleted: Deleted = False) -> list[str]:
    """Subjects that use this schema."""
    usages = registry.usages(schema_id=SchemaId(schema_id), include_deleted=deleted)
    return sorted({u.subject for u in usages})


@router.get("/schemas/ids/{schema_id}/versions", response_model=list[SubjectVersionRef])
def schema_versions(
    schema_id: int, registry: Registry, deleted: Deleted = False
) -> list[SubjectVersionRef]:
    """Subject versions that use this schema."""
    usages = registry.usages(schema_id=SchemaId(schema_id), include_deleted=deleted)
    return [SubjectVersionRef(subject=u.subject, version=u.version) for u in usages]
