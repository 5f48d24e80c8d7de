"""Where a publish request's time goes, in process, against the benchmark's real broker.

Run by `bench/publish.py --profile` after the load runs. It builds the app as a server process
does (`create_server_app`, garbage collector tuned) on the benchmark's SQLite database and broker
and runs its lifespan, then:

1. times each step of the gateway's path separately, without a profiler, for several batch
   sizes: the steps the route and `Publisher.publish_async` take, in their order, through the
   same public functions they call (`parse_publish_body`, `Publisher.codecs`, `PreparedBatch`,
   `FeedProducer.produce_encoded`, `publish_answer`);
2. times whole requests through the ASGI app, one at a time, and profiles them with cProfile,
   with the thread-pool hand-offs run inline so that the profiler sees the work.

It leaves out the HTTP server's share (uvicorn, httptools, the access log), which the over-HTTP
figures include: compare its total with the server's CPU per record in the table.
"""

import asyncio
import cProfile
import io
import json
import logging
import os
import pstats
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio.to_thread
import uvicorn
from fastapi import FastAPI
from pydantic_core import to_json
from starlette.types import Message

from bench.publish_load import Load, prepared_requests, run_clients
from bench.publish_stack import TOPIC, Stack, reading
from hub_api import ApiSettings
from hub_api.batches import load_json
from hub_api.gateway.body import parse_publish_body
from hub_api.gateway.models import publish_answer
from hub_api.server import create_server_app
from hub_api.services import hub_services
from hub_api.settings import AuthMode
from hub_cli.logs import configure_logging
from hub_kafka.producer import FeedProducer
from hub_kafka.settings import KafkaSettings
from publish.publisher import OnError, PreparedBatch, Publisher
from registry.compiled import compiled
from registry.settings import RegistrySettings
from registry.types import Subject

BATCHES = (1, 100, 500, 1000)
STEP_BUDGET_S = 2.0  # per batch size, for the step timings
REQUEST_BUDGET_S = 2.0  # per batch size, for the whole-request timings


def profile(stack: Stack) -> None:
    """Print the step timings and the profile of whole requests."""
    app = create_server_app(
        ApiSettings(auth=AuthMode.DISABLED),
        RegistrySettings(database_url=stack.database),
        KafkaSettings(bootstrap_servers=stack.bootstrap),
    )
    asyncio.run(_profile(app, stack.kafka))


async def _profile(app: FastAPI, kafka: KafkaSettings) -> None:
    async with app.router.lifespan_context(app):
        print("\nprofile: the gateway's steps, timed one by one (us per record, medians)")
        # A producer as the app's own (`FeedProducer` on the same settings), for the steps.
        producer = FeedProducer(kafka)
        try:
            steps = {batch: await _time_steps(app, producer, batch) for batch in BATCHES}
        finally:
            producer.close()
        names = list(next(iter(steps.values())))
        print(f"{'step':<52}" + "".join(f"{f'batch {b}':>12}" for b in BATCHES))
        for name in names:
            print(f"{name:<52}" + "".join(f"{steps[b][name]:>12.2f}" for b in BATCHES))
        print("\nprofile: whole requests through the ASGI app, one at a time, no HTTP server")
        for batch in BATCHES:
            wall, cpu = await _time_requests(app, batch)
            print(
                f"batch {batch:5d}: {wall * 1e6 / batch:8.1f} us/record wall, "
                f"{cpu * 1e6 / batch:8.1f} us/record CPU (all threads), "
                f"{wall * 1000:7.2f} ms/request"
            )
        for batch in (1, 500):
            await _profile_http(app, batch=batch, duration_s=3.0)


# -- 1. the steps, one by one ------------------------------------------------------------------


