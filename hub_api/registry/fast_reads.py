"""The two registry reads that serializers send most, answered from memory before routing.

Every Confluent serializer asks `GET /schemas/ids/{id}` (to decode) and `POST /subjects/{s}`
(to find the id of the schema it writes with) for each schema it meets. Through FastAPI such a
request costs routing, dependency solving, body validation and a thread-pool hand-off: several
times what the HTTP server itself spends on it. This middleware, inside the request gate, the
body size limit and the metrics, answers those requests itself when the registry service
already holds the answer at the database's current generation (`registry.changes`), with the
same body the route would render. Anything else goes on to the route unchanged: a miss (the
route reads the database and fills the cache), a query string, a body other than
`{"schema": ..., "schemaType": "AVRO"}`, a caller the route would refuse.

The generation is read once per turn of the event loop and shared by the requests answered in
that turn (`GenerationPerTurn`, ADR 0052). On SQLite reading it takes a lock on the database
file and a read of its header: about 10 us in a busy server, an eighth of a lookup.
"""

import asyncio
from typing import Any
from urllib.parse import parse_qsl

from pydantic_core import from_json
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hub_api.auth import PRINCIPAL_SCOPE_KEY
from hub_api.errors import REGISTRY_MEDIA_TYPE
from hub_api.metrics import name_route
from hub_api.registry.routes import lookup_body, schema_body
from hub_api.services import hub_services
from hub_api.settings import ApiSettings, AuthMode
from hub_core.errors import HubError
from registry.limits import MAX_SCHEMA_ID, parse_subject
from registry.service import RegistryService
from registry.types import SchemaId, Subject

_BY_ID = "/schemas/ids/"
_SUBJECTS = "/subjects/"
_BODY_KEYS = frozenset({"schema", "schemaType"})
_MEDIA_TYPE = REGISTRY_MEDIA_TYPE.encode()


class CachedRegistryReads:
    """ASGI middleware: cached answers to `GET /schemas/ids/{id}` and lookups."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._generation = GenerationPerTurn()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            method: str = scope["method"]
            if method == "GET" and path.startswith(_BY_ID):
                if await self._by_id(scope, receive, send, path[len(_BY_ID) :]):
                    return
            elif method == "POST" and path.startswith(_SUBJECTS):
                await self._lookup(scope, receive, send, path[len(_SUBJECTS) :])
                return
        await self._app(scope, receive, send)

    async def _by_id(self, scope: Scope, receive: Receive, send: Send, tail: str) -> bool:
        """Whether the answer came from the cache (else the caller passes the request on)."""
        # Digits only, no leading zero: anything else is the route's to parse or refuse.
        if not (tail.isascii() and tail.isdigit() and tail[0] != "0" and len(tail) <= 10):
            return False
        if scope["query_string"] and _names_subject_prefix(scope["query_string"]):
            return False  # the router checks `subjectPrefix` on every registry path
        services = hub_services(scope["app"])
        if not _may_read(scope, services.settings):
            return False
        registry = services.registry
        schema_id = int(tail)
        if schema_id > MAX_SCHEMA_ID:
            return False
        stored = registry.cached_stored_schema(
            schema_id=SchemaId(schema_id), generation=self._generation.now(registry)
        )
        if stored is None:
            return False
        name_route(scope, "/schemas/ids/{schema_id}")
        await _answer(send, schema_body(stored))
        return True

    async def _lookup(self, scope: Scope, receive: Receive, send: Send, subject: str) -> None:
        if "/" in subject or not subject or scope["query_string"] or not _json_body(scope):
            await self._app(scope, receive, send)
            return
        services = hub_services(scope["app"])
        if not _may_read(scope, services.settings):
            await self._app(scope, receive, send)
            return
        registry = services.registry
        # The body is read here; when the route answers, it gets the body again from memory.
        raw, more = await _read_body(receive)
        schema_text = _plain_avro_schema(raw)
        found = None
        if schema_text is not None:
            try:
                name = parse_subject(subject)
            except HubError:
                name = None  # the route's dependency answers 42208
            if name is not None:
                found = registry.cached_lookup(
                    subject=Subject(name),
                    schema_text=schema_text,
                    generation=self._generation.now(registry),
                )
        if found is None:
            await self._app(scope, _replay(raw, more, receive), send)
            return
        name_route(scope, "/subjects/{subject}")
        await _answer(send, lookup_body(found))


class GenerationPerTurn:
    """The registry's generation, read at most once per turn of the event loop.

    Still as fresh as reading it for each request: a request is answered in a turn only if it
    arrived before that turn's read. Its task was scheduled when its bytes were read from the
    socket; the read schedules its own forgetting (`call_soon`), which runs before anything
    scheduled after the read. So a change committed before a request was sent is seen by its
    answer. Only the event loop's thread calls it.
    """

    def __init__(self) -> None:
        self._known = False
        self._generation: int | None = None

    def now(self, registry: RegistryService) -> int | None:
        if not self._known:
            self._generation = registry.generation()
            self._known = True
            asyncio.get_running_loop().call_soon(self._forget)
        return self._generation

    def _forget(self) -> None:
        self._known = False


async def _answer(send: Send, body: bytes) -> None:
    """200 with `body`: the messages and headers `Response` would send, without building one."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", b"%d" % len(body)), (b"content-type", _MEDIA_TYPE)],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _may_read(scope: Scope, settings: ApiSettings) -> bool:
    """Whether `require_reader` lets the caller read (else the route answers 401)."""
    if settings.auth is AuthMode.DISABLED or settings.public_reads:
        return True
    return scope.get(PRINCIPAL_SCOPE_KEY) is not None


def _names_subject_prefix(query: bytes) -> bool:
    return any(name == "subjectPrefix" for name, _ in parse_qsl(query.decode("latin-1")))


def _json_body(scope: Scope) -> bool:
    """Whether FastAPI would read the body as JSON: no content type, or a JSON one."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (
                media.startswith(b"application/") and media.endswith(b"+json")
            )
    return True


async def _read_body(receive: Receive) -> tuple[bytes, Message | None]:
    """The whole body, and the message that ended it early (a disconnect), if one did."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message  # the client went away: the route sees it
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(raw: bytes, ended: Message | None, receive: Receive) -> Receive:
    """A `receive` that gives the body read (`raw`) again, then what `receive` gives."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return ended if ended is not None else await receive()
        replayed = True
        return {"type": "http.request", "body": raw, "more_body": ended is not None}

    return replay


def _plain_avro_schema(raw: bytes) -> str | None:
    """The schema text of `{"schema": "...", "schemaType": "AVRO"}` (type optional); None for
    any other body, which the route then reads, checks and answers itself.

    Parsed by pydantic-core alone, with no nesting check first: its parser does not recurse
    without bound (it refuses deep nesting, and the route then words the error), and a body of
    this form nests one level."""
    try:
        body: Any = from_json(raw)
    except ValueError:
        return None
    if not isinstance(body, dict) or not body.keys() <= _BODY_KEYS:
        return None
    schema_type = body.get("schemaType", "AVRO")
    if not isinstance(schema_type, str) or schema_type.upper() != "AVRO":
        return None
    text = body.get("schema")
    return text if isinstance(text, str) else None
