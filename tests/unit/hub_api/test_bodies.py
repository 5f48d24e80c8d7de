"""What a request's body may cost (hub_api/bodies.py), driven through the ASGI interface with
the server's messages given one by one: slots taken once a body has arrived, the worker's body
bytes bounded, slow bodies answered 408, and unread bodies drained before an early answer."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.types import Message

from catalog.types import Principal, TeamName
from hub_api.auth import PRINCIPAL_SCOPE_KEY
from hub_api.bodies import RequestBodies
from hub_api.errors import install_error_handlers
from hub_api.settings import ApiSettings

pytestmark = pytest.mark.unit

KIB = 1024


class Note(BaseModel):
    text: str


@dataclass
class Exchange:
    """One request through the app: the messages the server has for it, and the answer."""

    method: str = "POST"
    path: str = "/echo"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    caller: Principal | None = None  # as the request gate found it: None without a key
    inbox: asyncio.Queue[Message] = field(default_factory=asyncio.Queue)
    answer: list[Message] = field(default_factory=list)
    taken: int = 0  # body messages the app (or the middleware) took from the server
    taken_when_answered: int | None = None  # ... when the answer's body went out

    def give(self, body: bytes, *, more: bool) -> None:
        self.inbox.put_nowait({"type": "http.request", "body": body, "more_body": more})

    async def receive(self) -> Message:
        message = await self.inbox.get()
        self.taken += 1
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.body" and self.taken_when_answered is None:
            self.taken_when_answered = self.taken
        self.answer.append(message)

    def scope(self) -> dict[str, Any]:
        return {
            "type": "http",
            "method": self.method,
            "path": self.path,
            "raw_path": self.path.encode(),
            "root_path": "",
            "query_string": b"",
            "headers": self.headers,
            "scheme": "http",
            "server": ("127.0.0.1", 8080),
            "client": ("127.0.0.1", 40000),
            "http_version": "1.1",
            PRINCIPAL_SCOPE_KEY: self.caller,
        }

    @property
    def status(self) -> int:
        (start,) = (m for m in self.answer if m["type"] == "http.response.start")  # one answer
        return int(start["status"])

    @property
    def response_headers(self) -> dict[bytes, bytes]:
        return dict(self.answer[0]["headers"])

    def json(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.answer[1:]))


def _declaring(length: int, **extra: bytes) -> list[tuple[bytes, bytes]]:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(length).encode())]
    return headers + [(name.replace("_", "-").encode(), value) for name, value in extra.items()]


def _app(released: asyncio.Event | None = None, **settings: Any) -> RequestBodies:
    """An app with a route that reads its body, one that answers without reading it (as a
    refused key is answered), one that parses a model, and one that waits for `released`."""
    api = FastAPI()
    install_error_handlers(api)

    @api.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        return {"bytes": len(await request.body())}

    @api.post("/refused")
    async def refused() -> JSONResponse:
        return JSONResponse({"error_code": 40101, "message": "no key"}, status_code=401)

    @api.post("/notes")
    async def notes(note: Note) -> dict[str, str]:
        return {"text": note.text}

    @api.post("/slow")
    async def slow(request: Request) -> dict[str, int]:
        body = await request.body()
        assert released is not None
        await released.wait()
        return {"bytes": len(body)}

    defaults: dict[str, Any] = {"max_body_bytes": 64 * KIB, "max_buffered_body_bytes": 64 * KIB}
    return RequestBodies(api, settings=ApiSettings(**{**defaults, **settings}))


async def _run(app: RequestBodies, exchange: Exchange) -> Exchange:
    await app(exchange.scope(), exchange.receive, exchange.send)
    return exchange


def _in_loop(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(test())


# Write slots


def test_a_slow_body_holds_no_write_slot_while_it_arrives() -> None:
    async def test() -> None:
        app = _app(max_concurrent_requests=1)
        slow = Exchange(headers=_declaring(1000))
        slow.give(b'{"text": ', more=True)
        slow_call = asyncio.create_task(_run(app, slow))
        await asyncio.sleep(0)  # the slow request is waiting for the rest of its body

        quick = Exchange(headers=_declaring(2))
        quick.give(b"{}", more=False)
        await _run(app, quick)

        assert quick.status == 200
        assert not slow.answer
        slow.give(b"1" * 991, more=False)
        assert (await slow_call).status == 200

    _in_loop(test)


def test_a_write_beyond_the_slots_gets_503_with_retry_after_once_its_body_arrived() -> None:
    async def test() -> None:
        released = asyncio.Event()
        app = _app(released, max_concurrent_requests=1)
        working = Exchange(path="/slow", headers=_declaring(2))
        working.give(b"{}", more=False)
        working_call = asyncio.create_task(_run(app, working))
        await asyncio.sleep(0.01)  # its body has arrived: it holds the only slot

        late = Exchange(path="/notes", headers=_declaring(15))
        late.give(b'{"text": "hi"}', more=False)
        await _run(app, late)
        released.set()
        await working_call

        assert late.status == 503
        assert late.json()["error_code"] == 50304
        assert "HUB_API_MAX_CONCURRENT_REQUESTS" in late.json()["message"]
        assert late.response_headers[b"retry-after"] == b"5"
        assert late.json()["error_code"] == 50304  # not FastAPI's bare 400 for the read
        assert working.status == 200

    _in_loop(test)


def test_a_write_without_a_body_takes_its_slot_at_once() -> None:
    async def test() -> None:
        released = asyncio.Event()
        app = _app(released, max_concurrent_requests=1)
        working = Exchange(path="/slow", headers=_declaring(2))
        working.give(b"{}", more=False)
        working_call = asyncio.create_task(_run(app, working))
        await asyncio.sleep(0.01)

        bodiless = await _run(app, Exchange(method="DELETE", path="/echo"))
        released.set()
        await working_call

        assert bodiless.status == 503
        assert bodiless.json()["error_code"] == 50304

    _in_loop(test)


# Memory


def test_a_body_beyond_the_workers_buffered_bytes_gets_503_and_frees_nothing_it_never_held() -> (
    None
):
    async def test() -> None:
        released = asyncio.Event()
        app = _app(released, max_body_bytes=40 * KIB, max_buffered_body_bytes=64 * KIB)
        holding = Exchange(path="/slow", headers=_declaring(40 * KIB))
        holding.give(b"x" * 40 * KIB, more=False)
        holding_call = asyncio.create_task(_run(app, holding))
        await asyncio.sleep(0.01)

        crowded = Exchange(headers=_declaring(30 * KIB))
        crowded.give(b"x" * 30 * KIB, more=False)
        await _run(app, crowded)
        released.set()
        await holding_call
        after = Exchange(headers=_declaring(60 * KIB))
        after.give(b"x" * 60 * KIB, more=False)
        await _run(app, after)

        assert crowded.status == 503
        assert crowded.json()["error_code"] == 50306
        assert "HUB_API_MAX_BUFFERED_BODY_BYTES" in crowded.json()["message"]
        assert after.status == 200  # every byte held was given back

    _in_loop(test)


def test_bodies_without_a_key_fill_only_their_share_and_a_team_still_sends_its_own() -> None:
    async def test() -> None:
        released = asyncio.Event()
        app = _app(released, max_anonymous_body_bytes=16 * KIB)
        anonymous = Exchange(path="/slow", headers=_declaring(16 * KIB))
        anonymous.give(b"x" * 16 * KIB, more=False)
        holding = asyncio.create_task(_run(app, anonymous))
        await asyncio.sleep(0.01)

        another = Exchange(headers=_declaring(KIB))
        another.give(b"x" * KIB, more=False)
        await _run(app, another)
        team = Exchange(headers=_declaring(KIB), caller=Principal("k1", TeamName("sales"), False))
        team.give(b"x" * KIB, more=False)
        await _run(app, team)
        released.set()
        await holding

        assert another.status == 503
        assert another.json()["error_code"] == 50306
        assert "HUB_API_MAX_ANONYMOUS_BODY_BYTES" in another.json()["message"]
        assert team.status == 200

    _in_loop(test)


def test_buffered_bytes_smaller_than_the_largest_body_are_refused_naming_both_settings() -> None:
    with pytest.raises(ValueError, match=r"HUB_API_MAX_BUFFERED_BODY_BYTES.*HUB_API_MAX_BODY"):
        ApiSettings(max_body_bytes=2 * KIB * KIB, max_buffered_body_bytes=KIB * KIB)


# Time


def test_a_stalled_body_gets_408_naming_the_idle_setting_and_its_connection_closed() -> None:
    async def test() -> None:
        app = _app(body_idle_timeout_seconds=0.05, body_timeout_seconds=60)
        stalled = Exchange(headers=_declaring(100))
        stalled.give(b'{"te', more=True)

        await _run(app, stalled)

        assert stalled.status == 408
        assert stalled.json()["error_code"] == 40801
        assert "HUB_API_BODY_IDLE_TIMEOUT_SECONDS" in stalled.json()["message"]
        assert stalled.response_headers[b"connection"] == b"close"

    _in_loop(test)


def test_a_body_that_trickles_past_the_whole_body_limit_gets_408_naming_that_setting() -> None:
    async def test() -> None:
        app = _app(body_idle_timeout_seconds=60, body_timeout_seconds=0.2)
        trickled = Exchange(headers=_declaring(100_000))

        async def trickle() -> None:
            for _ in range(1000):  # each part well within the idle limit
                trickled.give(b" ", more=True)
                await asyncio.sleep(0.01)

        feeding = asyncio.create_task(trickle())
        await _run(app, trickled)
        feeding.cancel()

        assert trickled.status == 408
        assert trickled.json()["error_code"] == 40801
        assert "HUB_API_BODY_TIMEOUT_SECONDS" in trickled.json()["message"]
        assert trickled.response_headers[b"connection"] == b"close"

    _in_loop(test)


def test_a_route_that_parses_a_model_answers_a_stalled_body_with_408_not_a_bare_400() -> None:
    async def test() -> None:
        app = _app(body_idle_timeout_seconds=0.05)
        stalled = Exchange(path="/notes", headers=_declaring(100))
        stalled.give(b'{"text"', more=True)

        await _run(app, stalled)

        assert stalled.status == 408
        assert stalled.json()["error_code"] == 40801

    _in_loop(test)


# Answers before the body


def test_an_answer_before_the_body_goes_out_at_once_and_ends_once_the_body_was_dropped() -> None:
    async def test() -> None:
        app = _app(body_drain_bytes=10 * KIB)
        early = Exchange(path="/refused", headers=_declaring(8 * KIB))
        for _ in range(8):
            early.give(b"x" * KIB, more=True)
        early.give(b"", more=False)

        await _run(app, early)

        assert early.status == 401
        assert early.json()["error_code"] == 40101
        assert early.taken_when_answered == 0  # a client that waits for it gets it
        assert early.taken == 9  # the whole body, so a client that sends it all reads it too
        assert early.answer[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
        assert early.response_headers[b"connection"] == b"close"

    _in_loop(test)


def test_a_body_declared_beyond_the_drain_bound_is_not_read_and_its_connection_closes() -> None:
    async def test() -> None:
        app = _app(body_drain_bytes=4 * KIB)
        early = Exchange(path="/refused", headers=_declaring(1_000_000))
        early.give(b"x" * KIB, more=True)

        await _run(app, early)

        assert early.status == 401
        assert early.taken == 0
        assert early.response_headers[b"connection"] == b"close"

    _in_loop(test)


def test_a_chunked_body_is_drained_up_to_the_bound_then_its_connection_closes() -> None:
    async def test() -> None:
        app = _app(body_drain_bytes=4 * KIB)
        early = Exchange(path="/refused", headers=[(b"transfer-encoding", b"chunked")])
        for _ in range(100):
            early.give(b"x" * KIB, more=True)

        await _run(app, early)

        assert early.status == 401
        assert early.taken == 5  # just past the bound, not the hundred parts sent
        assert early.response_headers[b"connection"] == b"close"

    _in_loop(test)


def test_a_client_waiting_for_100_continue_gets_the_answer_and_sends_nothing() -> None:
    async def test() -> None:
        app = _app()
        waiting = Exchange(path="/refused", headers=_declaring(2 * KIB, expect=b"100-continue"))

        await _run(app, waiting)

        assert waiting.status == 401
        assert waiting.taken == 0
        assert waiting.response_headers[b"connection"] == b"close"

    _in_loop(test)
