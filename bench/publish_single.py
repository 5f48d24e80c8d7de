"""Single-record publishing: the feed route at batch 1, and the REST Proxy v3 stream against the
in-process ceiling, in one run.

    .venv/bin/python bench/publish_single.py [--quick] [--repeats 3] [--duration 4]
                                             [--clients 1,8] [--chunk 50] [--base COMMIT]
                                             [--load wrk|python]

Starts its own Kafka broker and `hub api serve` (one worker per core) on free ports, creates a
feed, and with `--base`, also serves the code of that commit (extracted with `git archive`) from
a second API process on the same broker and database. Then, in rounds that interleave them:

- the ceiling: `Publisher.publish_async` in this process, on the same records, already parsed,
  in groups of `--chunk` records with up to 64 groups awaiting Kafka at once, as the v3 endpoint
  keeps them, on uvloop with the server's garbage collection threshold: the same produce path
  without HTTP, JSON or reports;
- the stream: one `POST /v3/clusters/bench/topics/{topic}/records` with chunked transfer
  encoding, `--chunk` one-record messages (concatenated JSON) per chunk, reports read as they
  come; records per second counts the reports with `error_code` 200;
- batch 1: closed-loop clients POSTing one record per request to `/v1/feeds/{topic}/records`
  (`--clients` keep-alive connections), against this code and, with `--base`, the base
  commit's. The load comes from wrk (`make bench-tools`), one thread, 20-30 µs of CPU a
  request, so that the server keeps the cores; `--load python` uses this process's asyncio
  clients instead (50-90 µs a request).

It prints each run as it ends, then the medians: requests per second and server CPU per request
at batch 1 (with the ratio to the base and the targets: at most 0.5 ms, at least 5 times the
base), the stream's records per second against the ceiling's (target: at least half), and the
peak resident memory of every process it started. See bench/README.md.
"""

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

if __name__ == "__main__" and not __package__:
    # Run as a file, Python puts bench/ first on sys.path, where bench/registry.py would hide
    # the `registry` package; the repository root goes there instead.
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import httpx

from bench.publish_load import prepared_requests, run_gateway, wrk_gateway
from bench.publish_stack import (
    REPO,
    TOPIC,
    Cpu,
    Stack,
    create_feed,
    reading,
    running_stack,
    say,
)
from bench.servers import (
    peak_rss_mb,
    process_tree_peak_rss_mb,
    self_peak_rss_mb,
    stop_process,
)

GROUPS_IN_FLIGHT = 64  # as hub_api.rest_proxy.v3.MAX_GROUPS_IN_FLIGHT
STREAM_WINDOW = 4096  # records the stream client sends ahead of their reports
TARGET_CPU_MS = 0.5
TARGET_SPEEDUP = 5.0
TARGET_STREAM_RATIO = 0.5


@dataclass(frozen=True, slots=True)
class Batch1:
    requests_s: float
    cpu_ms: float  # server CPU (all processes and threads) per request
    errors: int
    load_ms: float  # the load generator's CPU per request
    load_peak_mb: float  # wrk's peak resident memory (0 for the in-process clients)
    p50_ms: float  # latency, as the clients saw it
    p99_ms: float


@dataclass(frozen=True, slots=True)
class Rate:
    records_s: float
    cpu_us: float  # CPU per record: the server's (stream) or this process's (ceiling)
    errors: int = 0


# -- the ceiling: the publisher alone, in this process --------------------------------------


