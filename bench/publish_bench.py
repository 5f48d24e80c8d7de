"""The publish benchmark's work: the stack it runs on, the ceiling, the load and the report."""

import argparse
import asyncio
import io
import json
import os
import platform
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import confluent_kafka
import fastavro
import httpx
from confluent_kafka import KafkaError, Message, Producer

from bench.servers import (
    api_server,
    host_cpu_ticks,
    process_cpu_seconds,
    process_tree_cpu_seconds,
)
from catalog.errors import TeamExists
from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_core.database import create_database_engine
from hub_kafka.local_broker import LocalBroker
from hub_kafka.settings import KafkaSettings
from migrations import migrate

REPO = Path(__file__).resolve().parents[1]
TOPIC = "bench.readings"
TEAM = "bench"
PARTITIONS = 3
SCHEMA = {
    "type": "record",
    "name": "Reading",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "sensor", "type": "string"},
        {"name": "celsius", "type": "double"},
        {"name": "taken_at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
TARGET_RATIO = 0.5
TARGET_MIN_BATCH = 500
BODY_VARIANTS = 4  # distinct request bodies per batch size, sent in turn
REQUEST_TIMEOUT_S = 60.0
MAX_REQUESTS_PER_CLIENT = 1_000_000
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def reading(n: int) -> dict[str, Any]:
    """Record `n`: as natural JSON for the gateway, and as the datum fastavro writes."""
    return {
        "id": n,
        "sensor": f"sensor-{n % 64:02d}",
        "celsius": 15.0 + (n % 400) / 20,
        "taken_at": 1_714_564_800_000 + n,
    }


# -- the stack: a broker and the API server, each its own process --------------------------


@dataclass(frozen=True, slots=True)
class Stack:
    base_url: str
    port: int
    bootstrap: str
    kafka: KafkaSettings  # the client settings the server runs with
    database: str
    server_pid: int
    broker_pid: int
    server_log: Path


@contextmanager
def running_stack(*, workers: int = 1) -> Iterator[Stack]:
    """A dedicated broker and `hub api serve` (`workers` processes) on free ports, in a
    temporary home."""
    from tests.support.ports import free_port

    home = Path(tempfile.mkdtemp(prefix="hub-bench-publish-"))
    jars = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "jars" / "kafka"
    broker = LocalBroker(
        KafkaSettings(
            broker_home=home / "kafka",
            broker_jars_dir=jars,
            broker_port=free_port(),
            controller_port=free_port(),
        )
    )
    try:
        _say(f"starting a Kafka broker ({jars})")
        status = broker.start()
        assert status.pid is not None
        database = f"sqlite:///{home / 'registry.db'}"
        migrate.upgrade(database)
        _register_team(database)
        with api_server(
            database, bootstrap_servers=broker.bootstrap_servers, workers=workers
        ) as server:
            yield Stack(
                base_url=server.base_url,
                port=server.port,
                bootstrap=broker.bootstrap_servers,
                kafka=KafkaSettings(bootstrap_servers=broker.bootstrap_servers),
                database=database,
                server_pid=server.pid,
                broker_pid=status.pid,
                server_log=server.log,
            )
    finally:
        broker.stop()
        shutil.rmtree(home, ignore_errors=True)


def _register_team(database: str) -> None:
    engine = create_database_engine(database)
    try:
        with suppress(TeamExists):
            TeamStore(engine).register(name=TeamName(TEAM))
    finally:
        engine.dispose()


def create_feed(stack: Stack) -> int:
    """Create the benchmark's feed through the API; return its value schema id."""
    with httpx.Client(base_url=stack.base_url, timeout=60, trust_env=False) as client:
        response = client.post(
            "/v1/feeds",
            json={
                "topic": TOPIC,
                "owner": TEAM,
                "kind": "event",
                "value_schema": json.dumps(SCHEMA),
                "partitions": PARTITIONS,
            },
        )
        if response.status_code != 201:
            raise RuntimeError(f"creating the feed failed: {response.status_code} {response.text}")
        latest = client.get(f"/subjects/{TOPIC}-value/versions/latest")
        latest.raise_for_status()
        return int(latest.json()["id"])


# -- CPU accounting ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds so far of the API server, the broker, this process and the whole machine."""

    server: float
    broker: float
    bench: float  # the load generator, or the ceiling's producer
    host: float  # every process of the machine

    @classmethod
    def read(cls, stack: Stack) -> "Cpu":
        return cls(
            process_tree_cpu_seconds(stack.server_pid),
            process_cpu_seconds(stack.broker_pid),
            time.process_time(),
            host_cpu_ticks()[0] / _CLOCK_TICKS,
        )

    def __sub__(self, other: "Cpu") -> "Cpu":
        return Cpu(
            self.server - other.server,
            self.broker - other.broker,
            self.bench - other.bench,
            self.host - other.host,
        )

    @property
    def others(self) -> float:
        """CPU seconds of processes outside the benchmark: other work on a shared machine."""
        return max(0.0, self.host - self.server - self.broker - self.bench)


# -- the ceiling: the same records, encoded and produced in process -------------------------


class Ceiling:
    """One producer configured as the gateway's `FeedProducer`, fed framed fastavro records."""

    def __init__(self, stack: Stack, schema_id: int) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": stack.bootstrap,
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


async def _run_clients(
    port: int, requests: list[bytes], *, batch: int, clients: int, duration_s: float
) -> Load:
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
    before = Cpu.read(stack)
    load = asyncio.run(
        _run_clients(stack.port, requests, batch=batch, clients=clients, duration_s=duration_s)
    )
    return load, Cpu.read(stack) - before


# -- rounds and the report --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    records_s: float
    requests_s: float
    p50_ms: float
    p99_ms: float
    server_us_per_record: float
    cores: tuple[float, float, float, float]  # server, broker, generator, other processes


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _sample(load: Load, cpu: Cpu) -> Sample:
    wall = load.seconds
    return Sample(
        records_s=load.records / wall,
        requests_s=len(load.latencies_s) / wall,
        p50_ms=_percentile(load.latencies_s, 0.50) * 1000,
        p99_ms=_percentile(load.latencies_s, 0.99) * 1000,
        server_us_per_record=cpu.server / max(1, load.records) * 1e6,
        cores=(cpu.server / wall, cpu.broker / wall, cpu.bench / wall, cpu.others / wall),
    )


def _median_sample(samples: list[Sample]) -> Sample:
    def med(get: Any) -> float:
        return statistics.median(get(s) for s in samples)

    return Sample(
        records_s=med(lambda s: s.records_s),
        requests_s=med(lambda s: s.requests_s),
        p50_ms=med(lambda s: s.p50_ms),
        p99_ms=med(lambda s: s.p99_ms),
        server_us_per_record=med(lambda s: s.server_us_per_record),
        cores=(
            med(lambda s: s.cores[0]),
            med(lambda s: s.cores[1]),
            med(lambda s: s.cores[2]),
            med(lambda s: s.cores[3]),
        ),
    )


def _say(text: str) -> None:
    print(text, flush=True)


def _code_version() -> str:
    def git(*args: str) -> str:
        result = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        )
        return result.stdout

    dirty = git("status", "--porcelain", "--", "hub_api", "hub_kafka", "registry", "catalog")
    changed = ", ".join(line[3:] for line in dirty.splitlines() if line.strip())
    commit = git("rev-parse", "--short", "HEAD").strip()
    return f"commit {commit}" + (f", uncommitted: {changed}" if changed else "")


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 round of 1 s runs")
    parser.add_argument("--batches", default="1,100,500,1000", help="records per request")
    parser.add_argument("--clients", default="1,2,4,8", help="concurrent clients")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the table has medians")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    parser.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="API worker processes (HUB_API_WORKERS); default: one per core",
    )
    parser.add_argument(
        "--profile", action="store_true", help="then profile the gateway in process"
    )
    parser.add_argument(
        "--profile-only", action="store_true", help="only the profile, no load runs"
    )
    options = parser.parse_args(argv)
    if options.profile_only:
        options.profile, options.repeats = True, 0
    if options.quick:
        options.repeats, options.duration = 1, 1.0
    options.batches = [int(b) for b in options.batches.split(",")]
    options.clients = [int(c) for c in options.clients.split(",")]
    return options


