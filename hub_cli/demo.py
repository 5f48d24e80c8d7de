"""Demo feeds for `hub up --demo`: registers their schemas and keeps publishing sample records."""

import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from importlib import resources
from typing import Any

import httpx

log = logging.getLogger(__name__)

_PAGES = ["/", "/search", "/product/espresso-machine", "/product/grinder", "/cart", "/checkout"]
_REFERRERS = [None, "https://www.example.com/", "https://news.example.org/", None]
_SKUS = {"ESP-100": Decimal("249.00"), "GRD-20": Decimal("89.50"), "MUG-2": Decimal("12.90")}


def page_view(rng: random.Random) -> dict[str, Any]:
    return {
        "view_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "user_id": rng.randint(1, 5_000),
        "url": rng.choice(_PAGES),
        "referrer": rng.choice(_REFERRERS),
        "device": rng.choices(["DESKTOP", "MOBILE", "TABLET"], weights=[5, 4, 1])[0],
        "duration_ms": int(rng.expovariate(1 / 20_000)),
        "viewed_at": datetime.now(UTC).isoformat(),
    }


def order(rng: random.Random) -> dict[str, Any]:
    sku = rng.choice(list(_SKUS))
    quantity = rng.randint(1, 3)
    return {
        "order_id": f"ord-{rng.getrandbits(40):010x}",
        "customer_id": rng.randint(1, 5_000),
        "product_sku": sku,
        "quantity": quantity,
        "amount": str(_SKUS[sku] * quantity),
        "currency": "EUR",
        "ordered_at": datetime.now(UTC).isoformat(),
    }


# topic -> (record generator, records per round)
FEEDS: dict[str, tuple[Callable[[random.Random], dict[str, Any]], int]] = {
    "demo.page_views": (page_view, 50),
    "demo.orders": (order, 5),
}


def schema_text(topic: str) -> str:
    """The demo schema shipped for `topic`."""
    return (resources.files("hub_cli") / "demo" / f"{topic}.avsc").read_text()


TEAM = "demo"


def create_feeds(api_url: str, api_key: str) -> None:
    """Create the demo feeds, owned by team `demo` (idempotent: existing feeds are kept)."""
    with httpx.Client(base_url=api_url, timeout=60, headers=_auth(api_key)) as http:
        for topic in FEEDS:
            response = http.post(
                "/v1/feeds",
                json={
                    "topic": topic,
                    "owner": TEAM,
                    "kind": "event",
                    "partitions": 2,
                    "description": f"Demo feed: sample {topic.split('.')[1].replace('_', ' ')}.",
                    "value_schema": schema_text(topic),
                },
            )
            if response.status_code == 409:
                log.info("demo feed %s exists", topic)
                continue
            response.raise_for_status()
            log.info("demo feed %s created", topic)


def _auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def batches(rng: random.Random) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An endless round-robin of (topic, records) batches."""
    while True:
        for topic, (make, count) in FEEDS.items():
            yield topic, [{"key": None, "value": make(rng)} for _ in range(rng.randint(1, count))]


def publish_forever(
    api_url: str, api_key: str, stop: threading.Event, *, interval_s: float = 1.0
) -> None:
    """Publish demo batches through the gateway until `stop` is set."""
    rng = random.Random()
    published = 0
    with httpx.Client(base_url=api_url, timeout=60, headers=_auth(api_key)) as http:
        for topic, records in batches(rng):
            if stop.is_set():
                return
            response = http.post(f"/v1/feeds/{topic}/records", json={"records": records})
            if response.status_code != 200:
                log.warning(
                    "demo publish to %s answered %s: %s",
                    topic,
                    response.status_code,
                    response.text[:300],
                )
            else:
                published += len(records)
                if published % 500 < len(records):
                    log.info("demo: %d records published so far", published)
            if topic == "demo.orders":
                stop.wait(interval_s)
