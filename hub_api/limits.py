"""Refusing request bodies over the size limit before they are read into memory, JSON nested
deeper than the depth limit before it is parsed, and callers without a valid key before either."""

import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from catalog.types import Principal
from hub_api.auth import require_admin_caller, require_caller, require_subject_writer
from hub_api.bodies import WRITE_METHODS
from hub_api.errors import BodyTooLarge, MalformedBody
from hub_api.services import hub_services
from hub_core.errors import ErrorCode

DEFAULT_MAX_DEPTH = 64  # ApiSettings.max_json_depth's default
# For `json_depth_exceeds`: objects count as arrays (only the depth matters), and every byte
# but brackets and quotes goes.
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


class BodySizeLimit:
    """ASGI middleware: 413 with code 41301 for bodies over `max_bytes` (declared or streamed),
    before a byte of a body declared too large is read."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        # Refused when the app first asks for the body, not here: the route checks the caller's
        # key before it reads a body, and a caller without one gets 401 whatever it declared.
        too_large = declared is not None and declared.isdigit() and int(declared) > self._max
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            if too_large:
                raise BodyTooLarge
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self._max:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self._app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {
                "error_code": int(ErrorCode.PAYLOAD_TOO_LARGE),
                "message": f"Request body is larger than {self._max} bytes "
                "(HUB_API_MAX_BODY_BYTES). Split the batch.",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())],
            }
        )  # fmt: skip
        await send({"type": "http.response.body", "body": body})


def json_depth_exceeds(raw: bytes, max_depth: int) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `max_depth`.

    Iterative and done by bytes methods (C loops), so a hostile body costs at most
    `max_depth` passes over its brackets. Escaped backslashes and quotes go first, then the
    strings, leaving the brackets outside strings; each pass removes the innermost pairs, one
    level. Unbalanced text is left to the parser to word (False).
    """
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return False
    text = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(_BRACKETS, _NOT_STRUCTURE)
    brackets = b"".join(text.split(b'"')[::2])  # the even pieces lie outside strings
    for _ in range(max_depth):
        shorter = brackets.replace(b"[]", b"")
        if len(shorter) == len(brackets):
            break  # nothing left, or unbalanced (not JSON: the parser says where)
        brackets = shorter
    else:
        return bool(brackets)
    return False


def check_depth(raw: bytes, max_depth: int) -> None:
    """40001 if the JSON text nests deeper than `max_depth` (`HUB_API_MAX_JSON_DEPTH`)."""
    if json_depth_exceeds(raw, max_depth):
        raise MalformedBody(
            f"Malformed JSON body: arrays and objects nest deeper than {max_depth} levels "
            "(HUB_API_MAX_JSON_DEPTH)."
        )


class CheckedBodyRoute(APIRoute):
    """A route whose JSON body is read, and its nesting checked, before FastAPI parses it.

    FastAPI's own parsing answers a body that stops streaming (over the size limit) with a
    bare 400, and recurses once per nesting level; reading it here first lets the size limit
    answer 413 (41301) and the depth limit 400 (40001).

    Before that, the route's key checks run (`require_caller`, `require_subject_writer`,
    `require_admin_caller`, see `_key_checks`): FastAPI would read and parse a body before any
    dependency, so a caller without a valid key, or with another team's key where the path
    names the owner, would make the hub read its body first. Here it gets 401 or 403 with the
    body unread. The dependencies run again afterwards, from the verified key in the scope.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        parse_and_run = super().get_route_handler()
        key_checks = _key_checks(self.dependant)

        async def handler(request: Request) -> Response:
            if request.method in WRITE_METHODS:
                for check in key_checks:
                    await check(request)
                # Read whole before the route's work, even where the route takes no body (a
                # DELETE): a write takes its slot once its body has arrived (hub_api/bodies.py).
                raw = await request.body()  # cached: FastAPI reads it again from memory
                check_depth(raw, hub_services(request.app).settings.max_json_depth)
            return await parse_and_run(request)

        return handler


# The dependencies that decide from the headers and the path alone whether a key may write.
_KEY_CHECKS: tuple[Callable[..., Principal], ...] = (
    require_caller,
    require_subject_writer,
    require_admin_caller,
)


def _key_checks(dependant: Dependant) -> list[Callable[[Request], Awaitable[None]]]:
    """The route's key checks, as coroutines run before its body is read."""
    calls: list[Callable[..., Principal]] = []
    pending = list(dependant.dependencies)
    while pending:
        sub = pending.pop(0)
        if sub.call in _KEY_CHECKS and sub.call not in calls:
            calls.append(sub.call)
        pending.extend(sub.dependencies)
    return [_run_before_body(call) for call in calls]


def _run_before_body(call: Callable[..., Principal]) -> Callable[[Request], Awaitable[None]]:
    """`call(request, <its path parameters>)` in a worker thread (it may read the database)."""
    names = [name for name in inspect.signature(call).parameters if name != "request"]

    async def check(request: Request) -> None:
        arguments = {name: request.path_params[name] for name in names}
        await run_in_threadpool(call, request, **arguments)

    return check
