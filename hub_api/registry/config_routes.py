"""The Confluent Schema Registry REST API: compatibility levels, modes and checks."""

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Query

from hub_api.auth import Admin, SubjectWriter, require_admin, require_reader
from hub_api.deps import Registry
from hub_api.errors import REGISTRY_MEDIA_TYPE, RegistryJSONResponse
from hub_api.limits import CheckedBodyRoute
from hub_api.registry.models import (
    CompatibilityCheckPublic,
    CompatibilityLevelPublic,
    CompatibilityPublic,
    CompatibilityPut,
    ModeBody,
    SchemaCreate,
)
from hub_api.registry.routes import Normalize, _avro_only, valid_subject_names
from registry.config import parse_mode
from registry.limits import parse_version
from registry.types import RegistryMode, Subject

router = APIRouter(
    route_class=CheckedBodyRoute,
    tags=["registry configuration"],
    default_response_class=RegistryJSONResponse,
    dependencies=[Depends(require_reader), Depends(valid_subject_names)],
)

DefaultToGlobal = Annotated[
    bool, Query(alias="defaultToGlobal", description="Fall back to the registry-wide setting.")
]
Force = Annotated[bool, Query(description="Switch to IMPORT even though schemas exist.")]
Verbose = Annotated[bool, Query(description="List every incompatibility.")]


@router.get("/config", response_model=CompatibilityLevelPublic)
def get_global_compatibility(registry: Registry) -> CompatibilityLevelPublic:
    """The registry-wide compatibility level (default BACKWARD)."""
    return CompatibilityLevelPublic(compatibilityLevel=registry.compatibility(subject=None))


@router.put("/config", response_model=CompatibilityPublic)
def set_global_compatibility(
    body: Annotated[CompatibilityPut, Body(media_type=REGISTRY_MEDIA_TYPE)],
    registry: Registry,
    _admin: Admin,
) -> CompatibilityPublic:
    """Set the registry-wide compatibility level."""
    level = registry.set_compatibility(subject=None, level=body.compatibility)
    return CompatibilityPublic(compatibility=level)


@router.delete("/config", response_model=CompatibilityLevelPublic)
def delete_global_compatibility(registry: Registry, _admin: Admin) -> CompatibilityLevelPublic:
    """Reset the registry-wide level to the default; answers the level it replaced."""
    return CompatibilityLevelPublic(compatibilityLevel=registry.delete_compatibility(subject=None))


@router.get("/config/{subject}", response_model=CompatibilityLevelPublic)
def get_subject_compatibility(
    subject: str, registry: Registry, default_to_global: DefaultToGlobal = False
) -> CompatibilityLevelPublic:
    """The subject's own level (40408 when it has none, unless `defaultToGlobal=true`)."""
    level = registry.compatibility(subject=Subject(subject), default_to_global=default_to_global)
    return CompatibilityLevelPublic(compatibilityLevel=level)


@router.put("/config/{subject}", response_model=CompatibilityPublic)
def set_subject_compatibility(
    subject: str,
    body: Annotated[CompatibilityPut, Body(media_type=REGISTRY_MEDIA_TYPE)],
    registry: Registry,
    _writer: SubjectWriter,
) -> CompatibilityPublic:
    """Set the subject's compatibility level."""
    return CompatibilityPublic(
        compatibility=registry.set_compatibility(subject=Subject(subject), level=body.compatibility)
    )


@router.delete("/config/{subject}", response_model=CompatibilityLevelPublic)
def delete_subject_compatibility(
    subject: str, registry: Registry, _writer: SubjectWriter
) -> CompatibilityLevelPublic:
    """Remove the subject's own level (it then follows the registry-wide one)."""
    level = registry.delete_compatibility(subject=Subject(subject))
    return CompatibilityLevelPublic(compatibilityLevel=level)


@router.get("/mode", response_model=ModeBody)
def get_global_mode(registry: Registry) -> ModeBody:
    """The registry-wide mode (default READWRITE)."""
    return ModeBody(mode=registry.mode(subject=None))


