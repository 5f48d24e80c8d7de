"""The FastAPI application: built by a factory from settings, so tests can build several."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from fastapi import FastAPI

from catalog.lineage import LineageStore, LineageSync
from catalog.sessions import SessionStore
from catalog.teams import TeamStore
from connectors.control import ControlPlane
from connectors.settings import ConnectSettings
from hub_api.bodies import RequestBodies
from hub_api.console import routes as console_routes
from hub_api.console_sessions import ConsoleSessions
from hub_api.errors import install_error_handlers
from hub_api.feeds import routes as feed_routes
from hub_api.gate import RequestGate
from hub_api.gateway import routes as publish_routes
from hub_api.gateway.lane import PublishLane
from hub_api.gateway.models import RecordsIn
from hub_api.keys import KeyVerifier
from hub_api.limits import BodySizeLimit
from hub_api.lineage import routes as lineage_routes
from hub_api.loader_client import LoaderClient, LoaderLedger
from hub_api.metrics import HubMetrics, RequestMetrics
from hub_api.openapi import install_openapi
from hub_api.operations import connector_routes, health_routes, identity_routes
from hub_api.registry import config_routes
from hub_api.registry import routes as registry_routes
from hub_api.registry.fast_reads import CachedRegistryReads
from hub_api.rest_proxy import routes as rest_proxy_routes
from hub_api.rest_proxy.models import ProduceRecordV3In, ProduceRequestIn
from hub_api.services import HubServices
from hub_api.settings import ApiSettings
from hub_kafka.reader import TopicReader
from hub_kafka.settings import KafkaSettings
from publish.feeds import FeedQuotas
from publish.services import publish_services
from registry.settings import RegistrySettings

log = logging.getLogger(__name__)


def create_app(
    api: ApiSettings | None = None,
    registry: RegistrySettings | None = None,
    kafka: KafkaSettings | None = None,
) -> FastAPI:
    """The hub's API app: registry, feeds and publish gateway; settings default to the env."""
    api = api or ApiSettings()
    registry = registry or RegistrySettings()
    kafka = kafka or KafkaSettings()

    # Made with the app rather than in its lifespan: the metrics middleware is given it when the
    # app is built, and the services hold the same one.
    metrics = HubMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        published = publish_services(
            registry,
            kafka,
            transactional_id_prefix=f"hub-api-{api.instance_id}",
            transactional_producers=api.transactional_producers,
            idempotency_ttl=timedelta(seconds=api.idempotency_ttl_seconds),
            feed_quotas=FeedQuotas(
                feeds_per_team=api.quota_feeds_per_team,
                partitions_per_feed=api.quota_partitions_per_feed,
                description_bytes=api.max_feed_description_bytes,
            ),
        )
        connectors = ControlPlane(
            ConnectSettings(), kafka, admin=published.admin, producer=published.producer
        )
        connectors.keep_cached()
        metrics.follow_connector_consumers(lambda: connectors.consumers_opened)
        reader = TopicReader(kafka)
        loader = LoaderClient(api)
        app.state.services = HubServices(
            settings=api,
            metrics=metrics,
            engine=published.engine,
            registry=published.registry,
            feeds=published.feeds,
            publisher=published.publisher,
            idempotency=published.idempotency,
            topic_admin=published.admin,
            connectors=connectors,
            keys=KeyVerifier(TeamStore(published.engine), cache_seconds=api.key_cache_seconds),
            console_sessions=ConsoleSessions(
                SessionStore(
                    published.engine,
                    lifetime=timedelta(seconds=api.console_session_seconds),
                    idle_timeout=timedelta(seconds=api.console_idle_seconds),
                ),
                api,
            ),
            reader=reader,
            loader=loader,
            lineage_store=LineageStore(published.engine),
            lineage_sync=LineageSync(
                published.engine,
                LoaderLedger(loader)
                if api.lineage_source == "loader"
                else api.lineage_warehouse_dir,
            ),
        )
        log.info(
            "API ready: database %s, Kafka at %s, auth %s",
            published.engine.url.render_as_string(hide_password=True),
            kafka.bootstrap_servers,
            api.auth,
        )
        try:
            yield
        finally:
            reader.close()
            loader.close()
            connectors.close()
            published.close()

    app = FastAPI(
        title="Integration Hub",
        description="Schema registry (Confluent-compatible), feeds and the publish gateway.",
        version="0.1.0",
        lifespan=lifespan,
    )
    # Innermost, after the gate, the size limit and the metrics, before routing: plain publish
    # requests (ADR 0031) and registry reads answered from memory (ADR 0032, 0052).
    app.add_middleware(PublishLane)
    app.add_middleware(CachedRegistryReads)
    app.add_middleware(BodySizeLimit, max_bytes=api.max_body_bytes)
    # Outside the size limit: rate limits and key checks come before the body is read.
    app.add_middleware(RequestGate, settings=api)
    # Outside the gate: bodies' time and memory limits, write slots once a body has arrived, and
    # draining an unread body before an answer given without it.
    app.add_middleware(RequestBodies, settings=api)
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(health_routes.Liveness)  # outermost: answers before anything else runs
    install_error_handlers(app, pages=console_routes.error_page)
    app.add_exception_handler(console_routes.SignInNeeded, console_routes.sign_in_redirect)
    app.include_router(health_routes.router)
    app.include_router(registry_routes.router)
    app.include_router(config_routes.router)
    app.include_router(feed_routes.router)
    app.include_router(publish_routes.router)
    app.include_router(rest_proxy_routes.router)
    app.include_router(connector_routes.router)
    app.include_router(identity_routes.router)
    app.include_router(lineage_routes.router)
    app.include_router(console_routes.router)
    install_openapi(app, raw_bodies=(RecordsIn, ProduceRequestIn, ProduceRecordV3In))
    return app