async def _time_steps(app: FastAPI, producer: FeedProducer, batch: int) -> dict[str, float]:
    """Per record microseconds of each step of one request of `batch` records (medians)."""
    services = hub_services(app)
    publisher: Publisher = services.publisher
    registry = services.registry
    feeds = services.feeds
    metrics = services.metrics
    max_records = services.settings.max_records_per_request
    raw = json.dumps({"records": [{"value": reading(n)} for n in range(batch)]}).encode()
    samples: dict[str, list[float]] = {}
    deadline = time.monotonic() + STEP_BUDGET_S
    for _ in range(10_000):
        if time.monotonic() > deadline and samples:
            break
        clock = _Clock(samples)
        with clock("load_json (body, pydantic-core)"):
            load_json(raw)
        with clock("parse_publish_body (incl. load_json)"):
            records, _version = parse_publish_body(
                raw, content_type="application/json", max_records=max_records
            )
        with clock("lookup: FeedService.get (SQL)"):
            feed = feeds.get(TOPIC)
        with clock("lookup: the latest schema version"):
            subject = Subject(f"{TOPIC}-value")
            version = registry.current(subject=subject)
        with clock("lookup: RegistryService.schema (SQL + cached parse)"):
            schema = registry.schema(schema_id=version.schema_id)
        with clock("Publisher.codecs (the 2 lookups above + key)"):
            codecs = publisher.codecs(feed)
        converter = compiled(schema)
        with clock("  compiled clean_to_datum (natural JSON -> datum)"):
            datums = [converter.clean_to_datum(r.value)[0] for r in records]
        with clock("  fastavro.schemaless_writer + frame"):
            for datum in datums:
                converter.encode(datum, version.schema_id)
        with clock("PreparedBatch (all of it, incl. the 2 above)"):
            prepared = PreparedBatch(records, codecs, on_error=OnError.REJECT)
        cpu_before, thread_before = time.process_time(), time.thread_time()
        with clock("produce_encoded (wall: enqueue + linger + broker)"):
            reports = producer.produce_encoded(prepared.items)
        samples.setdefault("produce_encoded: CPU of this thread (enqueue)", []).append(
            time.thread_time() - thread_before
        )
        samples.setdefault("produce_encoded: CPU of all threads, to last ack", []).append(
            time.process_time() - cpu_before
        )
        with clock("PreparedBatch.results -> PublishOutcome"):
            outcome = codecs.outcome(prepared.results(reports))
        with clock("metrics.record_publish (counters per request)"):
            metrics.record_publish(TOPIC, outcome, 0.0)
        with clock("publish_answer: plain dicts"):
            _status, content = publish_answer(TOPIC, outcome)
        with clock("render (pydantic-core to_json)"):
            to_json(content)
        with clock("the route's whole path (sequential, no HTTP)"):
            await _route_path(publisher, feeds, metrics, raw, max_records)
    return {name: statistics.median(values) * 1e6 / batch for name, values in samples.items()}


async def _route_path(
    publisher: Publisher, feeds: Any, metrics: Any, raw: bytes, max_records: int
) -> None:
    """What the route does for a request without an idempotency key, minus the hand-offs."""
    feed = feeds.get(TOPIC)
    records, _version = parse_publish_body(
        raw, content_type="application/json", max_records=max_records
    )
    codecs = publisher.codecs(feed)
    outcome = await publisher.publish_async(codecs, records, on_error=OnError.REJECT)
    metrics.record_publish(TOPIC, outcome, 0.0)
    _status, content = publish_answer(TOPIC, outcome)
    to_json(content)


class _Clock:
    def __init__(self, samples: dict[str, list[float]]) -> None:
        self._samples = samples

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self._samples.setdefault(name, []).append(time.perf_counter() - started)


# -- 2. whole requests, and cProfile -------------------------------------------------------


async def _call(app: FastAPI, body: bytes) -> int:
    """One POST through the ASGI app, as uvicorn would make it; returns the status."""
    path = f"/v1/feeds/{TOPIC}/records"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
        "state": {},
    }
    delivered = False
    status = 0

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # the client never disconnects
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def _time_requests(app: FastAPI, batch: int) -> tuple[float, float]:
    body = json.dumps({"records": [{"value": reading(n)} for n in range(batch)]}).encode()
    walls: list[float] = []
    cpus: list[float] = []
    deadline = time.monotonic() + REQUEST_BUDGET_S
    for _ in range(10_000):
        if time.monotonic() > deadline and walls:
            break
        wall, cpu = time.perf_counter(), time.process_time()
        status = await _call(app, body)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        assert status == 200, status
    return statistics.median(walls), statistics.median(cpus)


