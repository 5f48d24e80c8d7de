"""The registry benchmark: a real `hub api serve` process on SQLite and on PostgreSQL.

Per database, registry size and number of concurrent clients, each scenario runs `repeats`
times, interleaved so that the ceiling and the lookups see the same machine conditions, and the
medians are kept:

  (0) GET /livez                    the ceiling: the same server process answering a fixed body
                                    from an ASGI middleware in front of the framework
  (a) GET /healthz                  a FastAPI route doing no registry work
  (b) GET /schemas/ids/{id}         over every registered id
  (c) POST /subjects/{subject}      lookups of registered schemas
  (d) POST /subjects/{s}/versions   new compatible versions, checked against the subject (small
                                    registry only)

The small registry is 50 subjects x 3 versions registered over HTTP; the large one (10,000 x 5
by default) is written into the database before the server starts (bench/registry_seed.py).
"""

import argparse
import asyncio
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import httpx

from bench import load
from bench.dataset import (
    Registered,
    lookup_subject,
    record_schema,
    registration_subject,
    schema_body,
)
from bench.load import Call, Connection, Generator, RandomCalls, Reply, RunResult, Summary
from bench.registry_seed import seed_registry
from bench.servers import (
    REPO,
    ApiProcess,
    CpuMeter,
    Database,
    api_server,
    postgres_database,
    sqlite_database,
)

TARGET = 0.5  # lookups must reach this fraction of the bare ceiling's requests per second
LARGE_TOLERANCE = 0.10  # lookups in the large registry: within this fraction of the small's
MEMORY_TARGET_MB = 300.0  # peak resident memory of each API worker, large registry
LOOKUP_SUBJECTS = 50
LOOKUP_VERSIONS = 3
_MAX_REQUESTS_PER_RUN = 1_000_000  # a backstop; the duration ends read runs first
_REGISTRATION_TIME_CAP_S = 120.0
_WARM_TIME_CAP_S = 600.0


@dataclass(frozen=True, slots=True)
class Scenario:
    key: str
    label: str
    lookup: bool  # held to the target


BARE = Scenario("0", "(0) GET /livez  [bare ASGI]", lookup=False)
HEALTHZ = Scenario("a", "(a) GET /healthz  [FastAPI]", lookup=False)
BY_ID = Scenario("b", "(b) GET /schemas/ids/{id}", lookup=True)
LOOKUP = Scenario("c", "(c) POST /subjects/{s} lookup", lookup=True)
REGISTER = Scenario("d", "(d) POST .../versions register", lookup=False)
SCENARIOS = (BARE, HEALTHZ, BY_ID, LOOKUP, REGISTER)
SMALL = "small"
LARGE = "large"

DATABASES: dict[str, Callable[[], AbstractContextManager[Database]]] = {
    "sqlite": sqlite_database,
    "postgresql": postgres_database,
}


@dataclass(frozen=True, slots=True)
class Options:
    duration_s: float
    clients: tuple[int, ...]
    databases: tuple[str, ...]
    repeats: int
    warmup_s: float
    registration_subjects: int
    registration_versions: int  # new versions per subject and run, after a seeded version 1
    generator: Generator
    profile: bool
    registries: tuple[str, ...]
    large_subjects: int
    large_versions: int

    def label(self, database: str, registry: str) -> str:
        """The name of a database and registry size in the report."""
        if registry == SMALL:
            return database
        return f"{database} {self.large_subjects // 1000}kx{self.large_versions}"


@dataclass
class Results:
    runs: dict[tuple[str, int, str], list[RunResult]] = field(default_factory=dict)

    def add(self, database: str, clients: int, scenario: Scenario, run: RunResult) -> None:
        self.runs.setdefault((database, clients, scenario.key), []).append(run)

    def summary(self, database: str, clients: int, scenario: Scenario) -> Summary | None:
        runs = self.runs.get((database, clients, scenario.key))
        return Summary.of(runs) if runs else None


