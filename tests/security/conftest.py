"""The security tier's hub: the real API on the session's Kafka, with two teams that each own a
feed (value and key subjects), a subject of their domain and per-subject settings; and the
callers that attack them (the other team, anonymous, admin).

`Hub.snapshot(team)` reads everything a team owns, so a test can assert that a refused request
changed none of it. With a `Lake`, the teams' feeds have been landed in Delta by the real bronze
loader, and the snapshot holds each feed's table too: its metastore entry and Delta commits after
every case, and its rows once the loader has landed again (`Lake.land`, `Hub.rows`).
"""

import dataclasses
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from pyspark.sql import SparkSession

from hub_kafka.admin import TopicAdmin
from hub_kafka.settings import KafkaSettings
from migrations import migrate
from spark_loaders.settings import LoaderSettings
from tests.support.api_server import serve_api, spawn_api
from tests.support.hub_client import bearer, create_feed, create_key
from tests.support.loader import land_once
from tests.support.waiting import wait_until

REGISTRY = "application/vnd.schemaregistry.v1+json"
ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "security",
    "fields": [{"name": "id", "type": "string"}, {"name": "cents", "type": "long"}],
}
# Compatible with ORDER (a new optional field), so only ownership can refuse it.
ORDER_V2 = {
    **ORDER,
    "fields": [*ORDER["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}
TIMEOUT = httpx.Timeout(30)


def _media_type(path: str) -> str:
    if path.startswith("/topics/"):
        return "application/vnd.kafka.avro.v2+json"  # the REST Proxy endpoint
    return "application/json" if path.startswith("/v1/") else REGISTRY


@dataclass(frozen=True)
class Team:
    """A team of the hub and what it owns."""

    name: str
    key: str
    topic: str  # its feed, with two records

    @property
    def value_subject(self) -> str:
        return f"{self.topic}-value"

    @property
    def key_subject(self) -> str:
        return f"{self.topic}-key"

    @property
    def domain_subject(self) -> str:
        return f"{self.name}.shared_type"

    @property
    def subjects(self) -> tuple[str, str, str]:
        return self.value_subject, self.key_subject, self.domain_subject


@dataclass(frozen=True)
class Lake:
    """The teams' feeds in Delta: the bronze loader of the session's Spark, landing only them,
    with checkpoints of its own and schemas from the tier's hub."""

    spark: SparkSession
    settings: LoaderSettings
    kafka: KafkaSettings
    _locations: dict[str, Path] = field(default_factory=dict)

    @staticmethod
    def table(topic: str) -> str:
        return f"bronze.{topic.replace('.', '_')}"

    def land(self) -> None:
        """Land what the teams' topics hold now."""
        land_once(self.spark, self.settings, self.kafka)

    def commits(self, topic: str) -> tuple[bool, list[str]]:
        """Whether the table is in the metastore, and its Delta log's files: any write to it,
        from any engine, adds one."""
        table = self.table(topic)
        if not self.spark.catalog.tableExists(table):
            return False, []
        if table not in self._locations:
            detail = self.spark.sql(f"DESCRIBE DETAIL {table}").collect()[0]
            self._locations[table] = Path(urlparse(detail["location"]).path)
        log = self._locations[table] / "_delta_log"
        return True, sorted(entry.name for entry in log.iterdir() if entry.suffix == ".json")

    def rows(self, topic: str) -> list[tuple[Any, ...]]:
        """The table's rows, every column, in a stable order."""
        rows = self.spark.table(self.table(topic)).collect()
        return sorted(tuple(str(value) for value in row) for row in rows)


@dataclass(frozen=True)
class Hub:
    url: str
    database_url: str
    bootstrap: str
    admin_key: str
    teams: dict[str, Team]
    outside_topic: str  # a Kafka topic that is no feed
    kafka: TopicAdmin
    lake: Lake | None = None  # the teams' feeds landed in Delta (`with_lake`)

    def headers(self, caller: str) -> dict[str, str]:
        """Headers of a caller: a team's name, `admin` or `anonymous`."""
        if caller == "anonymous":
            return {}
        return bearer(self.admin_key if caller == "admin" else self.teams[caller].key)

    def call(self, caller: str, method: str, path: str, *, body: Any = None) -> httpx.Response:
        """One request as `caller`, its body in the media type the path expects."""
        headers = {"Content-Type": _media_type(path), **self.headers(caller)}
        content = None if body is None else json.dumps(body)
        return httpx.request(
            method, f"{self.url}{path}", headers=headers, content=content, timeout=TIMEOUT
        )

    def snapshot(self, team: str) -> dict[str, Any]:
        """Everything `team` owns, as an admin reads it: subjects (versions, soft-deleted too,
        config, mode), its feed (owner, partitions, schema versions, records) and its topics."""
        owned = self.teams[team]
        seen: dict[str, Any] = {}
        with httpx.Client(base_url=self.url, headers=self.headers("admin"), timeout=TIMEOUT) as c:
            for subject in owned.subjects:
                for path in (
                    f"/subjects/{subject}/versions?deleted=true",
                    f"/subjects/{subject}/versions/latest",
                    f"/config/{subject}",
                    f"/mode/{subject}",
                ):
                    answer = c.get(path)
                    seen[path] = (answer.status_code, answer.json())
            feed = c.get(f"/v1/feeds/{owned.topic}").json()
            seen["feed"] = {
                k: feed.get(k)
                for k in ("owner", "partitions", "schema_versions", "end_offsets", "retention_ms")
            }
        seen["topics"] = (self.kafka.exists(owned.topic), self.kafka.exists(f"{owned.topic}.dlq"))
        if self.lake is not None:
            seen["table"] = self.lake.commits(owned.topic)
        return seen

    def rows(self, team: str) -> list[tuple[Any, ...]]:
        """The rows of `team`'s feed table, after the loader has landed everything again."""
        assert self.lake is not None, "a hub without a lake has no tables"
        self.lake.land()
        return self.lake.rows(self.teams[team].topic)

    def inventory(self) -> tuple[list[str], list[str]]:
        """Every subject (soft-deleted too) and every feed's topic: what no refused request
        may add to."""
        subjects = httpx.get(
            f"{self.url}/subjects?deleted=true", headers=self.headers("admin"), timeout=TIMEOUT
        ).json()
        feeds = httpx.get(f"{self.url}/v1/feeds", headers=self.headers("admin"), timeout=TIMEOUT)
        return sorted(subjects), sorted(feed["topic"] for feed in feeds.json())


def _seed_team(url: str, database_url: str, name: str, suffix: str) -> Team:
    """A team with a keyed feed holding two records, a domain subject and subject settings."""
    key = create_key(database_url, team=name)
    team = Team(name=name, key=key, topic=f"{name}.orders_{suffix}")
    create_feed(url, team.key, topic=team.topic, schema=ORDER, owner=name, key_fields=["id"])
    with httpx.Client(base_url=url, headers=bearer(team.key), timeout=TIMEOUT) as client:
        published = client.post(
            f"/v1/feeds/{team.topic}/records",
            json={
                "records": [{"value": {"id": "1", "cents": 5}}, {"value": {"id": "2", "cents": 7}}]
            },
        )
        assert published.status_code == 200, published.text
        for path, body in (
            (f"/subjects/{team.domain_subject}/versions", {"schema": json.dumps(ORDER)}),
            (f"/config/{team.value_subject}", {"compatibility": "FULL"}),
            (f"/mode/{team.domain_subject}", {"mode": "READWRITE"}),
        ):
            method = "POST" if path.startswith("/subjects") else "PUT"
            answer = client.request(method, path, json=body)
            assert answer.status_code == 200, answer.text
    return team


@contextmanager
def _api_process(*, home: Path, database_url: str, bootstrap: str, **api: str) -> Iterator[str]:
    """`hub api serve` as a process of its own: its work runs beside the test's on the other
    core, and its log (`home/api.log`) keeps the traceback of any 500."""
    migrate.upgrade(database_url)
    process, url = spawn_api(
        home=home,
        database_url=database_url,
        bootstrap_servers=bootstrap,
        log=home / "api.log",
        **api,
    )
    try:
        wait_until(
            lambda: _answers(url) or process.poll() is not None, timeout_s=60, what="API start"
        )
        assert process.poll() is None, (home / "api.log").read_text()[-3000:]
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def running_hub(
    *,
    database_url: str,
    bootstrap: str,
    teams: tuple[str, ...] = ("sec_a", "sec_b"),
    process_home: Path | None = None,
    **api: Any,
) -> Iterator[Hub]:
    """A hub on `database_url` with `teams` seeded; `api` are more `ApiSettings` fields. With
    `process_home`, the API runs as a process of its own there (`_api_process`)."""
    suffix = uuid.uuid4().hex[:8]  # Kafka is the session's: topics must not clash across hubs
    served = (
        _api_process(
            home=process_home,
            database_url=database_url,
            bootstrap=bootstrap,
            **{name: str(value) for name, value in api.items()},
        )
        if process_home is not None
        else serve_api(database_url=database_url, bootstrap_servers=bootstrap, api=api)
    )
    with served as url:
        outside = f"outside.topic_{suffix}"
        kafka = TopicAdmin(KafkaSettings(bootstrap_servers=bootstrap))
        assert kafka.create(outside, partitions=1, config={})
        yield Hub(
            url=url,
            database_url=database_url,
            bootstrap=bootstrap,
            admin_key=create_key(database_url, team=None),
            teams={name: _seed_team(url, database_url, name, suffix) for name in teams},
            outside_topic=outside,
            kafka=kafka,
        )


def with_lake(hub: Hub, spark: SparkSession, base: LoaderSettings, home: Path) -> Hub:
    """`hub`, its teams' feeds landed in Delta by the bronze loader (checkpoints under `home`)."""
    topics = "|".join(team.topic.replace(".", "\\.") for team in hub.teams.values())
    settings = base.model_copy(
        update={
            "registry_url": hub.url,
            "registry_key": hub.admin_key,
            "checkpoint_dir": home / "checkpoints",
            "topic_pattern": f"^({topics})$",
            "schema_refresh_seconds": 0.0,
        }
    )
    lake = Lake(spark, settings, KafkaSettings(bootstrap_servers=hub.bootstrap))
    lake.land()
    for team in hub.teams.values():
        assert len(lake.rows(team.topic)) == 2, f"{team.topic} was not landed"
    return dataclasses.replace(hub, lake=lake)


@pytest.fixture(scope="module")
def hub(
    kafka_bootstrap: str,
    spark: SparkSession,
    loader_settings: LoaderSettings,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Hub]:
    """A hub of the module's own, on SQLite, with teams `sec_a` and `sec_b`, their feeds landed
    in Delta."""
    home = tmp_path_factory.mktemp("security")
    with running_hub(database_url=f"sqlite:///{home / 'hub.db'}", bootstrap=kafka_bootstrap) as hub:
        yield with_lake(hub, spark, loader_settings, home)