async def _inline(func: Callable[..., Any], *args: Any, **_options: Any) -> Any:
    """`anyio.to_thread.run_sync`, run on the calling thread instead (its options unused)."""
    return func(*args)


# (file, function) -> label; cumulative times, so nested lines are part of the line above.
_KEY_FUNCTIONS = (
    (("httptools_impl", "data_received"), "httptools: parse requests"),
    (("uvicorn/", "run_asgi"), "uvicorn: one request through the app"),
    (("hub_api/metrics.py", "__call__"), "  RequestMetrics middleware (all inside)"),
    (("gateway/lane.py", "__call__"), "    PublishLane (all inside)"),
    (("gateway/routes.py", "publish_request"), "    publish_request: the route's work"),
    (("hub_api/gateway/body.py", "parse_publish_body"), "      parse: load_json + plain_records"),
    (("publish/feeds.py", "current"), "      FeedService.current (SQL)"),
    (("publish/publisher.py", "codecs"), "      Publisher.codecs (registry lookups)"),
    (("registry/service.py", "current"), "        RegistryService.current"),
    (("registry/service.py", "version"), "        RegistryService.version (SQL)"),
    (("registry/service.py", "schema"), "        RegistryService.schema (SQL)"),
    (("publish/publisher.py", "publish_async"), "      Publisher.publish_async"),
    (("publish/publisher.py", "__init__"), "        PreparedBatch: check and encode each record"),
    (("publish/publisher.py", "_prepare"), "          _prepare (per record)"),
    (("registry/compiled.py", "clean_to_datum"), "            compiled clean_to_datum"),
    (("registry/compiled.py", "encode"), "            CompiledSchema.encode"),
    # fastavro's writer is Cython, invisible to cProfile: it is part of encode's own time.
    (("hub_kafka/producer.py", "_send_encoded"), "        FeedProducer._send_encoded"),
    (("hub_kafka/producer.py", "_send"), "          _send (callback + produce)"),
    (("publish/publisher.py", "results"), "        PreparedBatch.results (PublishResult)"),
    (("hub_api/metrics.py", "record_publish"), "      metrics.record_publish"),
    (("gateway/models.py", "publish_answer"), "      publish_answer (plain dicts)"),
    (("logging/__init__.py", "handle"), "uvicorn access log (Logger.handle)"),
)

# Own time by where the code lives: first match wins.
_PACKAGES = (
    ("hub_api/", "hub_api"),
    ("/publish/", "publish (publisher, feeds)"),
    ("hub_kafka/", "hub_kafka"),
    ("registry/", "registry (serde, store, service)"),
    ("catalog/", "catalog (feeds)"),
    ("hub_core/", "hub_core"),
    ("fastavro", "fastavro"),
    ("pydantic", "pydantic"),
    ("sqlalchemy", "SQLAlchemy + sqlite3"),
    ("sqlite3", "SQLAlchemy + sqlite3"),
    ("uvicorn/", "uvicorn + httptools"),
    ("httptools", "uvicorn + httptools"),
    ("starlette/", "starlette + fastapi"),
    ("fastapi/", "starlette + fastapi"),
    ("anyio/", "starlette + fastapi"),
    ("logging/", "logging (access log)"),
    ("hub_cli/logs", "logging (access log)"),
    ("prometheus_client", "prometheus_client"),
    ("concurrent/futures", "Future + locks"),
    ("threading.py", "Future + locks"),
    ("cimpl", "confluent-kafka (produce)"),
    ("json", "json"),
    ("asyncio/", "asyncio"),
    ("selectors", "asyncio"),
    ("socket", "asyncio"),
    ("re.py", "re"),
    ("Pattern", "re"),
)


