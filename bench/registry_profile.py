"""Where a registry request spends its time: the app called in process, profiled with cProfile.

    .venv/bin/python -m bench.registry_profile      (or bench/registry.py --profile)

The app is built by `create_app` on a temporary SQLite database and called as an ASGI app from
one asyncio loop, one request at a time: no HTTP server, no load generator. Sync endpoints and
dependencies run inline instead of in the thread pool, so that cProfile (which follows one
thread) sees all the work. Kafka is replaced by a stub: registry routes never use it. What this
leaves out is the HTTP server's share (uvicorn, httptools, the access log, the thread hand-off),
which the over-HTTP benchmark shows as the cost of GET /healthz.
"""

import asyncio
import cProfile
import itertools
import json
import pstats
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.dataset import lookup_subject, record_schema, registration_subject, schema_body
from bench.servers import NO_KAFKA

_MEDIA_TYPE = b"application/vnd.schemaregistry.v1+json"
_SUBJECTS = 50
_VERSIONS = 3
_WARMUP = 50
_ROUNDS = 3  # timed rounds per endpoint; the median counts

# Functions whose cumulative time is reported, when they take a visible share.
_FOCUS: tuple[tuple[str, str, str], ...] = (
    ("RegistryService.lookup", "registry/service.py", "lookup"),
    ("RegistryService.register", "registry/service.py", "register"),
    ("RegistryService.schema", "registry/service.py", "schema"),
    ("SchemaStore.versions (1 query + 1 per version)", "registry/store.py", "versions"),
    ("SchemaStore.find", "registry/store.py", "find"),
    ("SchemaStore.get", "registry/store.py", "get"),
    ("SchemaStore.register", "registry/store.py", "register"),
    ("store._references (one query per schema)", "registry/store.py", "_references"),
    ("ConfigStore.get (mode, compatibility)", "registry/config.py", "get"),
    ("avro.parse (json, inline, fastavro, fingerprints)", "registry/avro.py", "parse"),
    ("avro.normalized", "registry/avro.py", "normalized"),
    ("compatibility.check", "registry/compatibility.py", "check"),
    ("SQLAlchemy Session.execute", "sqlalchemy/orm/session.py", "_execute_internal"),
    ("SQLAlchemy statement building (coercions)", "sqlalchemy/sql/coercions.py", "expect"),
    (
        "FastAPI dependencies and body validation",
        "fastapi/dependencies/utils.py",
        "solve_dependencies",
    ),
    ("FastAPI response validation and serialization", "fastapi/routing.py", "serialize_response"),
)


@dataclass
class SqlCounter:
    """Statements, transactions and cursor time of every engine, from SQLAlchemy events."""

    statements: int = 0
    transactions: int = 0
    seconds: float = 0.0
    _started: list[float] = field(default_factory=list)

    def before(self, *_: Any) -> None:
        self.statements += 1
        self._started.append(time.perf_counter())

    def after(self, *_: Any) -> None:
        self.seconds += time.perf_counter() - self._started.pop()

    def begin(self, *_: Any) -> None:
        self.transactions += 1

    def reset(self) -> None:
        self.statements = self.transactions = 0
        self.seconds = 0.0


@dataclass(frozen=True, slots=True)
class EndpointProfile:
    name: str
    requests: int
    us_per_request: float
    statements: float
    transactions: float
    sql_us: float
    stats: pstats.Stats


_KAFKA_CLIENTS = ("FeedProducer", "TransactionalProducers", "TopicAdmin")


class _NoKafka:
    """Stands in for the app's Kafka clients: registry routes never use them."""

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def close(self) -> None:
        pass


Send = Callable[[str, str, bytes], Awaitable[tuple[int, bytes]]]


def profile_endpoints(requests: int = 200) -> list[EndpointProfile]:
    """Profile each registry endpoint in process and print where its time goes."""
    with _temporary_sqlite() as url, _inline_sync_calls(), _counting_sql() as sql:
        profiles = asyncio.run(_profile_all(url, requests, sql))
    for line in report(profiles):
        print(line)
    return profiles


