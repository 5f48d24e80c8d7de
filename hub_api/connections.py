"""What a connection may cost before its request reaches the app: the time and the bytes of each
request's head (its request line and headers).

uvicorn 0.54 with httptools bounds neither. A connection that sends a request line and then a
header a minute is held for as long as it likes, and headers without end are kept in memory,
all before any middleware runs: the body limits and the write slots (hub_api/bodies.py) never
see such a request. `hub api serve` therefore runs uvicorn's httptools protocol with two bounds
of its own:

- a head must arrive within `HUB_API_HEADER_TIMEOUT_SECONDS` of the connection's opening, or
  of the first byte of a later request on it: otherwise the client gets 408 (40801) and the
  connection is closed (a connection that never sent a byte is closed without an answer);
- a head still unfinished once `HUB_API_MAX_HEADER_BYTES` of it have arrived gets 431
  (43101), and the connection is closed. (The bytes are counted per read from the socket, so
  a whole head that arrives in one read may be a little larger: at most a read's worth.)

Between the requests of a keep-alive connection, uvicorn's own `timeout_keep_alive` (5 s)
closes a connection that stays idle.
"""

import asyncio
import json
import logging
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from hub_api.settings import ApiSettings
from hub_core.errors import ErrorCode

log = logging.getLogger(__name__)


class BoundedHeads(HttpToolsProtocol):
    """uvicorn's httptools protocol, with each request head bounded in time and bytes."""

    head_timeout_s = 30.0
    max_head_bytes = 64 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: asyncio.TimerHandle | None = None
        self._in_head = True  # the parser is inside a head, or waits for the first one
        self._head_started = False  # a byte of the current head arrived
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return  # refused: whatever else arrives is not parsed
        super().data_received(data)
        if self._in_head and not self.transport.is_closing():
            # Counted by chunk, after parsing: httptools keeps a header value whole until it
            # ends, so counting the headers the parser hands on would miss an endless one.
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes:
                log.info("request head over %d bytes: answered 431", self.max_head_bytes)
                self._refuse(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    ErrorCode.REQUEST_HEADERS_TOO_LARGE,
                    f"The request line and headers are larger than {self.max_head_bytes} bytes "
                    "(HUB_API_MAX_HEADER_BYTES). Send fewer or shorter headers; the connection "
                    "is closed.",
                )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = self._head_started = True
        self._head_bytes = 0
        self._arm()

    def on_headers_complete(self) -> None:
        self._in_head = self._head_started = False
        self._disarm()
        super().on_headers_complete()

    def _arm(self) -> None:
        if self._timer is None:
            self._timer = self.loop.call_later(self.head_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._arm()  # an answer to an earlier request is still going out: not cut short
            return
        if not self._head_started:
            self.transport.close()  # opened and never used: nobody waits for an answer
            return
        log.info("request head took over %g s: answered 408", self.head_timeout_s)
        self._refuse(
            HTTPStatus.REQUEST_TIMEOUT,
            ErrorCode.REQUEST_TIMEOUT,
            f"The request line and headers did not arrive within {self.head_timeout_s:g} s "
            "(HUB_API_HEADER_TIMEOUT_SECONDS). Send them at once; the connection is closed.",
        )

    def _refuse(self, status: HTTPStatus, code: ErrorCode, message: str) -> None:
        """Answer the request whose head was refused with the hub's error body, and close."""
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # amid an earlier request's answer: no room for this one
            return
        body = json.dumps({"error_code": int(code), "message": message}).encode()
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
        )
        self.transport.write(head.encode() + body)
        self.transport.close()


def bounded_heads(settings: ApiSettings) -> type[BoundedHeads]:
    """The protocol class of a server with `settings`' bounds on request heads."""
    return type(
        "BoundedHeads",
        (BoundedHeads,),
        {
            "head_timeout_s": settings.header_timeout_seconds,
            "max_head_bytes": settings.max_header_bytes,
        },
    )
