"""Several API processes on one PostgreSQL database hand out ids and versions as one registry.

Two real server processes (`hub api serve`) share a fresh database; threads register schemas
through both at once, some schemas shared by every thread. Whatever the interleaving, a schema
has one id everywhere and each subject's versions count 1..N.
"""

import json
import subprocess
import threading
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
import pytest

from migrations import migrate
from tests.support.api_server import spawn_api
from tests.support.hub_client import bearer, create_key
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

THREADS = 8
PER_THREAD = 25
SUBJECTS = [f"replicas.s{n}-value" for n in range(4)]


def _up_or_exited(url: str, process: subprocess.Popen[bytes]) -> bool:
    if process.poll() is not None:
        return True
    try:
        return httpx.get(f"{url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@dataclass(frozen=True)
class Replicas:
    urls: list[str]
    headers: dict[str, str]  # an admin key's


@pytest.fixture
def replicas(postgres_database: str, kafka_bootstrap: str, tmp_path: Path) -> Iterator[Replicas]:
    """Two `hub api serve` processes sharing one fresh PostgreSQL database."""
    migrate.upgrade(postgres_database)
    headers = bearer(create_key(postgres_database, team=None))
    processes: list[tuple[subprocess.Popen[bytes], Path]] = []
    urls: list[str] = []
    try:
        for n in range(2):
            log = tmp_path / f"api-{n}.log"
            process, url = spawn_api(
                home=tmp_path / "home",
                database_url=postgres_database,
                bootstrap_servers=kafka_bootstrap,
                log=log,
            )
            processes.append((process, log))
            urls.append(url)
        for url, (process, log) in zip(urls, processes, strict=True):
            wait_until(
                partial(_up_or_exited, url, process),
                timeout_s=60,
                what=f"the API process at {url}",
                interval_s=0.2,
            )
            if process.poll() is not None:
                raise RuntimeError(
                    f"the API process at {url} exited with {process.returncode}:\n"
                    + log.read_text()[-3000:]
                )
        yield Replicas(urls, headers)
    finally:
        for process, _ in processes:
            process.terminate()
        for process, _ in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@dataclass(frozen=True)
class Outcome:
    thread: int
    server: int
    subject: str
    schema: str
    status: int
    body: str


def _registration(thread: int, index: int) -> tuple[str, str, bool]:
    """(subject, schema, shared) of a thread's index-th registration.

    Every other schema is shared: all threads register it at the same moment, half of them
    under one subject and half under the next, through both processes. The rest belong to
    one thread and go to each subject and process in turn.
    """
    shared = index % 2 == 0
    name = f"Shared{index}" if shared else f"Own{thread}x{index}"
    schema = json.dumps(
        {"type": "record", "name": name, "fields": [{"name": "n", "type": "long"}]},
        separators=(",", ":"),
    )
    slot = index // 2 + (thread % 2 if shared else thread)
    return SUBJECTS[slot % len(SUBJECTS)], schema, shared


def test_two_processes_hand_out_one_id_per_schema_and_gapless_versions(
    replicas: Replicas,
) -> None:
    servers, headers = replicas.urls, replicas.headers
    with httpx.Client(base_url=servers[0], headers=headers, timeout=30) as http:
        for subject in SUBJECTS:
            # Records of different names never read each other; this test is about ids.
            http.put(f"/config/{subject}", json={"compatibility": "NONE"}).raise_for_status()

    lockstep = threading.Barrier(THREADS)

    def register(thread: int) -> list[Outcome]:
        clients = [httpx.Client(base_url=url, headers=headers, timeout=60) for url in servers]
        outcomes: list[Outcome] = []
        try:
            for index in range(PER_THREAD):
                subject, schema, shared = _registration(thread, index)
                server = (thread // 2 + index) % len(servers)
                if shared:
                    lockstep.wait(timeout=60)
                try:
                    response = clients[server].post(
                        f"/subjects/{subject}/versions", json={"schema": schema}
                    )
                    status, body = response.status_code, response.text
                except httpx.HTTPError as exc:
                    status, body = -1, repr(exc)
                outcomes.append(Outcome(thread, server, subject, schema, status, body))
        finally:
            for client in clients:
                client.close()
        return outcomes

    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        outcomes = [o for batch in pool.map(register, range(THREADS)) for o in batch]

    failed = [o for o in outcomes if o.status != 200]
    assert not failed, failed[:5]
    assert len(outcomes) == THREADS * PER_THREAD
    assert {o.server for o in outcomes} == {0, 1}

    ids_of: dict[str, set[int]] = defaultdict(set)
    for o in outcomes:
        ids_of[o.schema].add(json.loads(o.body)["id"])
    # One id per schema, whichever process answered, and no id for two schemas.
    assert {schema: len(ids) for schema, ids in ids_of.items() if len(ids) != 1} == {}
    id_of = {schema: next(iter(ids)) for schema, ids in ids_of.items()}
    assert len(set(id_of.values())) == len(id_of)
    shared = [s for s in id_of if '"Shared' in s]
    assert len(shared) == len(range(0, PER_THREAD, 2))
    assert len(id_of) == len(shared) + THREADS * (PER_THREAD - len(shared))

    expected: dict[str, set[int]] = defaultdict(set)
    for o in outcomes:
        expected[o.subject].add(id_of[o.schema])
    for n, subject in enumerate(SUBJECTS):
        with httpx.Client(base_url=servers[n % 2], headers=headers, timeout=30) as http:
            versions = http.get(f"/subjects/{subject}/versions").json()
            # Every distinct schema of the subject is one version; no gaps, no duplicates.
            assert versions == list(range(1, len(expected[subject]) + 1)), subject
            held = [http.get(f"/subjects/{subject}/versions/{v}").json()["id"] for v in versions]
        assert sorted(held) == sorted(expected[subject]), subject

    # Each process serves every schema by the id the other one may have assigned.
    for url in servers:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
            for schema in shared:
                answer = http.get(f"/schemas/ids/{id_of[schema]}")
                assert json.loads(answer.json()["schema"]) == json.loads(schema)
