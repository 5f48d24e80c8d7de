"""Prometheus metrics of the API: records by outcome and reason, latencies per feed and route.

With several worker processes (`HUB_API_WORKERS`), a scrape reaches one of them, so each
worker's figures would be a part only. The server then runs the workers in `prometheus_client`'s
multiprocess mode: it gives them an empty directory (`PROMETHEUS_MULTIPROC_DIR`, set before
they start, since `prometheus_client` reads it when imported), each worker writes its values to
files there, and `/metrics` in any worker adds up every worker's files. Counters and histograms
sum; the gauge of connector state consumers sums over the live workers, each worker bringing its
own value up to date as it finishes a request.
"""

import collections
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from publish.publisher import PublishOutcome

# Label children kept per feed and per (method, route, status); past this many, forgotten.
_MAX_REMEMBERED = 10_000
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Where worker processes keep their values in multiprocess mode (`prometheus_client`'s name).
MULTIPROCESS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The directory shared by the server's workers, or None in a single process."""
    return os.environ.get(MULTIPROCESS_DIR_ENV) or None


class HubMetrics:
    """The API's collectors, in a registry of their own so that every app has its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._multiprocess_dir = multiprocess_dir()
        # Gauges kept from a function, set again in multiprocess mode (see `refresh`).
        self._refreshers: list[Callable[[], None]] = []
        self.accepted = Counter(
            "hub_records_accepted", "Records Kafka acknowledged.", ["feed"], registry=self.registry
        )
        self.rejected = Counter(
            "hub_records_rejected",
            "Records not published, by error code.",
            ["feed", "reason"],
            registry=self.registry,
        )
        self.dead_lettered = Counter(
            "hub_records_dead_lettered",
            "Invalid records written to the feed's dead-letter topic.",
            ["feed"],
            registry=self.registry,
        )
        self.publish_seconds = Histogram(
            "hub_publish_request_seconds",
            "Time to answer a publish request.",
            ["feed"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "hub_http_requests",
            "HTTP requests by route and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.request_seconds = Histogram(
            "hub_http_request_seconds",
            "HTTP request latency by route.",
            ["method", "route"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._per_feed: dict[str, tuple[Any, Any]] = {}
        self._per_request: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def _feed_children(self, feed: str) -> tuple[Any, Any]:
        """The feed's request timer and accepted counter. `labels()` validates and looks its
        labels up under a lock: kept per feed, as a one-record request's largest metrics cost."""
        children = self._per_feed.get(feed)
        if children is None:
            if len(self._per_feed) >= _MAX_REMEMBERED:
                self._per_feed.clear()
            children = (self.publish_seconds.labels(feed), self.accepted.labels(feed))
            self._per_feed[feed] = children
        return children

    def request_children(self, method: str, route: str, status: int) -> tuple[Any, Any]:
        """The request counter and latency histogram of a method, route and status."""
        key = (method, route, status)
        children = self._per_request.get(key)
        if children is None:
            if len(self._per_request) >= _MAX_REMEMBERED:
                self._per_request.clear()
            children = (
                self.requests.labels(method, route, str(status)),
                self.request_seconds.labels(method, route),
            )
            self._per_request[key] = children
        return children

    def follow_connector_consumers(self, count: Callable[[], int]) -> None:
        """Export how many Kafka consumers were built to read connector state: one per worker
        while every connectors request is answered from its cache."""
        gauge = Gauge(
            "hub_connector_state_consumers",
            "Kafka consumers built so far to read the connector state topics.",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        if self._multiprocess_dir is None:
            gauge.set_function(count)
        else:  # another worker reads this one's value from its file
            self._refreshers.append(lambda: gauge.set(count()))
            gauge.set(count())

    @property
    def multiprocess(self) -> bool:
        return self._multiprocess_dir is not None

    def refresh(self) -> None:
        """Write this worker's function-kept gauges to its files (multiprocess mode)."""
        for refresh in self._refreshers:
            refresh()

    def exposition(self) -> bytes:
        """The text exposition of every metric: of all workers in multiprocess mode."""
        if self._multiprocess_dir is None:
            return generate_latest(self.registry)
        self.refresh()
        every_worker = CollectorRegistry()
        MultiProcessCollector(every_worker, path=self._multiprocess_dir)
        return generate_latest(every_worker)

    def record_publish(self, feed: str, outcome: PublishOutcome, seconds: float) -> None:
        """Count a request's records by outcome (one increment per outcome, not per record)."""
        timer, accepted = self._feed_children(feed)
        timer.observe(seconds)
        if outcome.accepted:
            accepted.inc(outcome.accepted)
        if outcome.accepted == len(outcome.results):
            return
        rejected: collections.Counter[str] = collections.Counter()
        dead_lettered = 0
        for result in outcome.results:
            if result.ok:
                continue
            if result.dead_lettered:
                dead_lettered += 1
            else:
                rejected[result.error_code.name if result.error_code else "UNKNOWN"] += 1
        if dead_lettered:
            self.dead_lettered.labels(feed).inc(dead_lettered)
        for reason, count in rejected.items():
            self.rejected.labels(feed, reason).inc(count)


@dataclass(frozen=True, slots=True)
class _RouteName:
    """What `RequestMetrics` reads of a matched route: its path template."""

    path: str


@cache
def _route_name(template: str) -> _RouteName:
    return _RouteName(template)


def name_route(scope: Scope, template: str) -> None:
    """Label a request that is answered before routing with its route's path `template`, as
    routing would: `RequestMetrics` reads the matched route's `path` from the scope."""
    scope["route"] = _route_name(template)


class RequestMetrics:
    """ASGI middleware counting requests and timing them, labelled by route template."""

    def __init__(self, app: ASGIApp, *, metrics: HubMetrics) -> None:
        self._app = app
        self._metrics = metrics
        self._refresh = metrics.multiprocess

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def tracking_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self._app(scope, receive, tracking_send)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", "unmatched")
            method = scope.get("method", "")
            count, timer = self._metrics.request_children(method, template, status)
            count.inc()
            timer.observe(time.perf_counter() - started)
            if self._refresh:
                self._metrics.refresh()
