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

The web console's pages and forms, which the document leaves out, are fuzzed from a description
of their own (`_console_document`) by a signed-in browser, an anonymous one and a forger: no
5xx, every forged form refused with 40310, and no form acting on what its caller does not own.
"""

import dataclasses
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


# The web console: HTML pages and forms for browsers, left out of the API's OpenAPI document, so
# described here for the fuzzing. Its callers: team `sec_a` signed in (its session cookie, its
# pages' form token and the console's own origin, all steered in some of the time); an anonymous
# browser; and a forger holding team `sec_b`'s session cookie and form token, posting from
# another origin or with a token of its making. An eighth of the cases the API's operations get
# (5 per form and caller on PostgreSQL, 2 on SQLite; about 85 requests in all): the console's
# inputs are few strings and numbers, and its checks come before any of them is read.
FOREIGN = "https://forger.example"


def _console_document() -> dict[str, Any]:
    def text(*names: str) -> list[dict[str, Any]]:
        return [{"name": n, "in": "query", "schema": {"type": "string"}} for n in names]

    def path(*names: str) -> list[dict[str, Any]]:
        return [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
                for n in names]  # fmt: skip

    def form(*fields: str) -> dict[str, Any]:
        properties = {name: {"type": "string"} for name in ("csrf_token", *fields)}
        schema = {"type": "object", "properties": properties}
        return {"required": True,
                "content": {"application/x-www-form-urlencoded": {"schema": schema}}}  # fmt: skip

    page = {"responses": {"200": {"description": "an HTML page"}}}
    numbers = [{"name": n, "in": "query", "schema": {"type": "integer"}}
               for n in ("older", "newer", "replayed")]  # fmt: skip
    action = {"name": "action", "in": "path", "required": True,
              "schema": {"type": "string", "enum": ["pause", "resume", "restart"]}}  # fmt: skip
    return {
        "openapi": "3.0.3",
        "info": {"title": "Integration Hub console", "version": "1"},
        "paths": {
            "/console/feeds/{topic}": {"get": {**page, "parameters": path("topic") + numbers}},
            "/console/lineage": {"get": {**page, "parameters": text(
                "table", "partition", "offset", "key", "topic", "lsn", "request_id")}},
            "/console/connectors": {"get": {**page, "parameters": text("done")}},
            "/console/sign-in": {"post": {**page, "requestBody": form("api_key")}},
            "/console/sign-out": {"post": {**page, "requestBody": form()}},
            "/console/tables/plan": {"post": {**page, "requestBody": form("topic", "schema")}},
            "/console/feeds/{topic}/replay": {
                "post": {**page, "parameters": path("topic"), "requestBody": form()}
            },
            "/console/connectors/{name}/{action}": {
                "post": {**page, "parameters": [*path("name"), action], "requestBody": form()}
            },
        },
    }  # fmt: skip


@dataclass(frozen=True)
class ConsoleCaller:
    name: str
    cookie: str  # the Cookie header: a session, or nothing
    token: str  # the form token of its pages


def _console_caller(hub: Hub, team: str) -> ConsoleCaller:
    """A browser of `team` signed in through the console's own forms."""
    with requests.Session() as http:
        sign_in = http.get(f"{hub.url}/console/sign-in", timeout=60)
        form_cookie = sign_in.headers["set-cookie"].split(";")[0]
        signed = http.post(
            f"{hub.url}/console/sign-in",
            data={"api_key": hub.teams[team].key, "csrf_token": _token(sign_in.text)},
            headers={"Cookie": form_cookie, "Origin": hub.url},
            allow_redirects=False,
            timeout=60,
        )
        assert signed.status_code == 303, signed.text
        cookie = signed.headers["set-cookie"].split(";")[0]
        page = http.get(f"{hub.url}/console/connectors", headers={"Cookie": cookie}, timeout=60)
    return ConsoleCaller(team, cookie, _token(page.text))