class Ceiling:
    """`Publisher.publish_async` in groups of `chunk` records, `GROUPS_IN_FLIGHT` at once."""

    def __init__(self, stack: Stack, chunk: int) -> None:
        from publish.publisher import IncomingRecord
        from publish.services import publish_services
        from registry.settings import RegistrySettings

        self._services = publish_services(RegistrySettings(database_url=stack.database),
                                          stack.kafka)  # fmt: skip
        feed = self._services.feeds.current(TOPIC)
        self._codecs = self._services.publisher.codecs(feed)
        self._groups = [
            [IncomingRecord(reading(v * chunk + i)) for i in range(chunk)] for v in range(4)
        ]
        self._chunk = chunk

    def run(self, duration_s: float) -> Rate:
        """Publish for `duration_s` on the interpreter as a server process tunes it: uvloop
        (as uvicorn picks it) and the raised collection threshold of `create_server_app`."""
        import uvloop

        from hub_api.settings import ApiSettings

        threshold = gc.get_threshold()
        gc.set_threshold(ApiSettings.model_fields["gc_threshold"].default, *threshold[1:])
        try:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(self._run(duration_s))
        finally:
            gc.set_threshold(*threshold)

    async def _run(self, duration_s: float) -> Rate:
        publisher = self._services.publisher
        in_flight: deque[asyncio.Task[object]] = deque()
        accepted = sent = 0
        cpu0, started = time.process_time(), time.monotonic()
        deadline = started + duration_s
        while time.monotonic() < deadline:
            if len(in_flight) >= GROUPS_IN_FLIGHT:
                accepted += (await in_flight.popleft()).accepted  # type: ignore[attr-defined]
            group = self._groups[sent % len(self._groups)]
            in_flight.append(asyncio.ensure_future(publisher.publish_async(self._codecs, group)))
            sent += 1
            await asyncio.sleep(0)  # let the group hand its records over
        for task in in_flight:
            accepted += (await task).accepted  # type: ignore[attr-defined]
        seconds = time.monotonic() - started
        cpu = time.process_time() - cpu0
        return Rate(accepted / seconds, cpu / max(1, accepted) * 1e6,
                    sent * self._chunk - accepted)  # fmt: skip

    def close(self) -> None:
        self._services.close()


# -- the stream: one chunked v3 produce request --------------------------------------------


def stream_chunks(chunk: int) -> list[bytes]:
    """A few chunks of `chunk` one-record v3 messages each, in chunked transfer framing."""
    import json

    chunks = []
    for variant in range(4):
        body = b"".join(
            json.dumps({"value": {"data": reading(variant * chunk + i)}},
                       separators=(",", ":")).encode()
            for i in range(chunk)
        )  # fmt: skip
        chunks.append(f"{len(body):x}\r\n".encode() + body + b"\r\n")
    return chunks


async def run_stream(port: int, chunks: list[bytes], chunk: int, duration_s: float) -> Rate:
    """Stream records for `duration_s`, reading the reports as they come. A stream the server
    ends at its body limit (HUB_API_MAX_BODY_BYTES, a 41301 report) is followed by a new one,
    as a client would do; records per second count the reports with `error_code` 200."""
    started = time.monotonic()
    deadline = started + duration_s
    ok = failed = 0
    last = started
    while time.monotonic() < deadline:
        one = await asyncio.wait_for(_one_stream(port, chunks, chunk, deadline), duration_s + 120)
        ok, failed, last = ok + one[0], failed + one[1], max(last, one[2])
    return Rate(ok / max(1e-9, last - started), 0.0, failed)


