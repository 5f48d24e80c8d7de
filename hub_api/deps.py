"""Named dependencies, so a route's signature reads as what it needs.

They only read `app.state`, so they are `async`: FastAPI then runs them on the event loop
instead of handing each to the thread pool, which costs more than the lookup itself.
"""

from typing import Annotated

from fastapi import Depends, Request

from catalog.idempotency import IdempotencyStore
from hub_api.metrics import HubMetrics
from hub_api.settings import ApiSettings
from hub_kafka.feeds import FeedService
from hub_kafka.publish import Publisher
from registry.service import RegistryService


async def _registry(request: Request) -> RegistryService:
    registry: RegistryService = request.app.state.registry
    return registry


async def _publisher(request: Request) -> Publisher:
    publisher: Publisher = request.app.state.publisher
    return publisher


async def _feeds(request: Request) -> FeedService:
    feeds: FeedService = request.app.state.feeds
    return feeds


async def _idempotency(request: Request) -> IdempotencyStore:
    store: IdempotencyStore = request.app.state.idempotency
    return store


async def _metrics(request: Request) -> HubMetrics:
    metrics: HubMetrics = request.app.state.metrics
    return metrics


async def _settings(request: Request) -> ApiSettings:
    settings: ApiSettings = request.app.state.api_settings
    return settings


Registry = Annotated[RegistryService, Depends(_registry)]
PublisherDep = Annotated[Publisher, Depends(_publisher)]
Feeds = Annotated[FeedService, Depends(_feeds)]
Idempotency = Annotated[IdempotencyStore, Depends(_idempotency)]
Settings = Annotated[ApiSettings, Depends(_settings)]
Metrics = Annotated[HubMetrics, Depends(_metrics)]
