"""Named dependencies, so a route's signature reads as what it needs.

They only read `app.state`, so they are `async`: FastAPI then runs them on the event loop
instead of handing each to the thread pool, which costs more than the lookup itself.
"""

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Request

from hub_api.loader_client import LoaderClient
from hub_api.metrics import HubMetrics
from hub_api.settings import ApiSettings
from publish.feeds import FeedService
from publish.idempotent import IdempotentRequests
from publish.publisher import Publisher
from registry.service import RegistryService


def _from_state(attribute: str) -> Callable[[Request], Awaitable[Any]]:
    """A dependency answering `app.state.<attribute>`, set up when the app was made."""

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, attribute)

    dependency.__name__ = f"app_state_{attribute}"
    return dependency


Registry = Annotated[RegistryService, Depends(_from_state("registry"))]
PublisherDep = Annotated[Publisher, Depends(_from_state("publisher"))]
Feeds = Annotated[FeedService, Depends(_from_state("feeds"))]
Idempotency = Annotated[IdempotentRequests, Depends(_from_state("idempotency"))]
Settings = Annotated[ApiSettings, Depends(_from_state("api_settings"))]
Metrics = Annotated[HubMetrics, Depends(_from_state("metrics"))]
Loader = Annotated[LoaderClient, Depends(_from_state("loader"))]
