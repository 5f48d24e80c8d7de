"""What the app's lifespan makes, in one typed object: `HubServices`.

The lifespan (`create_app`, hub_api/app.py) builds it once and keeps it as `app.state.services`;
nothing else is kept on the app. Routes read it through the named dependencies of
hub_api/deps.py; the code that runs outside a route (the middleware, the lean publish lane, the
key checks) reads it through `hub_services`.

It holds what the lifespan opens and closes, and what keeps state from one request to the next
(caches, the lineage index's sync). What only combines them, holding nothing of its own (the
console's views, the lineage answers), is made from it per request.
"""

from dataclasses import dataclass

from sqlalchemy import Engine
from starlette.applications import Starlette

from catalog.lineage import LineageStore, LineageSync
from connectors.control import ControlPlane
from hub_api.console_sessions import ConsoleSessions
from hub_api.keys import KeyVerifier
from hub_api.loader_client import LoaderClient
from hub_api.metrics import HubMetrics
from hub_api.settings import ApiSettings
from hub_kafka.admin import TopicAdmin
from hub_kafka.reader import TopicReader
from publish.feeds import FeedService
from publish.idempotent import IdempotentRequests
from publish.publisher import Publisher
from registry.service import RegistryService


@dataclass(frozen=True, slots=True)
class HubServices:
    """The services of one app, made in its lifespan and closed when it ends."""

    settings: ApiSettings
    metrics: HubMetrics  # made with the app: its middleware counts every request
    engine: Engine
    registry: RegistryService
    feeds: FeedService
    publisher: Publisher
    idempotency: IdempotentRequests
    topic_admin: TopicAdmin
    connectors: ControlPlane
    keys: KeyVerifier
    console_sessions: ConsoleSessions
    reader: TopicReader  # record counts and the latest records of a topic, for display
    loader: LoaderClient
    lineage_store: LineageStore
    lineage_sync: LineageSync


def hub_services(app: Starlette) -> HubServices:
    """The services of `app`, made when its lifespan started."""
    services: HubServices = app.state.services
    return services