def main(argv: list[str] | None = None) -> int:
    options = _options(argv)
    began = time.monotonic()
    _say(
        f"publish gateway benchmark: {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"confluent-kafka {confluent_kafka.__version__} (librdkafka "
        f"{confluent_kafka.libversion()[0]}), fastavro {fastavro.__version__}; {_code_version()}"
    )
    _say(
        f"batches {options.batches} x clients {options.clients}, {options.repeats} round(s) of "
        f"{options.duration:.1f} s runs; API server with {options.workers} worker process(es)"
    )
    ceilings: list[float] = []
    ceiling_us: list[float] = []  # the producer's CPU per record
    samples: dict[tuple[int, int], list[Sample]] = {}
    errors = 0
    with running_stack(workers=options.workers) as stack:
        schema_id = create_feed(stack)
        _say(f"API server pid {stack.server_pid} at {stack.base_url}, broker {stack.bootstrap}")
        ceiling = Ceiling(stack, schema_id)
        requests = {b: prepared_requests(stack.port, b) for b in options.batches}
        _say("warming up")
        ceiling.run(0.5)
        for batch in options.batches if options.repeats else ():
            run_gateway(
                stack, requests[batch], batch=batch, clients=max(options.clients), duration_s=0.5
            )
        for round_number in range(1, options.repeats + 1):
            before = Cpu.read(stack)
            records, seconds = ceiling.run(options.duration)
            used = Cpu.read(stack) - before
            ceilings.append(records / seconds)
            ceiling_us.append(used.bench / records * 1e6)
            _say(
                f"[round {round_number}/{options.repeats}] ceiling (in-process producer): "
                f"{records / seconds:8.0f} records/s  producer {used.bench / records * 1e6:.1f} "
                f"us/record  cores producer/kafka/other {used.bench / seconds:.2f}/"
                f"{used.broker / seconds:.2f}/{used.others / seconds:.2f}"
            )
            for batch in options.batches:
                for clients in options.clients:
                    load, cpu = run_gateway(
                        stack,
                        requests[batch],
                        batch=batch,
                        clients=clients,
                        duration_s=options.duration,
                    )
                    sample = _sample(load, cpu)
                    samples.setdefault((batch, clients), []).append(sample)
                    errors += load.errors
                    failed = f"  ERRORS {load.errors}: {load.first_error}" if load.errors else ""
                    _say(
                        f"[round {round_number}/{options.repeats}] batch {batch:5d} x "
                        f"{clients} clients: {sample.records_s:8.0f} records/s "
                        f"{sample.requests_s:7.1f} req/s  p50 {sample.p50_ms:7.1f} ms  "
                        f"p99 {sample.p99_ms:7.1f} ms  server {sample.server_us_per_record:6.1f}"
                        f" us/record  cores srv/kafka/gen/other {_cores(sample)}{failed}"
                    )
        if options.repeats:
            _report(samples, ceilings, ceiling_us)
        if options.profile:
            from bench.publish_profile import profile

            profile(stack)
    _say(f"benchmark took {time.monotonic() - began:.0f} s")
    if errors:
        _say(f"{errors} requests failed: the figures above are not valid")
        return 1
    return 0  # the verdict is a finding, not an exit status


def _cores(sample: Sample) -> str:
    return "/".join(f"{c:.2f}" for c in sample.cores)


def _report(
    samples: dict[tuple[int, int], list[Sample]],
    ceilings: list[float],
    ceiling_us: list[float],
) -> bool:
    ceiling = statistics.median(ceilings)
    producer_us = statistics.median(ceiling_us)
    _say("")
    _say(
        f"ceiling, in-process producer (fastavro + framing + idempotent acks=all produce): "
        f"{ceiling:.0f} records/s (median of {', '.join(f'{c:.0f}' for c in ceilings)}), "
        f"{producer_us:.1f} us of CPU per record"
    )
    _say("")
    header = (
        f"{'batch':>6} {'clients':>7} {'records/s':>10} {'req/s':>8} {'p50 ms':>8} "
        f"{'p99 ms':>8} {'srv us/rec':>10} {'CPU x ceil':>10} {'cores srv/kafka/gen/other':>26}"
        f" {'x ceiling':>9} {'target':>6}"
    )
    _say(header)
    _say("-" * len(header))
    best: dict[int, tuple[float, int]] = {}
    for (batch, clients), runs in sorted(samples.items()):
        sample = _median_sample(runs)
        ratio = sample.records_s / ceiling
        target = "-"
        if batch >= TARGET_MIN_BATCH:
            target = "PASS" if ratio >= TARGET_RATIO else "FAIL"
            if ratio > best.get(batch, (-1.0, 0))[0]:
                best[batch] = (ratio, clients)
        _say(
            f"{batch:>6} {clients:>7} {sample.records_s:>10.0f} {sample.requests_s:>8.1f} "
            f"{sample.p50_ms:>8.1f} {sample.p99_ms:>8.1f} {sample.server_us_per_record:>10.1f} "
            f"{sample.server_us_per_record / producer_us:>10.1f} {_cores(sample):>26} "
            f"{ratio:>9.3f} {target:>6}"
        )
    passed = bool(best) and all(ratio >= TARGET_RATIO for ratio, _ in best.values())
    detail = ", ".join(f"batch {b}: {r:.3f} at {c} clients" for b, (r, c) in sorted(best.items()))
    _say("")
    _say(
        f"target: at batches of {TARGET_MIN_BATCH} or more the gateway reaches at least "
        f"{TARGET_RATIO:.0%} of the ceiling (best client count per batch): "
        f"{'PASS' if passed else 'FAIL'} ({detail or 'no such batch measured'})"
    )
    large = [
        _median_sample(runs).server_us_per_record
        for (batch, _clients), runs in samples.items()
        if batch >= TARGET_MIN_BATCH
    ]
    if large:
        # Records per second also depend on what else the cores run (the broker, the load
        # generator, other work: `cores` above); CPU per record does not, so say both.
        server_us = min(large)
        _say(
            f"CPU per record at batches of {TARGET_MIN_BATCH} or more (best row): server "
            f"{server_us:.1f} us, ceiling producer {producer_us:.1f} us, "
            f"{server_us / producer_us:.2f} x; one server process with a core of its own would "
            f"reach at most {producer_us / server_us:.2f} of a ceiling that also has one"
        )
    return passed