@router.put("/mode", response_model=ModeBody)
def set_global_mode(
    body: Annotated[ModeBody, Body(media_type=REGISTRY_MEDIA_TYPE)],
    registry: Registry,
    _admin: Admin,
    force: Force = False,
) -> ModeBody:
    """Set the registry-wide mode; IMPORT needs an empty registry unless `force=true`."""
    return ModeBody(mode=registry.set_mode(subject=None, mode=body.mode, force=force))


@router.delete("/mode", response_model=ModeBody)
def delete_global_mode(registry: Registry, _admin: Admin) -> ModeBody:
    """Reset the registry-wide mode to READWRITE; answers the mode it replaced."""
    return ModeBody(mode=registry.delete_mode(subject=None))


@router.get("/mode/{subject}", response_model=ModeBody)
def get_subject_mode(
    subject: str, registry: Registry, default_to_global: DefaultToGlobal = False
) -> ModeBody:
    """The subject's own mode (40409 when it has none, unless `defaultToGlobal=true`)."""
    return ModeBody(
        mode=registry.mode(subject=Subject(subject), default_to_global=default_to_global)
    )


@router.put("/mode/{subject}", response_model=ModeBody)
def set_subject_mode(
    subject: str,
    body: Annotated[ModeBody, Body(media_type=REGISTRY_MEDIA_TYPE)],
    registry: Registry,
    writer: SubjectWriter,
    force: Force = False,
) -> ModeBody:
    """Set the subject's mode; IMPORT needs an admin key, and an empty subject unless
    `force=true`."""
    if parse_mode(body.mode) is RegistryMode.IMPORT:
        require_admin(writer, action="set IMPORT mode")
    return ModeBody(mode=registry.set_mode(subject=Subject(subject), mode=body.mode, force=force))


@router.delete("/mode/{subject}", response_model=ModeBody)
def delete_subject_mode(subject: str, registry: Registry, _writer: SubjectWriter) -> ModeBody:
    """Remove the subject's own mode (it then follows the registry-wide one)."""
    return ModeBody(mode=registry.delete_mode(subject=Subject(subject)))


@router.post(
    "/compatibility/subjects/{subject}/versions/{version}",
    response_model=CompatibilityCheckPublic,
    response_model_exclude_none=True,
)
def check_against_version(
    subject: str,
    version: str,
    body: Annotated[SchemaCreate, Body(media_type=REGISTRY_MEDIA_TYPE)],
    registry: Registry,
    verbose: Verbose = False,
    normalize: Normalize = False,
) -> CompatibilityCheckPublic:
    """Whether the schema is compatible with one version (`latest` or a number)."""
    _avro_only(body)
    report = registry.check_compatibility(
        subject=Subject(subject),
        schema_text=body.schema_,
        references=body.domain_references(),
        version=parse_version(version),
        normalize=normalize,
    )
    return CompatibilityCheckPublic(
        is_compatible=report.compatible, messages=report.messages() if verbose else None
    )


@router.post(
    "/compatibility/subjects/{subject}/versions",
    response_model=CompatibilityCheckPublic,
    response_model_exclude_none=True,
)
def check_against_subject(
    subject: str,
    body: Annotated[SchemaCreate, Body(media_type=REGISTRY_MEDIA_TYPE)],
    registry: Registry,
    verbose: Verbose = False,
    normalize: Normalize = False,
) -> CompatibilityCheckPublic:
    """Whether the schema is compatible with the versions the subject's level names
    (the latest, or all of them for the transitive levels)."""
    _avro_only(body)
    report = registry.check_compatibility(
        subject=Subject(subject),
        schema_text=body.schema_,
        references=body.domain_references(),
        version="all",
        normalize=normalize,
    )
    return CompatibilityCheckPublic(
        is_compatible=report.compatible, messages=report.messages() if verbose else None
    )
