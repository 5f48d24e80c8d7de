"""A small closed-loop load generator: N clients on one asyncio loop, one connection each.

It runs in the benchmark's own process, on the same machine as the server, so it competes with
the server for the cores. It is kept light: every run reports the CPU it used, so that a
saturated generator shows in the results.

Two HTTP clients: `raw` (the default) writes prepared HTTP/1.1 requests on a keep-alive socket
and reads the status and Content-Length body, about 0.1 ms of CPU a request; `httpx`
(one AsyncClient per client) costs about 1 ms a request here, as much as the server's whole
/healthz, which would make the generator, not the server, the ceiling.
"""

import asyncio
import json
import math
import random
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import httpx

from bench.servers import CpuMeter, CpuUse, PeakRss

Generator = Literal["raw", "httpx"]
MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Call:
    """One HTTP request to send: the method, the path and an already encoded body."""

    method: str
    path: str
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Connection(Protocol):
    async def send(self, call: Call) -> Reply: ...

    async def close(self) -> None: ...


class TransportError(Exception):
    """No (valid) answer came on the connection."""


class RawConnection:
    """HTTP/1.1 keep-alive on one socket to 127.0.0.1, reconnecting when the server closes."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._headers = f"Host: 127.0.0.1:{port}\r\nContent-Type: {MEDIA_TYPE}\r\nContent-Length: "
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def send(self, call: Call) -> Reply:
        try:
            return await asyncio.wait_for(self._exchange(call), timeout=_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError, ValueError, IndexError) as exc:
            await self.close()
            raise TransportError(repr(exc)) from exc

    async def _exchange(self, call: Call) -> Reply:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port)
        body = call.body or b""
        request = f"{call.method} {call.path} HTTP/1.1\r\n{self._headers}{len(body)}\r\n\r\n"
        self._writer.write(request.encode() + body)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" not in headers:
            raise ValueError(f"no Content-Length in the answer to {call.method} {call.path}")
        reply = Reply(
            int(status_line.split(" ", 2)[1]),
            await self._reader.readexactly(int(headers["content-length"])),
        )
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return reply

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with suppress(OSError):
                await writer.wait_closed()


class HttpxConnection:
    """An httpx.AsyncClient limited to one connection (a shared pool scans every connection
    on each request, which grows with the client count)."""

    def __init__(self, port: int) -> None:
        self._client = httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
            timeout=httpx.Timeout(_TIMEOUT_S),
            trust_env=False,  # no proxy from the environment: traffic stays on loopback
            headers={"Content-Type": MEDIA_TYPE},
        )

    async def send(self, call: Call) -> Reply:
        try:
            response = await self._client.request(call.method, call.path, content=call.body)
        except httpx.HTTPError as exc:
            raise TransportError(repr(exc)) from exc
        return Reply(response.status_code, response.content)

    async def close(self) -> None:
        await self._client.aclose()


@asynccontextmanager
async def connections(
    port: int, count: int, generator: Generator = "raw"
) -> AsyncIterator[list[Connection]]:
    """`count` connections to the server on 127.0.0.1:`port`, closed on the way out."""
    kind = RawConnection if generator == "raw" else HttpxConnection
    opened: list[Connection] = [kind(port) for _ in range(count)]
    try:
        yield opened
    finally:
        for connection in opened:
            await connection.close()


class Workload(Protocol):
    """What a scenario's clients send next; None when the scenario has no more work."""

    async def next(self) -> Call | None: ...

    def done(self, call: Call, reply: Reply | None) -> None:
        """The answer to `call`; None when no answer came."""


@dataclass
class RandomCalls:
    """Read scenarios: each request is drawn at random from a fixed list, without end."""

    calls: Sequence[Call]
    rng: random.Random = field(default_factory=lambda: random.Random(7))

    async def next(self) -> Call | None:
        return self.rng.choice(self.calls)

    def done(self, call: Call, reply: Reply | None) -> None:
        pass


@dataclass(frozen=True, slots=True)
class RunResult:
    """One measured run of one scenario."""

    requests: int
    errors: int
    seconds: float
    latencies: list[float]
    cpu: CpuUse
    peak_rss: PeakRss
    first_error: str | None = None

    @property
    def rps(self) -> float:
        return (self.requests - self.errors) / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return math.nan
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)] * 1000

    @property
    def server_us_per_request(self) -> float:
        return self.cpu.server / self.requests * 1e6 if self.requests else math.nan

    def cores(self, seconds: float) -> float:
        """CPU seconds as cores busy during this run."""
        return seconds / self.seconds if self.seconds else math.nan

    @property
    def host_busy(self) -> float:
        return self.cpu.host / self.cpu.host_capacity if self.cpu.host_capacity else math.nan


async def run(
    pool: Sequence[Connection],
    workload: Workload,
    *,
    duration_s: float,
    max_requests: int,
    meter: CpuMeter,
) -> RunResult:
    """Each connection runs a client loop until `duration_s` passed or `max_requests` were sent."""
    latencies: list[float] = []
    sent = 0
    errors = 0
    first_error: str | None = None
    deadline = time.perf_counter() + duration_s

    async def one_client(connection: Connection) -> None:
        nonlocal sent, errors, first_error
        while sent < max_requests and time.perf_counter() < deadline:
            call = await workload.next()
            if call is None:
                return
            sent += 1
            start = time.perf_counter()
            try:
                reply = await connection.send(call)
            except TransportError as exc:
                errors += 1
                first_error = first_error or f"{call.method} {call.path}: {exc}"
                workload.done(call, None)
                continue
            latencies.append(time.perf_counter() - start)
            if reply.status != 200:
                errors += 1
                first_error = first_error or (
                    f"{call.method} {call.path}: {reply.status} {reply.body[:300]!r}"
                )
            workload.done(call, reply)

    before = meter.read()
    started = time.perf_counter()
    # The deadline bounds each loop; the timeout is a backstop should a request hang.
    await asyncio.wait_for(
        asyncio.gather(*(one_client(c) for c in pool)), timeout=duration_s + 2 * _TIMEOUT_S
    )
    seconds = time.perf_counter() - started
    return RunResult(
        requests=sent,
        errors=errors,
        seconds=seconds,
        latencies=latencies,
        cpu=meter.read() - before,
        peak_rss=meter.peak_rss(),
        first_error=first_error,
    )


@dataclass(frozen=True, slots=True)
class Summary:
    """The medians of a scenario's repeated runs."""

    rps: float
    p50_ms: float
    p99_ms: float
    server_us_per_request: float
    server_cores: float
    database_cores: float
    generator_cores: float
    other_cores: float
    host_busy: float
    requests: int
    errors: int
    peak_rss: PeakRss  # as read after the last run: peaks only grow

    @classmethod
    def of(cls, runs: Sequence[RunResult]) -> "Summary":
        return cls(
            rps=statistics.median(r.rps for r in runs),
            p50_ms=statistics.median(r.percentile_ms(0.50) for r in runs),
            p99_ms=statistics.median(r.percentile_ms(0.99) for r in runs),
            server_us_per_request=statistics.median(r.server_us_per_request for r in runs),
            server_cores=statistics.median(r.cores(r.cpu.server) for r in runs),
            database_cores=statistics.median(r.cores(r.cpu.database_total) for r in runs),
            generator_cores=statistics.median(r.cores(r.cpu.generator) for r in runs),
            other_cores=statistics.median(r.cores(r.cpu.others) for r in runs),
            host_busy=statistics.median(r.host_busy for r in runs),
            requests=sum(r.requests for r in runs),
            errors=sum(r.errors for r in runs),
            peak_rss=runs[-1].peak_rss,
        )