def parse_options(argv: Sequence[str] | None = None) -> Options:
    parser = argparse.ArgumentParser(
        prog="bench/registry.py",
        description="Schema registry lookups and registrations against the /healthz ceiling.",
    )
    parser.add_argument("--duration", type=float, help="Seconds per measured read run (5).")
    parser.add_argument("--clients", help="Concurrent client counts, comma-separated (4,8,16).")
    parser.add_argument(
        "--databases", default="sqlite,postgresql", help="sqlite and/or postgresql."
    )
    parser.add_argument("--repeats", type=int, default=3, help="Runs per scenario (3).")
    parser.add_argument(
        "--registries",
        default="small,large",
        help="small (50 subjects x 3 versions) and/or large (--large-subjects x --large-versions).",
    )
    parser.add_argument(
        "--large-subjects", type=int, help="Subjects of the large registry (10000; --quick 2000)."
    )
    parser.add_argument(
        "--large-versions", type=int, default=5, help="Versions per subject, large registry (5)."
    )
    parser.add_argument(
        "--quick", action="store_true", help="A smoke run: 1.5 s runs, 8 clients, fewer versions."
    )
    parser.add_argument(
        "--generator",
        choices=["raw", "httpx"],
        default="raw",
        help="HTTP client of the load generator (raw: light; httpx: ~1 ms CPU a request).",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="Afterwards, profile each endpoint in process (bench/registry_profile.py).",
    )
    args = parser.parse_args(argv)
    databases = tuple(d.strip() for d in args.databases.split(",") if d.strip())
    unknown = [d for d in databases if d not in DATABASES]
    if unknown or not databases:
        parser.error(f"--databases: unknown {unknown}; choose from {', '.join(DATABASES)}")
    try:
        clients = tuple(
            int(c) for c in (args.clients or ("8" if args.quick else "4,8,16")).split(",")
        )
    except ValueError:
        parser.error(f"--clients: comma-separated numbers, not {args.clients!r}")
    if any(not 1 <= c <= 256 for c in clients):
        parser.error("--clients: each count must be between 1 and 256")
    duration = args.duration or (1.5 if args.quick else 5.0)
    if not 0.2 <= duration <= 600:
        parser.error("--duration: between 0.2 and 600 seconds")
    if not 1 <= args.repeats <= 20:
        parser.error("--repeats: between 1 and 20")
    registries = tuple(r.strip() for r in args.registries.split(",") if r.strip())
    if not registries or any(r not in (SMALL, LARGE) for r in registries):
        parser.error(f"--registries: {SMALL} and/or {LARGE}, not {args.registries!r}")
    large_subjects = args.large_subjects or (2_000 if args.quick else 10_000)
    if not 1_000 <= large_subjects <= 100_000 or not 1 <= args.large_versions <= 20:
        parser.error("--large-subjects: 1000 to 100000; --large-versions: 1 to 20")
    return Options(
        duration_s=duration,
        clients=clients,
        databases=databases,
        repeats=args.repeats,
        warmup_s=min(1.0, duration / 2),
        registration_subjects=16 if args.quick else 32,
        registration_versions=3 if args.quick else 6,
        generator=args.generator,
        profile=args.profile,
        registries=registries,
        large_subjects=large_subjects,
        large_versions=args.large_versions,
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # progress lines show as they come
    started = time.monotonic()
    print(_machine(options))
    results = Results()
    try:
        for database in options.databases:
            for registry in options.registries:
                with DATABASES[database]() as db:
                    label = options.label(database, registry)
                    large = None
                    if registry == LARGE:
                        seeding = time.monotonic()
                        large = seed_registry(
                            db.url,
                            subjects=options.large_subjects,
                            versions=options.large_versions,
                        )
                        print(
                            f"\n[{label}] stored {len(large):,} subject versions in the database "
                            f"in {time.monotonic() - seeding:.0f} s, before the server starts"
                        )
                    with api_server(db.url) as server:
                        print(f"\n[{label}] API server pid {server.pid} at {server.base_url}")
                        meter = CpuMeter(server.pid, db)
                        asyncio.run(
                            _measure_database(label, server, meter, options, results, large)
                        )
    finally:
        if results.runs:  # what was measured, also when a later part failed
            print()
            print("\n".join(report(results, options)))
            print(f"\nWhole benchmark: {time.monotonic() - started:.0f} s.")
    errors = sum(r.errors for runs in results.runs.values() for r in runs)
    if options.profile:
        from bench.registry_profile import profile_endpoints

        print()
        profile_endpoints()
    return 1 if errors else 0


def _code_state() -> str:
    """The commit measured, and how many tracked files differ from it."""
    try:
        commit = _git("rev-parse", "--short", "HEAD").strip()
        changed = _git("status", "--porcelain", "--untracked-files=no").splitlines()
    except (OSError, subprocess.SubprocessError):
        return "code: not a git checkout"
    if not changed:
        return f"code: {commit}"
    return f"code: {commit} + uncommitted changes in {len(changed)} files"


def _git(*args: str) -> str:
    # Read-only: --no-optional-locks keeps `git status` from refreshing the index.
    return subprocess.run(
        ["git", "--no-optional-locks", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    ).stdout


def _machine(options: Options) -> str:
    return (
        f"Registry benchmark on {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"{_code_state()}: "
        f"{options.repeats} runs of {options.duration_s:g} s per scenario (medians), "
        f"clients {','.join(map(str, options.clients))}.\n"
        f"The load generator ({options.generator} HTTP/1.1 client, one asyncio loop) runs on "
        "the same machine and competes for the cores; each run shows the cores used by the "
        "server, the database, the generator and other processes."
    )


async def _measure_database(
    database: str,
    server: ApiProcess,
    meter: CpuMeter,
    options: Options,
    results: Results,
    large: list[Registered] | None = None,
) -> None:
    async with _setup_client(server) as http:
        if large is None:
            registered = await register_lookup_set(http)
            await verify_lookups(http, registered)
            fields = len(record_schema(0, version=LOOKUP_VERSIONS)["fields"])
            print(
                f"[{database}] registered {LOOKUP_VERSIONS} versions of {LOOKUP_SUBJECTS} "
                f"subjects (up to {fields} fields); every one answers lookups and GET by id "
                "correctly",
            )
        else:
            registered = large
            step = max(1, len(large) // 200)
            await verify_lookups(http, large[::step])
            print(f"[{database}] a sample of {len(large[::step])} answers lookups and GET by id")
    by_id = RandomCalls([Call("GET", f"/schemas/ids/{r.schema_id}") for r in registered])
    lookups = RandomCalls(
        [Call("POST", f"/subjects/{r.subject}", r.body) for r in registered], by_id.rng
    )
    reads = {
        BARE: RandomCalls([Call("GET", "/livez")]),
        HEALTHZ: RandomCalls([Call("GET", "/healthz")]),
        BY_ID: by_id,
        LOOKUP: lookups,
    }
    if large is not None:
        await _every_call_once(server, meter, options, database, by_id, lookups)
    for clients in options.clients:
        async with load.connections(server.port, clients, options.generator) as pool:
            for workload in reads.values():  # warm connections, caches and code paths
                await load.run(
                    pool,
                    workload,
                    duration_s=options.warmup_s,
                    max_requests=_MAX_REQUESTS_PER_RUN,
                    meter=meter,
                )
            for rep in range(1, options.repeats + 1):
                where = f"[{database:<10} c={clients:<3}] {rep}/{options.repeats}"
                for scenario, workload in reads.items():
                    run = await load.run(
                        pool,
                        workload,
                        duration_s=options.duration_s,
                        max_requests=_MAX_REQUESTS_PER_RUN,
                        meter=meter,
                    )
                    results.add(database, clients, scenario, run)
                    print(_progress(where, scenario, run))
            if large is not None:
                continue  # registrations are measured on the small registry
            # After the reads: a registration moves the database's generation, and the reads
            # measured after one would include refilling every cached answer.
            for rep in range(1, options.repeats + 1):
                where = f"[{database:<10} c={clients:<3}] {rep}/{options.repeats}"
                run = await measure_registrations(pool, meter, options, run_name=f"{clients}c{rep}")
                results.add(database, clients, REGISTER, run)
                print(_progress(where, REGISTER, run))


class _EachOnce:
    """Every call of a list once, in order, then no more."""

    def __init__(self, calls: Sequence[Call]) -> None:
        self._calls = iter(calls)

    async def next(self) -> Call | None:
        return next(self._calls, None)

    def done(self, call: Call, reply: Reply | None) -> None:
        pass


async def _every_call_once(
    server: ApiProcess,
    meter: CpuMeter,
    options: Options,
    database: str,
    *workloads: RandomCalls,
) -> None:
    """Send every GET by id and every lookup of the large registry once, unmeasured: the
    measured runs then see what a long-running server has cached, and the memory it holds."""
    async with load.connections(server.port, 8, options.generator) as pool:
        for workload in workloads:
            run = await load.run(
                pool,
                _EachOnce(workload.calls),
                duration_s=_WARM_TIME_CAP_S,
                max_requests=len(workload.calls),
                meter=meter,
            )
            print(
                f"[{database}] every {workload.calls[0].method} once, unmeasured: "
                f"{run.requests:,} requests in {run.seconds:.0f} s, {run.errors} errors; "
                f"{run.peak_rss.describe()}"
            )
            if run.errors:
                raise RuntimeError(f"warming the large registry: {run.first_error}")


def _setup_client(server: ApiProcess) -> httpx.AsyncClient:
    """The set-up and checks use a standard client, independent of the load generator."""
    return httpx.AsyncClient(
        base_url=server.base_url,
        timeout=httpx.Timeout(30.0),
        trust_env=False,  # no proxy from the environment: traffic stays on loopback
        headers={"Content-Type": load.MEDIA_TYPE},
    )


def _progress(where: str, scenario: Scenario, run: RunResult) -> str:
    errors = f"  ERRORS {run.errors}: {run.first_error}" if run.errors else ""
    cores = " ".join(
        f"{name} {run.cores(seconds):.2f}"
        for name, seconds in (
            ("server", run.cpu.server),
            ("db", run.cpu.database_total),
            ("gen", run.cpu.generator),
            ("other", run.cpu.others),
        )
    )
    return (
        f"{where} {scenario.label:<32}{run.rps:8.1f} req/s  p50 {run.percentile_ms(0.5):6.1f} ms"
        f"  p99 {run.percentile_ms(0.99):6.1f} ms  {run.server_us_per_request:6.0f} us/req  "
        f"cores: {cores}  {run.peak_rss.describe()}{errors}"
    )


# --- set-up ----------------------------------------------------------------------------------


async def register_lookup_set(http: httpx.AsyncClient) -> list[Registered]:
    """Register 3 compatible versions of 50 subjects; subjects in parallel, versions in order."""

    async def subject(index: int) -> list[Registered]:
        out = []
        for version in range(1, LOOKUP_VERSIONS + 1):
            name = lookup_subject(index)
            body = schema_body(record_schema(index, version=version))
            response = await http.post(f"/subjects/{name}/versions", content=body)
            _expect(response, f"registering {name} version {version}")
            out.append(Registered(name, version, int(response.json()["id"]), body))
        return out

    registered: list[Registered] = []
    for start in range(0, LOOKUP_SUBJECTS, 8):
        batch = range(start, min(start + 8, LOOKUP_SUBJECTS))
        for versions in await asyncio.gather(*(subject(i) for i in batch)):
            registered += versions
    if len({r.schema_id for r in registered}) != len(registered):
        raise RuntimeError("the registry gave two distinct schemas the same id")
    return registered


async def verify_lookups(http: httpx.AsyncClient, registered: Sequence[Registered]) -> None:
    """Every registered schema is found under its subject and version, and by its id."""
    for item in registered:
        found = await http.post(f"/subjects/{item.subject}", content=item.body)
        _expect(found, f"looking up {item.subject} version {item.version}")
        answer = found.json()
        if (answer["id"], answer["version"]) != (item.schema_id, item.version):
            raise RuntimeError(f"lookup of {item.subject} v{item.version} answered {answer}")
        by_id = await http.get(f"/schemas/ids/{item.schema_id}")
        _expect(by_id, f"getting schema id {item.schema_id}")
        if json.loads(by_id.json()["schema"]) != json.loads(json.loads(item.body)["schema"]):
            raise RuntimeError(f"schema id {item.schema_id} is not the schema registered")


def _expect(response: httpx.Response, what: str) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"{what}: HTTP {response.status_code} {response.text[:500]}")


# --- registrations ---------------------------------------------------------------------------


class NewVersions:
    """Registration work: every subject gets its new versions in order, one at a time."""

    def __init__(self, subjects: Sequence[str], versions_each: int, *, time_cap_s: float) -> None:
        self._subjects = subjects
        self._deadline = time.perf_counter() + time_cap_s
        self._last = versions_each  # extra fields of the last version to register
        self._queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
        for index in range(len(subjects)):
            self._queue.put_nowait((index, 1))
        self._in_flight: dict[int, tuple[int, int]] = {}
        self._unfinished = len(subjects)
        self.ids: set[int] = set()
        self.registered = 0

    async def next(self) -> Call | None:
        while self._unfinished and time.perf_counter() < self._deadline:
            try:
                index, extra = await asyncio.wait_for(self._queue.get(), timeout=0.05)
            except TimeoutError:
                continue  # every subject is busy; the loop ends when all are finished
            body = schema_body(record_schema(index, version=1, extra_fields=extra))
            call = Call("POST", f"/subjects/{self._subjects[index]}/versions", body)
            self._in_flight[id(call)] = (index, extra)
            return call
        return None

    def done(self, call: Call, reply: Reply | None) -> None:
        index, extra = self._in_flight.pop(id(call))
        if reply is not None and reply.status == 200:
            self.ids.add(int(reply.json()["id"]))
            self.registered += 1
            extra += 1
        if extra <= self._last:
            self._queue.put_nowait((index, extra))
        else:
            self._unfinished -= 1


async def measure_registrations(
    pool: Sequence[Connection], meter: CpuMeter, options: Options, *, run_name: str
) -> RunResult:
    """Seed version 1 of fresh subjects (not measured), then register their next versions."""
    subjects = [registration_subject(run_name, i) for i in range(options.registration_subjects)]
    seeds = [(s, schema_body(record_schema(i, version=1))) for i, s in enumerate(subjects)]
    for start in range(0, len(seeds), len(pool)):
        batch = zip(pool, seeds[start : start + len(pool)], strict=False)
        for reply in await asyncio.gather(
            *(c.send(Call("POST", f"/subjects/{name}/versions", body)) for c, (name, body) in batch)
        ):
            if reply.status != 200:
                raise RuntimeError(f"seeding a subject: {reply.status} {reply.body[:300]!r}")
    work = NewVersions(subjects, options.registration_versions, time_cap_s=_REGISTRATION_TIME_CAP_S)
    run = await load.run(
        pool,
        work,
        duration_s=_REGISTRATION_TIME_CAP_S,
        max_requests=len(subjects) * options.registration_versions * 2,
        meter=meter,
    )
    expected = len(subjects) * options.registration_versions
    if work.registered != expected or len(work.ids) != expected:
        raise RuntimeError(
            f"registrations: expected {expected} new versions with distinct ids, "
            f"got {work.registered} with {len(work.ids)} ids; first error: {run.first_error}"
        )
    versions = (await pool[0].send(Call("GET", f"/subjects/{subjects[0]}/versions"))).json()
    if versions != list(range(1, options.registration_versions + 2)):
        raise RuntimeError(f"{subjects[0]} has versions {versions}")
    return run


# --- report ----------------------------------------------------------------------------------


def report(results: Results, options: Options) -> Iterator[str]:
    """The results table, each row next to the ceilings of the same database and clients."""
    yield (
        f"Medians of {options.repeats} runs; reads run {options.duration_s:g} s each, (d) "
        f"registers {options.registration_subjects} subjects x "
        f"{options.registration_versions} new versions (v2-v{options.registration_versions + 1})."
    )
    yield (
        "vs (0): req/s divided by the bare ceiling's req/s in the same run; vs (a): by "
        "/healthz's; CPU x (0): server CPU per request, divided by the bare ceiling's;\n"
        "cores: CPU used during the runs by the API server, PostgreSQL, the load generator "
        "and processes outside the benchmark; peak RSS: of each process, after the row's runs."
    )
    header = (
        f"{'database':<16}{'clients':>7}  {'scenario':<33}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'srv us/req':>11}{'CPU x (0)':>10}{'vs (0)':>8}{'vs (a)':>8}  {'target':<8}"
        "cores srv/db/gen/other  peak RSS"
    )
    yield header
    yield "-" * len(header)
    ratios: dict[Scenario, list[float]] = {s: [] for s in SCENARIOS if s.lookup}
    labels = [
        options.label(database, registry)
        for database in options.databases
        for registry in options.registries
    ]
    for label in labels:
        for clients in options.clients:
            bare = results.summary(label, clients, BARE)
            healthz = results.summary(label, clients, HEALTHZ)
            for scenario in SCENARIOS:
                row = results.summary(label, clients, scenario)
                if row is None or bare is None or healthz is None:
                    continue
                ratio = row.rps / bare.rps if bare.rps else float("nan")
                to_healthz = row.rps / healthz.rps if healthz.rps else float("nan")
                cost = row.server_us_per_request / bare.server_us_per_request
                verdict = ""
                if scenario.lookup:
                    verdict = "PASS" if ratio >= TARGET else "FAIL"
                    ratios[scenario].append(ratio)
                errors = f"  {row.errors} errors" if row.errors else ""
                yield (
                    f"{label:<16}{clients:>7}  {scenario.label:<33}{row.rps:>9.1f}"
                    f"{row.p50_ms:>9.1f}{row.p99_ms:>9.1f}{row.server_us_per_request:>11.0f}"
                    f"{cost:>10.1f}{ratio:>8.2f}{to_healthz:>8.2f}  {verdict:<8}{_cores(row)}  "
                    f"{row.peak_rss.describe().removeprefix('peak RSS MB: ')}{errors}"
                )
    yield ""
    passed = all(r >= TARGET for values in ratios.values() for r in values)
    yield (
        f"Target: lookups (b) and (c) reach at least {TARGET} of the bare ceiling (0): "
        + ("PASS" if passed else "FAIL")
    )
    for scenario, values in ratios.items():
        if values:
            below = sum(r < TARGET for r in values)
            yield (
                f"  {scenario.label.strip()}: {min(values):.2f} to {max(values):.2f} of the "
                f"ceiling, {below} of {len(values)} rows below {TARGET}"
            )
    if SMALL in options.registries and LARGE in options.registries:
        yield from _large_against_small(results, options)
    rates = {
        database: [
            s.rps
            for clients in options.clients
            if (s := results.summary(database, clients, REGISTER)) is not None
        ]
        for database in options.databases
    }
    yield "Registrations per second (median over client counts): " + ", ".join(
        f"{database} {statistics.median(r):.1f}" for database, r in rates.items() if r
    )


def _large_against_small(results: Results, options: Options) -> Iterator[str]:
    """Lookups in the large registry against the small one's, and the large one's memory."""
    yield (
        f"Target: in the {options.large_subjects:,} x {options.large_versions} registry, lookups "
        f"within {LARGE_TOLERANCE:.0%} of the small registry's (req/s, and as a fraction of the "
        "bare ceiling, which discounts a busier machine in one of the two runs); API memory "
        f"per worker at most {MEMORY_TARGET_MB:.0f} MB:"
    )
    for database in options.databases:
        small, large = options.label(database, SMALL), options.label(database, LARGE)
        for clients in options.clients:
            for scenario in (BY_ID, LOOKUP):
                s, s0 = (
                    results.summary(small, clients, scenario),
                    results.summary(small, clients, BARE),
                )
                b, b0 = (
                    results.summary(large, clients, scenario),
                    results.summary(large, clients, BARE),
                )
                if not (s and s0 and b and b0):
                    continue
                rps = b.rps / s.rps
                share = (b.rps / b0.rps) / (s.rps / s0.rps)
                verdict = "PASS" if max(rps, share) >= 1 - LARGE_TOLERANCE else "FAIL"
                yield (
                    f"  {database:<11} c={clients:<3} {scenario.label.strip():<32} large/small: "
                    f"req/s {rps:.2f}, vs (0) {share:.2f}  {verdict}"
                )
        workers = [
            mb
            for clients in options.clients
            if (row := results.summary(large, clients, LOOKUP)) is not None
            for mb in row.peak_rss.api_workers
        ]
        if workers:
            peak = max(workers)
            verdict = "PASS" if peak <= MEMORY_TARGET_MB else "FAIL"
            yield (
                f"  {database:<11} peak RSS per API worker, large registry: {peak:.0f} MB  "
                + verdict
            )


def _cores(row: Summary) -> str:
    return "/".join(
        f"{c:.2f}"
        for c in (row.server_cores, row.database_cores, row.generator_cores, row.other_cores)
    )
