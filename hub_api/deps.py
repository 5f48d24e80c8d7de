"""Named dependencies, so a route's signature reads as what it needs."""

from typing import Annotated

from fastapi import Depends, Request

from catalog.idempotency import IdempotencyStore
from hub_api.metrics import HubMetrics
from hub_api.settings import ApiSettings
from hub_kafka.feeds import FeedService
from hub_kafka.publish import Publisher
from registry.service import RegistryService


def _registry(request: Request) -> RegistryService:
    registry: RegistryService = request.app.state.registry
    return registry


def _publisher(request: Request) -> Publisher:
    publisher: Publisher = request.app.state.publisher
    return publisher


def _feeds(request: Request) -> FeedService:
    feeds: FeedService = request.app.state.feeds
    return feeds


def _idempotency(request: Request) -> IdempotencyStore:
    store: IdempotencyStore = request.app.state.idempotency
    return store


def _metrics(request: Request) -> HubMetrics:
    metrics: HubMetrics = request.app.state.metrics
    return metrics


def _settings(request: Request) -> ApiSettings:
    settings: ApiSettings = request.app.state.api_settings
    return settings


Registry = Annotated[RegistryService, Depends(_registry)]
PublisherDep = Annotated[Publisher, Depends(_publisher)]
Feeds = Annotated[FeedService, Depends(_feeds)]
Idempotency = Annotated[IdempotencyStore, Depends(_idempotency)]
Settings = Annotated[ApiSettings, Depends(_settings)]
Metrics = Annotated[HubMetrics, Depends(_metrics)]
