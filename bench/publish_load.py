"""The publish benchmarks' producers of records: the in-process ceiling; closed-loop HTTP
clients of the gateway on one asyncio loop, one keep-alive connection each; and the same
clients from wrk, a compiled load generator."""

import asyncio
import io
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

import fastavro
from confluent_kafka import KafkaError, Message, Producer

from bench.publish_stack import SCHEMA, TOPIC, Cpu, Stack, reading
from bench.servers import peak_rss_mb
from hub_kafka.security import client_config

BODY_VARIANTS = 4  # distinct request bodies per batch size, sent in turn
REQUEST_TIMEOUT_S = 60.0
MAX_REQUESTS_PER_CLIENT = 1_000_000


# -- the ceiling: the same records, encoded and produced in process -------------------------


class Ceiling:
    """One producer configured as the gateway's `FeedProducer`, fed framed fastavro records."""

    def __init__(self, stack: Stack, schema_id: int) -> None:
        self._producer = Producer(
            {
                **client_config(stack.kafka),
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": stack.kafka.linger_ms,
                "delivery.timeout.ms": stack.kafka.delivery_timeout_ms,
                "compression.type": "lz4",  # as hub_kafka/producer.py
            }
        )
        self._parsed = fastavro.parse_schema(SCHEMA)
        self._header = struct.pack(">bI", 0, schema_id)

    def run(self, duration_s: float) -> tuple[int, float]:
        """Produce for `duration_s`, then wait for every report: (records acknowledged, s)."""
        delivered, failed = 0, []

        def report(err: KafkaError | None, _msg: Message) -> None:
            nonlocal delivered
            if err is None:
                delivered += 1
            else:
                failed.append(err.str())

        started = time.monotonic()
        deadline = started + duration_s
        n = 0
        while time.monotonic() < deadline:
            for _ in range(1_000):
                buffer = io.BytesIO()
                fastavro.schemaless_writer(buffer, self._parsed, reading(n))
                value = self._header + buffer.getvalue()
                for _attempt in range(1_000):
                    try:
                        self._producer.produce(TOPIC, value=value, on_delivery=report)
                        break
                    except BufferError:
                        self._producer.poll(0.05)
                else:
                    raise RuntimeError("the producer's queue stayed full for 50 s")
                n += 1
            self._producer.poll(0)
        left = self._producer.flush(REQUEST_TIMEOUT_S)
        seconds = time.monotonic() - started
        if left or failed:
            raise RuntimeError(f"ceiling: {left} records unanswered, failures: {failed[:3]}")
        return delivered, seconds


# -- the load: closed-loop clients on one asyncio loop, one keep-alive connection each -------


class _Connection:
    """HTTP/1.1 keep-alive on one socket to 127.0.0.1; about 0.1 ms of CPU a request."""

    def __init__(self, port: int) -> None:
        self._port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, request: bytes) -> tuple[int, bytes]:
        try:
            return await asyncio.wait_for(self._exchange(request), timeout=REQUEST_TIMEOUT_S)
        except BaseException:
            await self.close()
            raise

    async def _exchange(self, request: bytes) -> tuple[int, bytes]:
        if self._reader is None or self._writer is None:
            self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self._port)
        reader = self._reader
        self._writer.write(request)
        status_line = await reader.readline()
        if not status_line:
            raise EOFError("the server closed the connection")
        status = int(status_line.split()[1])
        length, close = None, False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        if length is None:
            raise ValueError("an answer without Content-Length")
        body = await reader.readexactly(length)
        if close:
            await self.close()
        return status, body

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with suppress(OSError):
                await writer.wait_closed()


