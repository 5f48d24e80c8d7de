"""The Confluent Schema Registry REST API (Avro): subjects, versions and schemas."""

from json.encoder import encode_basestring
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi.responses import Response

from hub_api.auth import SubjectWriter, require_admin, require_reader
from hub_api.deps import Registry
from hub_api.errors import REGISTRY_MEDIA_TYPE, RegistryJSONResponse
from hub_api.limits import CheckedBodyRoute
from hub_api.registry.models import (
    SchemaCreate,
    SchemaIdPublic,
    SchemaPublic,
    SubjectVersionPublic,
    SubjectVersionRef,
)
from registry.errors import InvalidSchema
from registry.limits import MAX_SUBJECT_LENGTH, parse_subject, parse_version
from registry.types import (
    RegisteredSchema,
    SchemaId,
    SchemaReference,
    SchemaType,
    StoredSchema,
    Subject,
    Version,
)


async def valid_subject_names(request: Request) -> None:
    """42208 for a subject in the path or a `subjectPrefix` that no store can hold, before any
    route looks it up (see `registry.limits.parse_subject`)."""
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


# The two hottest answers are written directly rather than through their models and
# `JSONResponse` (6.4 -> 2.2 us for a 1.4 KB schema): serializers ask them for every schema they
# meet. The bytes are those `JSONResponse` renders from the models (compact, UTF-8, the models'
# field order, None left out); tests/unit/hub_api/test_registry_bodies.py holds them equal. The
# routes' `response_model` still documents them.
def schema_body(stored: StoredSchema) -> bytes:
    """The body of `GET /schemas/ids/{id}`: `SchemaPublic`, as its JSON response renders it."""
    return b'{"schema":%s%s}' % (_json_text(stored.schema), _references_json(stored.references))


def lookup_body(found: RegisteredSchema) -> bytes:
    """The body of a lookup, `POST /subjects/{subject}`: `SubjectVersionPublic`, rendered."""
    return b'{"subject":%s,"id":%d,"version":%d,"schema":%s%s}' % (
        _json_text(found.subject),
        found.schema_id,
        found.version,
        _json_text(found.schema),
        _references_json(found.references),
    )


def _json_text(text: str) -> bytes:
    return encode_basestring(text).encode()


def _references_json(references: tuple[SchemaReference, ...]) -> bytes:
    if not references:
        return b""
    items = b",".join(
        b'{"name":%s,"subject":%s,"version":%d}'
        % (_json_text(r.name), _json_text(r.subject), r.version)
        for r in references
    )
    return b',"references":[%s]' % items


def schema_answer(stored: StoredSchema) -> Response:
    """The answer to `GET /schemas/ids/{id}`."""
    return Response(content=schema_body(stored), media_type=REGISTRY_MEDIA_TYPE)


def lookup_answer(found: RegisteredSchema) -> Response:
    """The answer to a lookup, `POST /subjects/{subject}`."""
    return Response(content=lookup_body(found), media_type=REGISTRY_MEDIA_TYPE)


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
) -> Response:
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
def get_schema(schema_id: int, registry: Registry) -> Response:
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