async def _profile_all(url: str, requests: int, sql: SqlCounter) -> list[EndpointProfile]:
    import hub_api.app
    from hub_api import ApiSettings, create_app
    from hub_kafka.settings import KafkaSettings
    from migrations import migrate
    from registry.settings import RegistrySettings

    migrate.upgrade(url)
    for name in _KAFKA_CLIENTS:  # registry routes never use Kafka
        if hasattr(hub_api.app, name):
            setattr(hub_api.app, name, _NoKafka)
    app = create_app(
        ApiSettings.model_validate({"auth": "disabled"}),  # registry writes need no API key
        RegistrySettings(database_url=url),
        KafkaSettings(bootstrap_servers=NO_KAFKA),
    )
    send = _asgi_sender(app)
    async with app.router.lifespan_context(app):
        ids = []
        for index in range(_SUBJECTS):
            for version in range(1, _VERSIONS + 1):
                body = schema_body(record_schema(index, version=version))
                ids.append(
                    await _ok(send, "POST", f"/subjects/{lookup_subject(index)}/versions", body)
                )
        pairs = [(i, v) for i in range(_SUBJECTS) for v in range(1, _VERSIONS + 1)]
        lookups = [(lookup_subject(i), schema_body(record_schema(i, version=v))) for i, v in pairs]
        reads: dict[str, Callable[[int], tuple[str, str, bytes]]] = {
            "GET /healthz": lambda k: ("GET", "/healthz", b""),
            "GET /schemas/ids/{id}": lambda k: ("GET", f"/schemas/ids/{ids[k % len(ids)]}", b""),
            "POST /subjects/{s} lookup": lambda k: (
                "POST",
                f"/subjects/{lookups[k % len(lookups)][0]}",
                lookups[k % len(lookups)][1],
            ),
        }
        profiles = [await _profile(name, make, send, requests, sql) for name, make in reads.items()]
        profiles.append(await _profile_registrations(send, requests, sql))
    return profiles


async def _profile(
    name: str,
    make: Callable[[int], tuple[str, str, bytes]],
    send: Send,
    requests: int,
    sql: SqlCounter,
) -> EndpointProfile:
    """`make(k)` gives request k: a warm-up, rounds of `requests` timed, `requests` profiled."""
    numbers = itertools.count()

    async def send_next(count: int) -> None:
        for _ in range(count):
            await _ok(send, *make(next(numbers)))

    await send_next(_WARMUP)  # caches and code paths
    sql.reset()
    rounds = []
    for _ in range(_ROUNDS):
        # CPU time of this process, not wall time: other work on the machine does not count.
        started = time.process_time()
        await send_next(requests)
        rounds.append(time.process_time() - started)
    timed = _ROUNDS * requests
    statements, transactions, sql_seconds = sql.statements, sql.transactions, sql.seconds
    profiler = cProfile.Profile()
    profiler.enable()
    await send_next(requests)
    profiler.disable()
    return EndpointProfile(
        name=name,
        requests=requests,
        us_per_request=statistics.median(rounds) / requests * 1e6,
        statements=statements / timed,
        transactions=transactions / timed,
        sql_us=sql_seconds / timed * 1e6,
        stats=pstats.Stats(profiler),
    )