def prepared_requests(port: int, batch: int) -> list[bytes]:
    """`BODY_VARIANTS` complete HTTP requests of `batch` records each, encoded once."""
    requests = []
    for variant in range(BODY_VARIANTS):
        records = [{"value": reading(variant * batch + i)} for i in range(batch)]
        body = json.dumps({"records": records}, separators=(",", ":")).encode()
        head = (
            f"POST /v1/feeds/{TOPIC}/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        requests.append(head.encode() + body)
    return requests


@dataclass
class Load:
    """What the clients of one run saw."""

    records: int = 0
    errors: int = 0
    first_error: str = ""
    latencies_s: list[float] = field(default_factory=list)
    seconds: float = 0.0


async def run_clients(
    port: int, requests: list[bytes], *, batch: int, clients: int, duration_s: float
) -> Load:
    """`clients` closed-loop clients POSTing `requests` in turn for `duration_s` seconds."""
    load = Load()
    started = time.monotonic()
    deadline = started + duration_s
    finished = started

    async def client(number: int) -> None:
        nonlocal finished
        connection = _Connection(port)
        try:
            for sent in range(MAX_REQUESTS_PER_CLIENT):
                if time.monotonic() >= deadline:
                    return
                t0 = time.monotonic()
                try:
                    status, body = await connection.post(requests[(number + sent) % len(requests)])
                except (OSError, EOFError, TimeoutError, ValueError, IndexError) as exc:
                    load.errors += 1
                    load.first_error = load.first_error or repr(exc)
                    await asyncio.sleep(0.1)  # no hot loop against a server that is gone
                    continue
                t1 = time.monotonic()
                finished = max(finished, t1)
                load.latencies_s.append(t1 - t0)
                if status == 200:
                    load.records += batch
                else:
                    load.errors += 1
                    load.first_error = load.first_error or f"HTTP {status}: {body[:300]!r}"
        finally:
            await connection.close()

    await asyncio.gather(*(client(n) for n in range(clients)))
    load.seconds = max(1e-9, finished - started)
    return load


def run_gateway(
    stack: Stack, requests: list[bytes], *, batch: int, clients: int, duration_s: float
) -> tuple[Load, Cpu]:
    """One run of the clients against the stack's server, and the CPU it took everywhere."""
    before = Cpu.read(stack)
    load = asyncio.run(
        run_clients(stack.port, requests, batch=batch, clients=clients, duration_s=duration_s)
    )
    return load, Cpu.read(stack) - before


# -- the load from wrk: a compiled generator, beside the server on the same cores ------------

# wrk reads the prepared requests from files and sends them in turn, unchanged; at the end it
# prints one JSON line (its `done` hook) that `wrk_gateway` reads.
_WRK_SCRIPT = """
local requests, turn = {}, 0
for i = 1, %(count)d do
  local file = assert(io.open("%(folder)s/request-" .. i, "rb"))
  requests[i] = file:read("*a")
  file:close()
end
request = function()
  turn = turn %% #requests + 1
  return requests[turn]
end
done = function(summary, latency, _)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %%d, "duration_us": %%d, "connect": %%d, "read": %%d, "write": %%d, ' ..
    '"status": %%d, "timeout": %%d, "p50_us": %%d, "p99_us": %%d}\\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""


@dataclass(frozen=True, slots=True)
class WrkLoad:
    """What one wrk run saw, and the CPU wrk itself took."""

    requests: int  # answered with 2xx or 3xx
    errors: int  # other statuses, and socket errors
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_s: float
    peak_rss_mb: float


def wrk_gateway(
    stack: Stack, requests: list[bytes], *, clients: int, duration_s: float
) -> tuple[WrkLoad, Cpu]:
    """`clients` closed-loop connections from wrk (one thread) sending `requests` in turn for
    `duration_s` (whole seconds, at least 1), and the CPU the stack took meanwhile.

    wrk spends 20-30 µs of CPU a request where the Python clients above spend 50-90 µs; on a
    2-core machine that CPU is taken from the server being measured.
    """
    wrk = shutil.which("wrk")
    if wrk is None:
        raise RuntimeError("wrk is not installed: `make bench-tools` (or apt-get install wrk)")
    with tempfile.TemporaryDirectory(prefix="hub-bench-wrk-") as folder:
        for number, request in enumerate(requests, start=1):
            Path(folder, f"request-{number}").write_bytes(request)
        script = Path(folder, "requests.lua")
        script.write_text(_WRK_SCRIPT % {"count": len(requests), "folder": folder})
        seconds = max(1, round(duration_s))
        command = [wrk, "--threads", "1", "--connections", str(clients),
                   "--duration", f"{seconds}s", "--timeout", f"{int(REQUEST_TIMEOUT_S)}s",
                   "--script", str(script), f"http://127.0.0.1:{stack.port}/"]  # fmt: skip
        before = Cpu.read(stack)
        with Path(folder, "wrk.out").open("w+") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            peak_mb = 0.0
            while True:  # wrk's peak memory, sampled (a child's ru_maxrss counts its fork)
                peak_mb = max(peak_mb, peak_rss_mb(process.pid))
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)  # and its own CPU
                if pid:
                    break
                time.sleep(0.2)
            process.returncode = os.waitstatus_to_exitcode(status)
            used = Cpu.read(stack) - before
            out.seek(0)
            printed = out.read()
    lines = [line for line in printed.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({process.returncode}): {printed[-2000:]}")
    report = json.loads(lines[-1])
    errors = sum(report[k] for k in ("connect", "read", "write", "status", "timeout"))
    load = WrkLoad(
        requests=report["requests"] - report["status"],
        errors=errors,
        seconds=report["duration_us"] / 1e6,
        p50_ms=report["p50_us"] / 1000,
        p99_ms=report["p99_us"] / 1000,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=peak_mb,
    )
    return load, used
