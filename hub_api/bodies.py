"""What a request's body may cost, and how an answer reaches a client that is still sending one.

An ASGI middleware, outside the request gate (hub_api/gate.py) and the body size limit
(hub_api/limits.py). uvicorn bounds neither the time a body takes nor what a worker holds of
bodies, and it takes no part in the write slots, so this does:

- Time. A body must arrive within `HUB_API_BODY_TIMEOUT_SECONDS` of the hub starting to read
  it, with no pause longer than `HUB_API_BODY_IDLE_TIMEOUT_SECONDS`. Otherwise the request is
  answered 408 (40801) and its connection closed.
- Memory. The body bytes one worker holds at once (received for requests not yet answered) are
  bounded by `HUB_API_MAX_BUFFERED_BODY_BYTES`, and those of requests without a valid key (the
  console's sign-in form, public registry lookups) by `HUB_API_MAX_ANONYMOUS_BODY_BYTES`, so
  that callers without a key cannot fill what teams need. A body that would go over either is
  answered 503 (50306) with `Retry-After`.
- Write slots. A write request (POST, PUT, PATCH, DELETE) takes one of
  `HUB_API_MAX_CONCURRENT_REQUESTS` slots once its body has arrived, or at once when it has
  none, or is answered 503 (50304) with `Retry-After`. A client that sends its body slowly
  therefore holds no slot: were slots taken first, 64 slow senders without any key (the
  console's sign-in form is read before a key is known) would make every team's publishes
  answer 503. The routes read their bodies before their work (`CheckedBodyRoute`, the publish
  lane, the registry's cached reads), so the work runs in a slot. An answer that streams while
  its body is still read (the REST Proxy v3 stream) has begun when the body ends and takes no
  slot; the body's time and size limits bound it.
- Answers before the body. HTTP clients such as urllib and requests send the whole body before
  they read an answer, and a server that closes a connection with bytes it has not read makes
  the kernel reset it: the client reports a broken pipe instead of the answer. So an answer
  given before the body was read (401, 403, 413, 429, 503) goes out at once with `Connection:
  close`, and the connection is closed only once the rest of the body was read and dropped,
  up to `HUB_API_BODY_DRAIN_BYTES` and within the time limits (nginx's lingering close). A
  longer body is not read, and its client may see the reset.
"""

import asyncio
import logging

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hub_api.auth import PRINCIPAL_SCOPE_KEY
from hub_api.errors import error_response, media_type_of
from hub_api.settings import ApiSettings, AuthMode
from hub_core.errors import ErrorCode, HubError

log = logging.getLogger(__name__)

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_CONNECTION_CLOSE = (b"connection", b"close")


class BodyRefused(HubError):
    """The body cannot be read on (too slow, no room, no slot): raised to the app from
    `receive`. Whatever the app makes of it, the client gets this error's answer."""


