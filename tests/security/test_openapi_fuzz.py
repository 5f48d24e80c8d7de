"""Property-based fuzzing of every operation of the served OpenAPI document, with schemathesis,
on SQLite and on PostgreSQL: no answer is a 5xx, and no caller changes what it does not own.

Each operation gets 40 generated requests on PostgreSQL, the production store, and 20 on
SQLite (valid and invalid by its OpenAPI schema; set `FUZZ_EXAMPLES` for more) from each
caller: teams `sec_a` and `sec_b` and an anonymous caller, then an admin. The generated
requests are steered at real targets: path parameters are often the teams' own subjects and
topics (and reserved ones), registry bodies carry valid and hostile Avro schemas
(`tests/security/strategies.py`), publish bodies records with hostile values. Seeds are derived
from the operation and the caller, so every run sends the same requests.

Besides schemathesis's `not_a_server_error`, a check of our own (`_violation`) fails every 2xx
answer to a write that the caller does not own by the rules of docs/security.md, and team
`sec_c`, which never calls, must end the non-admin round exactly as it began.
"""

import os
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from pyspark.sql import SparkSession
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from sqlalchemy import create_engine, text

from hub_api.settings import ApiSettings
from spark_loaders.settings import LoaderSettings
from tests.security.conftest import Hub, running_hub, with_lake
from tests.security.strategies import avro_schemas, publish_bodies

pytestmark = pytest.mark.security

TEAMS = ("sec_a", "sec_b", "sec_c")
BYSTANDER = "sec_c"  # owns resources, never calls
CALLERS = ("sec_a", "sec_b", "anonymous")
# Per operation and caller. Generating the cases, not sending them, is most of the time the
# fuzzing takes (about 12 ms a case on two cores): 40 on PostgreSQL and half as many on SQLite,
# whose store-specific failures (locking, constraint errors) show in fewer, keep both within
# two minutes.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# POSTs that only read: a schema lookup and compatibility checks.
_READ_ONLY_POST = re.compile(r"^/subjects/[^/]+$|^/compatibility/")
# The fuzzer sends bursts; the per-key rate limit, where the API has one, is not under test.
_UNLIMITED = {"rate_limit_per_second": 1e9, "rate_limit_burst": 10**9}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def fuzz_hub(
    request: pytest.FixtureRequest,
    kafka_bootstrap: str,
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Hub]:
    """A hub with three teams, on a fresh SQLite file or PostgreSQL database, their feeds landed
    in Delta."""
    if request.param == "sqlite":
        database = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'hub.db'}"
    else:
        database = _fresh_postgres_database(request.getfixturevalue("postgres_server"))
    api = {name: value for name, value in _UNLIMITED.items() if name in ApiSettings.model_fields}
    home = tmp_path_factory.mktemp(f"fuzz-{request.param}")
    with running_hub(
        database_url=database, bootstrap=kafka_bootstrap, teams=TEAMS, process_home=home, **api
    ) as hub:
        yield with_lake(hub, spark, loader_settings, home)


def _fresh_postgres_database(server: str) -> str:
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text('DROP DATABASE IF EXISTS "security_fuzz"'))
        conn.execute(text('CREATE DATABASE "security_fuzz"'))
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/security_fuzz"


@dataclass
class Findings:
    """What the fuzzing found, and who owns which feed (feeds made while fuzzing included)."""

    owners: dict[str, str]
    problems: list[str] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    session: requests.Session = field(default_factory=requests.Session)  # keeps connections

    def add(self, problem: str) -> None:
        if len(self.problems) < 50:
            self.problems.append(problem)


def _targets(hub: Hub) -> dict[str, list[Any]]:
    """Real names for path parameters, so that generated requests reach real resources."""
    topics = [team.topic for team in hub.teams.values()]
    subjects = [s for team in hub.teams.values() for s in team.subjects]
    return {
        "subject": [*subjects, "nodomain-value", f"{topics[0]}.dlq-value", "__x-value"],
        "topic": [
            *topics,
            f"{topics[0]}.dlq",
            "__consumer_offsets",
            "_hub_connect_offsets",
            hub.outside_topic,
        ],
        "version": ["1", "latest", "-1", str(2**31), str(2**63)],
        "schema_id": [1, 2, 2**31, 2**63 - 1],
    }


def _steer(case: schemathesis.Case, hub: Hub, draw: st.DrawFn) -> None:
    """Point a generated case at real targets and give its body real Avro or records, some of
    the time; the rest of the time the case stays as schemathesis made it."""
    targets = _targets(hub)
    for name in case.path_parameters or {}:
        if name in targets and draw(st.booleans()):
            case.path_parameters[name] = draw(st.sampled_from(targets[name]))
    body = case.body
    if not isinstance(body, dict) or not draw(st.booleans()):
        return
    if "schema" in body:
        body["schema"] = draw(avro_schemas())
    if "value_schema" in body:
        body["value_schema"] = draw(avro_schemas())
        body["topic"] = draw(st.sampled_from([*targets["topic"], "sec_a.fuzzed", "sec_b.fuzzed"]))
        body["owner"] = draw(st.sampled_from(TEAMS))
    if case.path.endswith("/records") or case.path.startswith("/topics/"):
        case.body = draw(publish_bodies(rest_proxy=case.path.startswith("/topics/")))