async def _profile_http(app: FastAPI, *, batch: int, duration_s: float) -> None:
    """cProfile (thread CPU time) of the event-loop thread of a real uvicorn under load.

    Thread-pool hand-offs run inline, so the loop thread does all the request work the
    profiler can see; the delivery callbacks (poller thread) and librdkafka's own threads
    are counted apart, from the process's CPU time.
    """
    from tests.support.ports import free_port

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_config=None)
    )
    # As `hub api serve`: the access log at INFO through the hub's handler (to nowhere here).
    configure_logging()
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - lives with the process
    serving = asyncio.create_task(server.serve())
    for _ in range(300):
        if server.started:
            break
        await asyncio.sleep(0.05)
    requests = prepared_requests(port, batch)
    generator_cpu: list[float] = []
    load = Load()

    def generate() -> None:
        nonlocal load
        started = time.thread_time()
        load = asyncio.run(
            run_clients(port, requests, batch=batch, clients=2, duration_s=duration_s)
        )
        generator_cpu.append(time.thread_time() - started)

    # Every thread-pool hand-off (the route's lookups, FastAPI's sync dependencies) goes
    # through `anyio.to_thread.run_sync`; run inline, the loop thread does all the work.
    run_sync = anyio.to_thread.run_sync
    profiler = cProfile.Profile(time.thread_time)
    generator = threading.Thread(target=generate, name="generator")
    try:
        anyio.to_thread.run_sync = _inline  # type: ignore[assignment]
        process_before, loop_before = time.process_time(), time.thread_time()
        profiler.enable()
        generator.start()
        while generator.is_alive():
            await asyncio.sleep(0.05)
        profiler.disable()
        process_cpu = time.process_time() - process_before
        loop_cpu = time.thread_time() - loop_before
    finally:
        anyio.to_thread.run_sync = run_sync
        server.should_exit = True
        await asyncio.wait_for(serving, timeout=30)
    if load.errors or not load.records:
        print(f"profile run failed: {load.errors} errors, first: {load.first_error}")
        return
    records = load.records
    others = process_cpu - loop_cpu - sum(generator_cpu)
    print(
        f"\nprofile: uvicorn in process, batch {batch}, {len(load.latencies_s)} requests "
        f"({records} records); CPU per record: event-loop thread {loop_cpu / records * 1e6:.1f}"
        f" us (profiled: inflated several times by the profiler's per-call cost; read the "
        f"shares), other threads (delivery callbacks, librdkafka) {others / records * 1e6:.1f} us"
    )
    stats = pstats.Stats(profiler)
    entries = stats.stats.items()  # type: ignore[attr-defined]
    profiled = sum(tt for _key, (_cc, _nc, tt, _ct, _callers) in entries)
    print(f"{'function (cumulative CPU)':<48}{'us/record':>10}{'share':>8}")
    for (where, function), label in _KEY_FUNCTIONS:
        ct = sum(
            entry[3] for (file, _l, name), entry in entries if name == function and where in file
        )
        print(f"{label:<48}{ct * 1e6 / records:>10.2f}{ct / profiled:>8.1%}")
    by_package: dict[str, float] = {}
    for (file, _line, name), (_cc, _nc, tt, _ct, _callers) in entries:
        where = file if file != "~" else name
        package = next(
            (label for key, label in _PACKAGES if key in where),
            "builtins, generated __init__s, other",
        )
        by_package[package] = by_package.get(package, 0.0) + tt
    print(f"\n{'own CPU time by package':<48}{'us/record':>10}{'share':>8}")
    for package, tt in sorted(by_package.items(), key=lambda item: -item[1]):
        print(f"{package:<48}{tt * 1e6 / records:>10.2f}{tt / profiled:>8.1%}")
    print("\ntop functions by own CPU time:")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(20)
    print("\n".join(line for line in out.getvalue().splitlines()[6:] if line.strip()))
