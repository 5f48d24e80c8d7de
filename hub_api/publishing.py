"""What the doors that publish records share (the feeds API's publish route, the REST Proxy's
v2 and v3 routes): the id a request's records carry, and the feed and codecs of a topic."""

import itertools
import os
import re
import uuid

from starlette.concurrency import run_in_threadpool

from catalog.types import Feed
from publish.feeds import FeedService
from publish.publisher import Codecs, Publisher

REQUEST_ID_RESPONSE_HEADER = "X-Request-Id"
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_ISSUERS: dict[int, str] = {}  # process id -> the prefix of the request ids it makes
_SEQUENCE = itertools.count()


def request_id_of(given: str | None) -> str:
    """The request's id: the caller's `X-Request-Id` when it is a plain token (up to 64
    letters, digits, `.`, `_`, `:`, `-`), else a new one. It travels into Kafka headers and
    tables, so nothing else is taken from the caller."""
    if given is not None and _REQUEST_ID.fullmatch(given):
        return given
    # A random prefix per process and a counter: unique across workers and replicas, and
    # cheaper on the publish path than a uuid4 per request.
    pid = os.getpid()
    prefix = _ISSUERS.get(pid)
    if prefix is None:
        prefix = _ISSUERS[pid] = uuid.uuid4().hex[:16]
    return f"{prefix}-{next(_SEQUENCE):x}"


async def publish_target(
    feeds: FeedService, publisher: Publisher, topic: str
) -> tuple[Feed, Codecs]:
    """The feed of `topic` and how its records are encoded (latest schema).

    Both are cached lookups: answered on the event loop when they need no database read
    (nearly always), else in one thread-pool hand-off.
    """
    feed = feeds.current_if_cached(topic)
    if feed is not None:
        codecs = publisher.codecs_if_cached(feed)
        if codecs is not None:
            return feed, codecs
    return await run_in_threadpool(_lookups, feeds, publisher, topic)


def _lookups(feeds: FeedService, publisher: Publisher, topic: str) -> tuple[Feed, Codecs]:
    feed = feeds.current(topic)
    return feed, publisher.codecs(feed)