def _owner(case: schemathesis.Case, findings: Findings) -> str | None:
    """The team a write changes things of, by docs/security.md; None for admin-only writes."""
    path = case.formatted_path
    body = case.body if isinstance(case.body, dict) else {}
    if path == "/v1/feeds":
        return str(body.get("owner"))
    if path.startswith(("/v1/feeds/", "/topics/")):
        return findings.owners.get(path.split("/")[3 if path.startswith("/v1/") else 2])
    if path.startswith("/v3/clusters/"):  # /v3/clusters/{cluster}/topics/{topic}/records
        return findings.owners.get(path.split("/")[5])
    subject = (case.path_parameters or {}).get("subject")
    if subject is None or body.get("id") is not None or body.get("version") is not None:
        return None  # registry-wide settings, explicit ids and versions, connectors: admins
    if str(body.get("mode", "")).upper() == "IMPORT":
        return None
    topic = subject.removesuffix("-value").removesuffix("-key")
    if topic != subject and topic in findings.owners:
        return findings.owners[topic]
    domain, dot, _ = subject.partition(".")
    return domain if dot and domain else None


def _violation(caller: str, case: schemathesis.Case, status: int, findings: Findings) -> str:
    """Why a 2xx answer to this write breaks the ownership rules, or '' when it does not."""
    if case.method.upper() not in WRITES or not 200 <= status < 300 or caller == "admin":
        return ""
    if _READ_ONLY_POST.search(case.formatted_path):
        return ""
    if caller == "anonymous":
        return "an anonymous write succeeded"
    owner = _owner(case, findings)
    return "" if owner == caller else f"team {caller} changed what {owner or 'admins'} own(s)"


def _no_loader_by_design(response: Any) -> bool:
    """The fuzzed hub runs no loader: `POST /v1/feeds/{topic}/replay` by its owner answers
    503 with code 50350 (LOADER_NOT_CONFIGURED), as documented, not a server error."""
    if response.status_code != 503 or not urlsplit(str(response.request.url)).path.endswith(
        "/replay"
    ):
        return False
    try:
        return bool(response.json().get("error_code") == 50350)
    except ValueError:
        return False


def _call(hub: Hub, caller: str, case: schemathesis.Case, findings: Findings) -> None:
    response = case.call(
        base_url=hub.url, session=findings.session, headers=hub.headers(caller), timeout=60
    )
    findings.statuses[response.status_code] += 1
    label = f"{caller} {case.method} {case.formatted_path} -> {response.status_code}"
    try:
        if not _no_loader_by_design(response):
            case.validate_response(response, checks=[not_a_server_error])
    except (AssertionError, BaseExceptionGroup):  # schemathesis's failures: recorded, not raised
        findings.add(f"{label}: {response.text[:300]}\n  {case.as_curl_command()[:500]}")
    problem = _violation(caller, case, response.status_code, findings)
    if problem:
        findings.add(f"{label}: {problem}\n  {case.as_curl_command()[:500]}")
    if response.status_code == 201 and case.formatted_path == "/v1/feeds":
        findings.owners[response.json()["topic"]] = response.json()["owner"]
    elif case.method.upper() == "DELETE" and response.status_code == 200:
        findings.owners.pop(case.formatted_path.split("/")[-1].split("?")[0], None)


def _fuzz(hub: Hub, callers: tuple[str, ...], examples: int, findings: Findings) -> None:
    """Send `examples` generated requests to every operation as each of `callers`."""
    schema = schemathesis.openapi.from_url(f"{hub.url}/openapi.json")
    for result in schema.get_all_operations():
        operation = result.ok()
        valid = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
        # One case in three breaks the operation's schema; such cases cost five times as much
        # to generate, and the schema's edges are where the bugs are found.
        cases = st.one_of(
            valid, valid, operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)
        )
        for caller in callers:
            _fuzz_operation(hub, cases, caller, examples, findings, label=operation.label)


def _fuzz_operation(
    hub: Hub,
    cases: st.SearchStrategy[schemathesis.Case],
    caller: str,
    examples: int,
    findings: Findings,
    *,
    label: str,
) -> None:
    """`examples` cases of one operation as one caller, from a seed of both: every run sends
    the same requests, and each caller different ones."""

    @seed(zlib.crc32(f"{caller} {label}".encode()))
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],  # findings are collected, not shrunk
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, data=st.data())
    def run(case: schemathesis.Case, data: st.DataObject) -> None:
        _steer(case, hub, data.draw)
        _call(hub, caller, case, findings)

    run()


def test_fuzzing_every_operation_as_every_caller_finds_no_5xx_and_no_ownership_breach(
    fuzz_hub: Hub,
) -> None:
    findings = Findings(owners={team.topic: name for name, team in fuzz_hub.teams.items()})
    assert fuzz_hub.lake is not None
    bystander = fuzz_hub.snapshot(BYSTANDER)
    bystander_rows = fuzz_hub.lake.rows(fuzz_hub.teams[BYSTANDER].topic)

    examples = EXAMPLES if fuzz_hub.database_url.startswith("postgresql") else EXAMPLES // 2

    _fuzz(fuzz_hub, CALLERS, examples, findings)
    assert fuzz_hub.snapshot(BYSTANDER) == bystander
    assert fuzz_hub.rows(BYSTANDER) == bystander_rows  # after landing what the fuzzing published
    _fuzz(fuzz_hub, ("admin",), examples, findings)

    print(f"answers by status: {dict(sorted(findings.statuses.items()))}")
    assert findings.problems == [], "\n".join(findings.problems)