async def _profile_registrations(send: Send, requests: int, sql: SqlCounter) -> EndpointProfile:
    """New compatible versions 2, 3, ... of fresh subjects, round robin, as the benchmark does."""
    requests = max(10, requests // 3)
    subjects = (_WARMUP + (_ROUNDS + 1) * requests) // 6  # versions 2 to 7, as in the benchmark
    names = [registration_subject("profile", i) for i in range(subjects)]
    for index, name in enumerate(names):
        body = schema_body(record_schema(index, version=1))
        await _ok(send, "POST", f"/subjects/{name}/versions", body)

    def make(k: int) -> tuple[str, str, bytes]:
        index, extra = k % subjects, 1 + k // subjects
        body = schema_body(record_schema(index, version=1, extra_fields=extra))
        return "POST", f"/subjects/{names[index]}/versions", body

    return await _profile("POST /subjects/{s}/versions register", make, send, requests, sql)


async def _ok(send: Send, method: str, path: str, body: bytes) -> int:
    status, answer = await send(method, path, body)
    if status != 200:
        raise RuntimeError(f"{method} {path}: {status} {answer[:300]!r}")
    found = json.loads(answer)
    return int(found["id"]) if isinstance(found, dict) and "id" in found else 0


def _asgi_sender(app: Any) -> Send:
    async def send(method: str, path: str, body: bytes) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"bench"),
                (b"content-type", _MEDIA_TYPE),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
            "state": {},
        }
        delivered = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if delivered:
                return {"type": "http.disconnect"}
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def reply(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await app(scope, receive, reply)
        return status, b"".join(chunks)

    return send


@contextmanager
def _temporary_sqlite() -> Iterator[str]:
    root = Path(tempfile.mkdtemp(prefix="hub-bench-profile-"))
    try:
        yield f"sqlite:///{root / 'registry.db'}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def _inline_sync_calls() -> Iterator[None]:
    """Run sync endpoints and dependencies on the calling thread, where cProfile looks."""
    import fastapi.dependencies.utils
    import fastapi.routing

    async def inline(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    name = "run_in_threadpool"  # each module imported it from starlette under this name
    modules = (fastapi.routing, fastapi.dependencies.utils)
    saved = [getattr(module, name) for module in modules]
    for module in modules:
        setattr(module, name, inline)
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            setattr(module, name, original)


@contextmanager
def _counting_sql() -> Iterator[SqlCounter]:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    counter = SqlCounter()
    hooks = (
        ("before_cursor_execute", counter.before),
        ("after_cursor_execute", counter.after),
        ("begin", counter.begin),
    )
    for name, hook in hooks:
        event.listen(Engine, name, hook)
    try:
        yield counter
    finally:
        for name, hook in hooks:
            event.remove(Engine, name, hook)


def report(profiles: list[EndpointProfile]) -> Iterator[str]:
    yield (
        "In-process profile (SQLite, one request at a time, no HTTP server): CPU time per "
        "request without the profiler;\nSQL statements, transactions and cursor time per "
        "request from SQLAlchemy engine events."
    )
    header = f"{'endpoint':<38}{'CPU us':>8}{'SQL stmts':>11}{'txns':>6}{'SQL us':>8}"
    yield header
    yield "-" * len(header)
    for p in profiles:
        yield (
            f"{p.name:<38}{p.us_per_request:>8.0f}{p.statements:>11.1f}{p.transactions:>6.1f}"
            f"{p.sql_us:>8.0f}"
        )
    for p in profiles[1:]:
        yield ""
        yield (
            f"{p.name}: {p.us_per_request:.0f} us of CPU a request; cProfile's shares of "
            "its time, and those shares of the CPU time:"
        )
        total = _total(p.stats)
        for label, share in _focus(p.stats, total):
            yield f"  {share:5.0%} {share * p.us_per_request:7.0f} us  {label}"
        yield "  own time, top 5:"
        for label, share in _own_time(p.stats, total, 5):
            yield f"  {share:5.0%} {share * p.us_per_request:7.0f} us  {label}"


def _entries(stats: pstats.Stats) -> dict[tuple[str, int, str], tuple[Any, ...]]:
    return stats.stats  # type: ignore[attr-defined]


def _total(stats: pstats.Stats) -> float:
    return float(stats.total_tt) or 1.0  # type: ignore[attr-defined]


def _focus(stats: pstats.Stats, total: float) -> Iterator[tuple[str, float]]:
    entries = _entries(stats)
    for label, path, function in _FOCUS:
        cumulative = sum(
            values[3]
            for (filename, _, name), values in entries.items()
            if name == function and filename.endswith(path)
        )
        if cumulative / total >= 0.02:
            yield label, cumulative / total


def _own_time(stats: pstats.Stats, total: float, count: int) -> Iterator[tuple[str, float]]:
    ranked = sorted(_entries(stats).items(), key=lambda item: item[1][2], reverse=True)
    for (filename, line, name), values in ranked[:count]:
        where = "/".join(Path(filename).parts[-2:]) if filename != "~" else ""
        yield f"{name} {where}:{line} ({values[1]} calls)", values[2] / total


if __name__ == "__main__":
    profile_endpoints()
