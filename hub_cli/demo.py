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


def order(rng: random.Random, customer_id: int | None = None) -> dict[str, Any]:
    sku = rng.choice(list(_SKUS))
    quantity = rng.randint(1, 3)
    return {
        "order_id": f"ord-{rng.getrandbits(40):010x}",
        "customer_id": customer_id if customer_id is not None else rng.randint(1, 5_000),
        "product_sku": sku,
        "quantity": quantity,
        "amount": str(_SKUS[sku] * quantity),
        "currency": "EUR",
        "ordered_at": datetime.now(UTC).isoformat(),
    }


class Shop:
    """Changes to the shop's customers and products, as change-event envelopes.

    Customers are created a few per round, a little after the first orders that name them
    (orders pick ids up to `LEAD` beyond the newest customer): the star schema then meets
    late-arriving dimension rows. Some customers move country (a new SCD2 version).
    The demo feeds have no WAL position, so events are ordered by `ts_ms`.
    """

    LEAD = 20

    def __init__(self) -> None:
        self.customers = 0
        self.products_sent = False

    def customer_ids(self, rng: random.Random) -> int:
        """A customer id for an order; sometimes one whose customer does not exist yet."""
        return rng.randint(1, self.customers + self.LEAD)

    def customer_changes(self, rng: random.Random) -> list[dict[str, Any]]:
        records = []
        existing = self.customers  # a move never shares a round (and a ts_ms) with a create
        for _ in range(rng.randint(1, 3)):
            self.customers += 1
            records.append(change_event("c", "customers", None, _customer(self.customers, rng)))
        if existing > 5 and rng.random() < 0.5:
            moved = _customer(rng.randint(1, existing), rng)
            records.append(change_event("u", "customers", None, moved))
        return records

    def product_changes(self, rng: random.Random) -> list[dict[str, Any]]:
        if not self.products_sent:
            self.products_sent = True
            return [change_event("r", "products", None, p) for p in _products()]
        sku = rng.choice(list(_SKUS))
        price = _SKUS[sku] * Decimal(rng.choice(["0.9", "1.0", "1.1"]))
        product = {"sku": sku, "name": _NAMES[sku], "category": "coffee",
                   "list_price": str(price.quantize(Decimal("0.01")))}  # fmt: skip
        return [change_event("u", "products", None, product)]


_NAMES = {"ESP-100": "Espresso machine", "GRD-20": "Grinder", "MUG-2": "Mug"}
_COUNTRIES = ["DE", "FR", "NL", "SE", "ES"]


def _customer(customer_id: int, rng: random.Random) -> dict[str, Any]:
    return {
        "customer_id": customer_id,
        "name": f"Customer {customer_id}",
        "email": f"customer{customer_id}@example.com",
        "country": rng.choice(_COUNTRIES),
    }


def _products() -> list[dict[str, Any]]:
    return [
        {"sku": sku, "name": _NAMES[sku], "category": "coffee", "list_price": str(price)}
        for sku, price in _SKUS.items()
    ]


def change_event(op: str, table: str, before: Any, after: Any) -> dict[str, Any]:
    """A change-event envelope as a connector without a log position would publish it."""
    now = int(datetime.now(UTC).timestamp() * 1000)
    return {
        "before": before,
        "after": after,
        "op": op,
        "ts_ms": now,
        "source": {
            "version": "1",
            "connector": "hub-demo",
            "name": "demo",
            "ts_ms": now,
            "snapshot": "true" if op == "r" else "false",
            "db": "shop",
            "schema": "public",
            "table": table,
            "txId": None,
            "lsn": None,
            "sequence": None,
        },
    }


def _key(topic: str, value: dict[str, Any]) -> str | None:
    row = value.get("after") or value.get("before") or {}
    if topic == "demo.customers":
        return str(row["customer_id"])
    if topic == "demo.products":
        return str(row["sku"])
    return None


# topic -> records of one round, made from the shop's state
FEEDS: dict[str, Callable[[Shop, random.Random], list[dict[str, Any]]]] = {
    "demo.page_views": lambda shop, rng: [page_view(rng) for _ in range(rng.randint(1, 50))],
    "demo.products": lambda shop, rng: shop.product_changes(rng),
    "demo.orders": lambda shop, rng: [
        order(rng, shop.customer_ids(rng)) for _ in range(rng.randint(1, 5))
    ],
    "demo.customers": lambda shop, rng: shop.customer_changes(rng),
}
# Feeds carrying change events; their silver tables and the demo star schema follow them.
CHANGELOG_FEEDS = ("demo.customers", "demo.products")


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
                    "description": _description(topic),
                    "value_schema": schema_text(topic),
                },
            )
            if response.status_code == 409:
                log.info("demo feed %s exists", topic)
                continue
            response.raise_for_status()
            log.info("demo feed %s created", topic)


def _description(topic: str) -> str:
    what = topic.split(".")[1].replace("_", " ")
    if topic in CHANGELOG_FEEDS:
        # An event feed carrying change events: the gateway keys changelog feeds by top-level
        # value fields, which an envelope lacks; silver recognises the envelope by its shape.
        return f"Demo feed: changes to the shop's {what} (change-event envelope)."
    return f"Demo feed: sample {what}."


def _auth(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"}


def batches(rng: random.Random) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """An endless round-robin of (topic, records) batches."""
    shop = Shop()
    while True:
        for topic, make in FEEDS.items():
            yield topic, [{"key": _key(topic, v), "value": v} for v in make(shop, rng)]


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
            try:
                response = http.post(f"/v1/feeds/{topic}/records", json={"records": records})
            except httpx.TransportError as exc:
                # The API server is restarting (`hub up` restarts it); this batch is skipped.
                log.warning("demo publish to %s: the API did not answer (%s)", topic, exc)
                stop.wait(interval_s)
                continue
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
            if topic == "demo.customers":
                stop.wait(interval_s)
