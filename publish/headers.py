"""Record headers: those a publisher may set, and the names the hub keeps for its own.

The hub writes `hub.*` headers itself: `hub.request-id` and `hub.idempotency-key` on every
published record (the loader copies them into `_hub_request_id` and `_hub_idempotency_key`, the
lineage trail), `hub.error.*` on dead letters, `hub.cdc.*` on change events. A publisher's
header of that name would forge that trail, so `caller_headers` refuses every `hub.` name, from
every door (the feeds API, the REST Proxy, connectors), in any case or width. The hub's own
headers travel apart from the publisher's (`IncomingRecord.hub_headers`).
"""

import unicodedata
from collections.abc import Mapping

from publish.errors import ReservedHeaderName
from registry.errors import InvalidRecord

RESERVED_HEADER_PREFIX = "hub."
MAX_HEADER_NAME = 255  # characters of a header name


def is_reserved(name: str) -> bool:
    """Whether `name` is one of the hub's header names: it starts with `hub.` once case,
    compatibility forms (full-width letters, a one-dot leader) and surrounding spaces are
    set aside, so that no name a reader could take for the hub's gets through."""
    folded = unicodedata.normalize("NFKC", name).strip().casefold()
    return folded.startswith(RESERVED_HEADER_PREFIX)


def caller_headers(headers: Mapping[str, str]) -> list[tuple[str, bytes]]:
    """A publisher's headers as Kafka takes them; 42220 for a name or value Kafka or the
    loader cannot carry, 42231 for a name of the hub's."""
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise InvalidRecord("$.headers: expected an object of string values.", path="$.headers")
    for name, value in headers.items():
        if not name or len(name) > MAX_HEADER_NAME or not name.isprintable() or "\x00" in value:
            raise InvalidRecord(
                f"$.headers: header {name[:40]!r} is not allowed: names are 1 to "
                f"{MAX_HEADER_NAME} printable characters, and no name or value may hold a NUL "
                "character.",
                path="$.headers",
            )
        if is_reserved(name):
            raise ReservedHeaderName(name)
    return [(name, value.encode("utf-8")) for name, value in headers.items()]


def hub_headers(headers: Mapping[str, str]) -> list[tuple[str, bytes]]:
    """The hub's own headers of a record (a connector's), as Kafka takes them."""
    return [(name, value.encode("utf-8")) for name, value in headers.items()]
