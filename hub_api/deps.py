"""Named dependencies, so a route's signature reads as what it needs."""

from typing import Annotated

from fastapi import Depends, Request

from hub_api.settings import ApiSettings
from hub_kafka.publish import Publisher
from registry.service import RegistryService


def _registry(request: Request) -> RegistryService:
    registry: RegistryService = request.app.state.registry
    return registry


def _publisher(request: Request) -> Publisher:
    publisher: Publisher = request.app.state.publisher
    return publisher


def _settings(request: Request) -> ApiSettings:
    settings: ApiSettings = request.app.state.api_settings
    return settings


Registry = Annotated[RegistryService, Depends(_registry)]
PublisherDep = Annotated[Publisher, Depends(_publisher)]
Settings = Annotated[ApiSettings, Depends(_settings)]