async def _one_stream(
    port: int, chunks: list[bytes], chunk: int, deadline: float
) -> tuple[int, int, float]:
    """One streaming request until `deadline` or until the server ends it: (reports with
    200, other reports, when the last report came)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /v3/clusters/bench/topics/{TOPIC}/records HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    answered, ended = asyncio.Event(), asyncio.Event()
    counts = {"sent": 0, "ok": 0, "failed": 0}
    last = time.monotonic()

    async def send() -> None:
        n = 0
        try:
            while time.monotonic() < deadline and not ended.is_set():
                while counts["sent"] - counts["ok"] - counts["failed"] > STREAM_WINDOW:
                    answered.clear()
                    await asyncio.wait_for(answered.wait(), 60)
                    if ended.is_set():
                        return
                writer.write(chunks[n % len(chunks)])
                await writer.drain()
                counts["sent"] += chunk
                n += 1
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        except OSError:  # the server ended the answer and closed: `receive` has the reports
            pass

    async def receive() -> None:
        nonlocal last
        try:
            status = await reader.readline()
            if b" 200 " not in status:
                raise RuntimeError(f"the stream was refused: {status!r} {await reader.read(300)!r}")
            while await reader.readline() not in (b"\r\n", b""):
                pass
            pending = b""
            while size := int((await reader.readline()).split(b";")[0] or b"0", 16):
                data = pending + (await reader.readexactly(size + 2))[:-2]
                *lines, pending = data.split(b"\n")
                for line in lines:  # the reports render `error_code` first
                    if line.startswith(b'{"error_code":200,'):
                        counts["ok"] += 1
                    elif not line.startswith(b'{"error_code":41301,'):  # the body limit
                        counts["failed"] += 1
                last = time.monotonic()
                answered.set()
        finally:
            ended.set()
            answered.set()

    try:
        await asyncio.gather(send(), receive())
    finally:
        writer.close()
    return counts["ok"], counts["failed"], last


# -- the servers ------------------------------------------------------------------------------


@contextmanager
def base_server(stack: Stack, commit: str, workers: int) -> Iterator[Stack]:
    """`hub api serve` of `commit`'s code on the stack's broker and database: the stack as
    seen through it."""
    from tests.support.ports import free_port

    home = Path(tempfile.mkdtemp(prefix="hub-bench-base-"))
    code = home / "code"
    code.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=REPO, capture_output=True,
                             check=True, timeout=120).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True, timeout=120)
    port = free_port()
    env = {
        **os.environ,
        "HUB_HOME": str(home),
        "HUB_API_HOST": "127.0.0.1",
        "HUB_API_PORT": str(port),
        "HUB_API_AUTH": "disabled",
        "HUB_API_WORKERS": str(workers),
        "HUB_REGISTRY_DATABASE_URL": stack.database,
        "HUB_KAFKA_BOOTSTRAP_SERVERS": stack.bootstrap,
    }
    with (home / "api.log").open("wb") as log:
        # cwd first on sys.path: the server imports the commit's packages, not this tree's.
        process = subprocess.Popen([sys.executable, "-m", "hub_cli.main", "api", "serve"],
                                   cwd=code, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT)  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the base server did not start: see {home / 'api.log'}")
            time.sleep(0.2)
        yield replace(stack, base_url=url, port=port, server_pid=process.pid)
    finally:
        stop_process(process)
        shutil.rmtree(home, ignore_errors=True)


def batch1(
    stack: Stack, requests: list[bytes], clients: int, duration_s: float, generator: str
) -> Batch1:
    if generator == "wrk":
        answered, cpu = wrk_gateway(stack, requests, clients=clients, duration_s=duration_s)
        done, seconds, errors = answered.requests, answered.seconds, answered.errors
        load_ms, peak_mb = answered.cpu_s / max(1, done) * 1000, answered.peak_rss_mb
        p50_ms, p99_ms = answered.p50_ms, answered.p99_ms
    else:
        load, cpu = run_gateway(stack, requests, batch=1, clients=clients, duration_s=duration_s)
        done, seconds, errors = len(load.latencies_s), load.seconds, load.errors
        load_ms, peak_mb = cpu.bench / max(1, done) * 1000, 0.0
        cuts = statistics.quantiles(load.latencies_s, n=100) if done > 1 else [0.0] * 99
        p50_ms, p99_ms = cuts[49] * 1000, cuts[98] * 1000
    cpu_ms = cpu.server / max(1, done) * 1000
    return Batch1(done / seconds, cpu_ms, errors, load_ms, peak_mb, p50_ms, p99_ms)


def stream(stack: Stack, chunks: list[bytes], chunk: int, duration_s: float) -> Rate:
    before = Cpu.read(stack)
    rate = asyncio.run(run_stream(stack.port, chunks, chunk, duration_s))
    used = Cpu.read(stack) - before
    records = rate.records_s * duration_s
    return replace(rate, cpu_us=used.server / max(1.0, records) * 1e6)


# -- rounds and report ------------------------------------------------------------------------


def _options(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1 round of 1.5 s runs")
    parser.add_argument("--repeats", type=int, default=3, help="rounds; the report has medians")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per run")
    parser.add_argument("--clients", default="1,8", help="batch-1 client counts")
    parser.add_argument("--chunk", type=int, default=50, help="records per stream chunk")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--load", choices=("wrk", "python"), default="wrk",
                        help="batch 1's load generator: wrk (compiled), or this process's "
                        "asyncio clients")  # fmt: skip
    parser.add_argument("--base", help="also serve this commit's code (e.g. 908ead3)")
    options = parser.parse_args(argv)
    if options.quick:
        options.repeats, options.duration = 1, 1.5
    options.clients = [int(c) for c in options.clients.split(",")]
    return options


def main(argv: list[str] | None = None) -> int:
    options = _options(argv)
    began = time.monotonic()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    say(f"single-record publishing: {os.cpu_count()} cores; code {commit}"
        + (f", base {options.base}" if options.base else "")
        + f"; {options.repeats} round(s) of {options.duration:.1f} s runs, "
        f"{options.workers} API worker(s), stream chunks of {options.chunk} records")  # fmt: skip
    ceilings: list[Rate] = []
    streams: list[Rate] = []
    rows: dict[tuple[str, int], list[Batch1]] = {}
    errors = 0
    with running_stack(workers=options.workers) as stack, _maybe_base(stack, options) as base:
        create_feed(stack)
        targets = {"this code": stack} | ({f"base {options.base}": base} if base else {})
        requests = {name: prepared_requests(s.port, 1) for name, s in targets.items()}
        chunks = stream_chunks(options.chunk)
        ceiling = Ceiling(stack, options.chunk)
        try:
            say("warming up")
            ceiling.run(0.5)
            stream(stack, chunks, options.chunk, 0.5)
            for name, target in targets.items():
                batch1(target, requests[name], max(options.clients), 1.0, options.load)
            for round_number in range(1, options.repeats + 1):
                tag = f"[round {round_number}/{options.repeats}]"
                ceilings.append(c := ceiling.run(options.duration))
                say(f"{tag} ceiling, publisher in process: {c.records_s:8.0f} records/s "
                    f"{c.cpu_us:6.1f} us CPU/record")  # fmt: skip
                streams.append(s := stream(stack, chunks, options.chunk, options.duration))
                errors += s.errors + c.errors
                say(f"{tag} v3 stream: {s.records_s:8.0f} records/s  server "
                    f"{s.cpu_us:6.1f} us CPU/record  errors {s.errors}")  # fmt: skip
                for name, target in targets.items():
                    for clients in options.clients:
                        b = batch1(target, requests[name], clients, options.duration, options.load)
                        rows.setdefault((name, clients), []).append(b)
                        errors += b.errors
                        say(
                            f"{tag} batch 1, {name}, {clients} client(s): {b.requests_s:7.1f} "
                            f"req/s  server {b.cpu_ms:5.2f} ms CPU/request  {options.load} "
                            f"{b.load_ms:5.2f} ms CPU/request  p50 {b.p50_ms:5.2f} ms  "
                            f"p99 {b.p99_ms:5.2f} ms  errors {b.errors}"
                        )
            _report(options, ceilings, streams, rows, base is not None)
            say("")
            say("peak resident memory (MB):")
            say(f"  Kafka broker (pid {stack.broker_pid}): {peak_rss_mb(stack.broker_pid):.0f}")
            for name, target in targets.items():
                tree = process_tree_peak_rss_mb(target.server_pid)
                say(f"  API server, {name}: "
                    + ", ".join(f"pid {pid} {mb:.0f}" for pid, mb in tree.items()))  # fmt: skip
            if options.load == "wrk":
                wrk_mb = max(b.load_peak_mb for runs in rows.values() for b in runs)
                say(f"  wrk (batch 1's load): {wrk_mb:.0f}")
            say(
                "  this benchmark (the ceiling, the stream's client"
                + (")" if options.load == "wrk" else ", batch 1's clients)")
                + f": {self_peak_rss_mb():.0f}"
            )
        finally:
            ceiling.close()
    say(f"benchmark took {time.monotonic() - began:.0f} s")
    if errors:
        say(f"{errors} requests or records failed: the figures above are not valid")
        return 1
    return 0


@contextmanager
def _maybe_base(stack: Stack, options: argparse.Namespace) -> Iterator[Stack | None]:
    if not options.base:
        yield None
        return
    with base_server(stack, options.base, options.workers) as base:
        yield base


def _report(
    options: argparse.Namespace,
    ceilings: list[Rate],
    streams: list[Rate],
    rows: dict[tuple[str, int], list[Batch1]],
    with_base: bool,
) -> None:
    def median(values: list[float]) -> float:
        return statistics.median(values)

    say("")
    say("batch 1, POST /v1/feeds/{topic}/records, one record per request (medians):")
    say(f"{'code':>18} {'clients':>7} {'req/s':>8} {'x base':>7} {'CPU ms/req':>10} "
        f"{'x base':>7} {'targets (<= 0.5 ms, >= 5x base req/s)':>40}")  # fmt: skip
    for clients in options.clients:
        base_rows = next((r for (n, c), r in rows.items() if c == clients and n != "this code"),
                         None)  # fmt: skip
        for (name, c), runs in rows.items():
            if c != clients:
                continue
            req_s = median([r.requests_s for r in runs])
            cpu = median([r.cpu_ms for r in runs])
            ratio_req = ratio_cpu = "-"
            verdict = "-"
            if base_rows is not None and name == "this code":
                base_req = median([r.requests_s for r in base_rows])
                base_cpu = median([r.cpu_ms for r in base_rows])
                ratio_req, ratio_cpu = f"{req_s / base_req:.2f}", f"{cpu / base_cpu:.2f}"
                verdict = (
                    f"CPU {'PASS' if cpu <= TARGET_CPU_MS else 'FAIL'}, req/s "
                    f"{'PASS' if req_s >= TARGET_SPEEDUP * base_req else 'FAIL'}"
                )
            elif name == "this code":
                verdict = f"CPU {'PASS' if cpu <= TARGET_CPU_MS else 'FAIL'}"
            say(f"{name:>18} {c:>7} {req_s:>8.1f} {ratio_req:>7} {cpu:>10.2f} {ratio_cpu:>7} "
                f"{verdict:>40}")  # fmt: skip
            if base_rows is not None and name == "this code":
                # Each round's pair shares its moment of the machine: the steadier comparison.
                paired = [a.requests_s / b.requests_s for a, b in zip(runs, base_rows, strict=True)]
                say(f"{'':>26} req/s x base, round by round: "
                    + ", ".join(f"{r:.2f}" for r in paired)
                    + f" (median {median(paired):.2f})")  # fmt: skip
    if not with_base:
        say("(run with --base COMMIT to measure the base in the same run)")
    ceiling = median([c.records_s for c in ceilings])
    streamed = median([s.records_s for s in streams])
    say("")
    say(f"ceiling, Publisher.publish_async in process (groups of {options.chunk}, "
        f"{GROUPS_IN_FLIGHT} in flight): {ceiling:.0f} records/s, "
        f"{median([c.cpu_us for c in ceilings]):.1f} us CPU/record")  # fmt: skip
    say(f"v3 stream, one-record messages, chunks of {options.chunk}: {streamed:.0f} records/s, "
        f"server {median([s.cpu_us for s in streams]):.1f} us CPU/record")  # fmt: skip
    verdict = "PASS" if streamed >= TARGET_STREAM_RATIO * ceiling else "FAIL"
    say(f"stream / ceiling: {streamed / ceiling:.2f} (target >= {TARGET_STREAM_RATIO}: {verdict})")


if __name__ == "__main__":
    sys.exit(main())