class RequestBodies:
    """ASGI middleware: body time limits, the worker's body bytes, write slots, and draining
    before an early answer (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, settings: ApiSettings) -> None:
        self._app = app
        self.settings = settings
        self._free_slots = settings.max_concurrent_requests
        self._free_bytes = settings.max_buffered_body_bytes
        self._free_anonymous_bytes = settings.max_anonymous_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        exchange = _Exchange(self, scope, receive, send)
        if exchange.write and not exchange.pending:
            refusal = self.take_slot()
            if refusal is not None:
                await exchange.answer(refusal)
                return
            exchange.slot = True
        try:
            await self._app(scope, exchange.receive, exchange.send)
        except BodyRefused:
            if exchange.refusal is None:
                raise
        finally:
            self._free_bytes += exchange.held
            if exchange.anonymous:
                self._free_anonymous_bytes += exchange.held
            if exchange.slot:
                self._free_slots += 1
        if exchange.refusal is not None and not exchange.answered:
            await exchange.answer(exchange.refusal)

    def take_slot(self) -> BodyRefused | None:
        """A write slot, or the refusal to answer when none is free."""
        if self._free_slots > 0:
            self._free_slots -= 1
            return None
        limit = self.settings.max_concurrent_requests
        log.warning("busy: %d write requests running; answered 503", limit)
        return BodyRefused(
            f"This API worker is serving its most write requests at once ({limit}, "
            "HUB_API_MAX_CONCURRENT_REQUESTS). Retry after the time in Retry-After.",
            code=ErrorCode.API_BUSY,
        )

    def hold(self, size: int, *, anonymous: bool) -> BodyRefused | None:
        """Count `size` body bytes against the worker's bounds, or the refusal when they do not
        fit."""
        if size <= self._free_bytes and (not anonymous or size <= self._free_anonymous_bytes):
            self._free_bytes -= size
            if anonymous:
                self._free_anonymous_bytes -= size
            return None
        if size <= self._free_bytes:
            limit, setting, whose = (
                self.settings.max_anonymous_body_bytes,
                "HUB_API_MAX_ANONYMOUS_BODY_BYTES",
                "requests without a key",
            )
        else:
            limit, setting, whose = (
                self.settings.max_buffered_body_bytes,
                "HUB_API_MAX_BUFFERED_BODY_BYTES",
                "requests",
            )
        log.warning("bodies of %s fill %d bytes; answered 503", whose, limit)
        return BodyRefused(
            f"This API worker holds its most bytes of bodies of {whose} at once ({limit}, "
            f"{setting}). Retry after the time in Retry-After.",
            code=ErrorCode.BODY_BUFFERS_FULL,
        )


class _Exchange:
    """One request's body and answer, as `RequestBodies` passes them between the server and
    the app."""

    __slots__ = (
        "_asked",
        "_deadline",
        "_expects_continue",
        "_length",
        "_limits",
        "_read",
        "_receive",
        "_scope",
        "_send",
        "_start",
        "_swallowing",
        "anonymous",
        "held",
        "pending",
        "refusal",
        "slot",
        "started",
        "write",
    )

    def __init__(self, limits: RequestBodies, scope: Scope, receive: Receive, send: Send) -> None:
        self._limits = limits
        self._scope = scope
        self._receive = receive
        self._send = send
        length: int | None = None
        chunked = expects_continue = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                length = int(value) if value.isdigit() else None
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"expect":
                expects_continue = value.lower() == b"100-continue"
        self.write = scope["method"] in WRITE_METHODS
        self.pending = chunked or bool(length)  # body bytes still to come from the client
        self._length = None if chunked else length
        self._expects_continue = expects_continue
        self._asked = False  # the app asked for the body: uvicorn sent `100 Continue` if asked
        self._read = 0
        self._deadline: float | None = None
        self.held = 0  # bytes counted against HUB_API_MAX_BUFFERED_BODY_BYTES
        self.anonymous = False  # ... and against HUB_API_MAX_ANONYMOUS_BODY_BYTES
        self.slot = False
        self.refusal: BodyRefused | None = None
        self._start: Message | None = None  # an answer's start, held while the body is pending
        self.started = False  # the answer's start went out to the client
        self._swallowing = False  # the app's own answer to a refusal, dropped for ours

    @property
    def answered(self) -> bool:
        return self.started or self._swallowing

    async def receive(self) -> Message:
        """The server's next message, within the body's time and memory limits; the write
        slot when the body has arrived."""
        if self.refusal is not None:
            raise self.refusal
        if self._start is not None:
            await self._flush()  # the app reads on after its answer began: a streamed answer
        if not self.pending:
            return await self._receive()  # after the body: a disconnect, whenever it comes
        self._asked = True
        try:
            message = await self._next()
        except BodyRefused as exc:
            self.refusal = exc
            raise
        if message["type"] != "http.request":
            self.pending = False  # the client went away
            return message
        size = len(message.get("body", b""))
        self._read += size
        self.pending = message.get("more_body", False)
        if not self.held:
            # The request gate has decided the caller before anything reads a body.
            self.anonymous = (
                self._limits.settings.auth is AuthMode.REQUIRED
                and self._scope.get(PRINCIPAL_SCOPE_KEY) is None
            )
        self.refusal = self._limits.hold(size, anonymous=self.anonymous)
        if self.refusal is not None:
            raise self.refusal
        self.held += size
        if not self.pending and self.write and not self.started:
            self.refusal = self._limits.take_slot()
            if self.refusal is not None:
                raise self.refusal
            self.slot = True
        return message

    async def send(self, message: Message) -> None:
        """The app's answer, unless a refusal replaces it."""
        if self._swallowing:
            return
        if message["type"] == "http.response.start" and self.refusal is not None:
            # The app answered the refusal its own way (FastAPI words a failed body read as
            # a bare 400): the refusal's own answer goes out instead.
            self._swallowing = True
            await self.answer(self.refusal)
            return
        await self._deliver(message)

    async def answer(self, refusal: BodyRefused) -> None:
        """Answer the request with `refusal`'s code and message."""
        request = Request(self._scope)
        response = error_response(refusal.code, refusal.message, media_type=media_type_of(request))
        await response(self._scope, self._receive, self._deliver)

    async def _deliver(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            if self.pending:
                self._start = message  # an answer before the body, or one that streams?
                return
            self.started = True
        elif self._start is not None:
            if not message.get("more_body", False):
                await self._answer_before_body(message)
                return
            await self._flush()  # a streamed answer goes out as it comes
        await self._send(message)

    async def _flush(self) -> None:
        start, self._start = self._start, None
        assert start is not None
        self.started = True
        await self._send(start)

    async def _answer_before_body(self, last: Message) -> None:
        """An answer the app gave before reading the whole body (`last`: its final message),
        as nginx's lingering close gives one: it goes out whole at once, with `Connection:
        close`; then the rest of the body is drained before the answer ends (uvicorn reads no
        more of a body once its answer ended) and the connection closes."""
        start, self._start = self._start, None
        assert start is not None
        self.started = True
        await self._send({**start, "headers": [*start.get("headers", ()), _CONNECTION_CLOSE]})
        await self._send({**last, "more_body": True})
        if self.refusal is None or self.refusal.code is not ErrorCode.REQUEST_TIMEOUT:
            await self._drain()
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _drain(self) -> None:
        """Read and drop the rest of the body, up to HUB_API_BODY_DRAIN_BYTES and within the
        body's time limits, so that a client that sends its whole body before it reads finds
        the answer; a longer body stays unread."""
        bound = self._limits.settings.body_drain_bytes
        if self._expects_continue and not self._asked:
            return  # the client waits for `100 Continue` before it sends: it will send nothing
        if self._length is not None and self._length - self._read > bound:
            return  # declared too long to drain: not a byte of it is read
        drained = 0
        while self.pending and drained <= bound:
            try:
                message = await self._next()
            except BodyRefused:
                return
            if message["type"] != "http.request":
                self.pending = False
                return
            drained += len(message.get("body", b""))
            self.pending = message.get("more_body", False)

    async def _next(self) -> Message:
        """The server's next message while the body is pending: within the idle time, and
        before the whole body's deadline (counted from the first read)."""
        settings = self._limits.settings
        now = asyncio.get_running_loop().time()
        if self._deadline is None:
            self._deadline = now + settings.body_timeout_seconds
        idle = settings.body_idle_timeout_seconds
        left = self._deadline - now
        try:
            async with asyncio.timeout(min(idle, left)):
                return await self._receive()
        except TimeoutError:
            pass
        method, path = self._scope["method"], self._scope["path"]
        if left <= idle:
            log.info("request body of %s %s took too long: answered 408", method, path)
            message = (
                f"The request body did not arrive within {settings.body_timeout_seconds:g} s "
                "(HUB_API_BODY_TIMEOUT_SECONDS). Send it faster, or in smaller requests; the "
                "connection is closed."
            )
        else:
            log.info("request body of %s %s stalled: answered 408", method, path)
            message = (
                f"The request body stopped arriving: nothing came for {idle:g} s "
                "(HUB_API_BODY_IDLE_TIMEOUT_SECONDS). Send the body without pauses; the "
                "connection is closed."
            )
        raise BodyRefused(message, code=ErrorCode.REQUEST_TIMEOUT)
