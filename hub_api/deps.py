"""Named dependencies, so a route's signature reads as what it needs.

Each reads the app's services (`HubServices`, hub_api/services.py). They are `async`: FastAPI
then runs them on the event loop instead of handing each to the thread pool, which costs more
than the lookup itself.
"""

from typing import Annotated

from fastapi import Depends, Request

from connectors.control import ControlPlane
from hub_api.lineage_service import LineageService
from hub_api.loader_client import LoaderClient
from hub_api.metrics import HubMetrics
from hub_api.services import HubServices, hub_services
from hub_api.settings import ApiSettings
from publish.feeds import FeedService
from publish.idempotent import IdempotentRequests
from publish.publisher import Publisher
from registry.service import RegistryService


async def _services(request: Request) -> HubServices:
    return hub_services(request.app)


async def _registry(request: Request) -> RegistryService:
    return hub_services(request.app).registry


async def _publisher(request: Request) -> Publisher:
    return hub_services(request.app).publisher


async def _feeds(request: Request) -> FeedService:
    return hub_services(request.app).feeds


async def _idempotency(request: Request) -> IdempotentRequests:
    return hub_services(request.app).idempotency


async def _settings(request: Request) -> ApiSettings:
    return hub_services(request.app).settings


async def _metrics(request: Request) -> HubMetrics:
    return hub_services(request.app).metrics


async def _loader(request: Request) -> LoaderClient:
    return hub_services(request.app).loader


async def _control(request: Request) -> ControlPlane:
    return hub_services(request.app).connectors


async def _lineage(request: Request) -> LineageService:
    """The lineage answers, over the app's index, feeds, Kafka reader, registry and loader."""
    services = hub_services(request.app)
    return LineageService(
        store=services.lineage_store,
        sync=services.lineage_sync,
        feeds=services.feeds,
        reader=services.reader,
        registry=services.registry,
        loader=services.loader,
    )


Services = Annotated[HubServices, Depends(_services)]
Registry = Annotated[RegistryService, Depends(_registry)]
PublisherDep = Annotated[Publisher, Depends(_publisher)]
Feeds = Annotated[FeedService, Depends(_feeds)]
Idempotency = Annotated[IdempotentRequests, Depends(_idempotency)]
Settings = Annotated[ApiSettings, Depends(_settings)]
Metrics = Annotated[HubMetrics, Depends(_metrics)]
Loader = Annotated[LoaderClient, Depends(_loader)]
Control = Annotated[ControlPlane, Depends(_control)]
Lineage = Annotated[LineageService, Depends(_lineage)]