def _token(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, page[:300]
    return found.group(1)


def _console_call(
    hub: Hub, caller: ConsoleCaller, case: schemathesis.Case, draw: st.DrawFn, findings: Findings
) -> None:
    targets = _targets(hub)
    for name in case.path_parameters or {}:
        if name == "topic" and draw(st.booleans()):
            case.path_parameters[name] = draw(st.sampled_from(targets["topic"]))
    post = case.method.upper() == "POST"
    forged = caller.name == "forger"
    # The forger sends its session's own token from another origin, or from the console's
    # origin a token of its making; the others, some of the time, their page's token.
    foreign = forged and draw(st.booleans())
    if post and isinstance(case.body, dict):
        if foreign or (not forged and draw(st.booleans())):
            case.body["csrf_token"] = caller.token
        elif forged and case.body.get("csrf_token") == caller.token:
            del case.body["csrf_token"]
    headers = {"Origin": FOREIGN if foreign else hub.url}
    if caller.cookie:
        headers["Cookie"] = caller.cookie
    response = case.call(base_url=hub.url, session=findings.session, headers=headers,
                         allow_redirects=False, timeout=60)  # fmt: skip
    findings.statuses[response.status_code] += 1
    status, where = response.status_code, (response.headers.get("location") or [""])[0]
    label = f"console {caller.name} {case.method} {case.formatted_path} -> {status}"
    problem = ""
    if status >= 500 and not (status == 503 and "50350" in response.text):  # no loader
        problem = "a server error"
    elif forged and post and not (status == 403 and "40310" in response.text):
        problem = "a forged form was not refused as one (403, 40310)"
    elif post and status == 303 and where != "/console/sign-in":  # the form did its work
        topic = (case.path_parameters or {}).get("topic")
        if caller.name == "anonymous" or findings.owners.get(str(topic)) != caller.name:
            problem = f"{caller.name} acted on what it does not own ({where})"
    if problem:
        findings.add(f"{label}: {problem}: {response.text[:300]}\n  {case.as_curl_command()[:500]}")


def test_fuzzing_the_consoles_pages_and_forms_finds_no_5xx_and_no_forged_form_passing(
    fuzz_hub: Hub,
) -> None:
    findings = Findings(owners={team.topic: name for name, team in fuzz_hub.teams.items()})
    bystander = fuzz_hub.snapshot(BYSTANDER)
    signed_in = _console_caller(fuzz_hub, "sec_a")
    forger = dataclasses.replace(_console_caller(fuzz_hub, "sec_b"), name="forger")
    anonymous = ConsoleCaller("anonymous", "", "")
    schema = schemathesis.openapi.from_dict(_console_document())
    examples = EXAMPLES if fuzz_hub.database_url.startswith("postgresql") else EXAMPLES // 2

    for result in schema.get_all_operations():
        operation = result.ok()
        valid = operation.as_strategy(generation_mode=GenerationMode.POSITIVE)
        cases = st.one_of(
            valid, valid, operation.as_strategy(generation_mode=GenerationMode.NEGATIVE)
        )
        post = operation.method.upper() == "POST"
        # Only the signed-in browser sees pages; it keeps its session (no sign-out of its own).
        callers = [anonymous, forger] if post else [signed_in]
        if post and operation.path != "/console/sign-out":
            callers.append(signed_in)
        for caller in callers:
            _fuzz_console(fuzz_hub, cases, caller, max(2, examples // 8), findings,
                          label=operation.label)  # fmt: skip

    assert fuzz_hub.snapshot(BYSTANDER) == bystander
    print(f"console answers by status: {dict(sorted(findings.statuses.items()))}")
    assert findings.problems == [], "\n".join(findings.problems)


def _fuzz_console(
    hub: Hub,
    cases: st.SearchStrategy[schemathesis.Case],
    caller: ConsoleCaller,
    examples: int,
    findings: Findings,
    *,
    label: str,
) -> None:
    @seed(zlib.crc32(f"console {caller.name} {label}".encode()))
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases, data=st.data())
    def run(case: schemathesis.Case, data: st.DataObject) -> None:
        _console_call(hub, caller, case, data.draw, findings)

    run()
