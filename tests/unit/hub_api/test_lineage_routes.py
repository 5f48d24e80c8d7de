"""`GET /v1/lineage/rows` and `/v1/lineage/positions`: answers, ownership and bad input; silver
and gold rows by key through the loader's control routes (`GET /row`, a stand-in for its Spark
query)."""

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from catalog.errors import FeedNotFound
from catalog.lineage import LineageStore, LineageSync
from catalog.teams import TeamStore
from catalog.types import TeamName
from hub_api.errors import install_error_handlers
from hub_api.keys import KeyVerifier
from hub_api.lineage import routes as lineage_routes
from hub_api.lineage_service import parse_key
from hub_api.loader_client import LoaderClient, LoaderLedger
from hub_api.publishing import request_id_of
from hub_api.services import HubServices
from hub_api.settings import ApiSettings
from hub_core.errors import ErrorCode, HubError
from hub_core.ledger import (
    SWAPPED_IN,
    LedgerEntry,
    LedgerKind,
    OffsetRange,
    RequestSpan,
    TableRead,
)
from hub_kafka.reader import RawRecord
from registry.types import SchemaId
from registry.wire import frame
from spark_loaders.control import status
from spark_loaders.control.status import ControlRoutes, LoaderStatus
from spark_loaders.settings import LoaderSettings
from tests.support.ledger_log import write_commit
from tests.unit.hub_api.app_services import install

pytestmark = pytest.mark.unit

TOPIC = "sales.orders"
BRONZE = "bronze.sales_orders"


@dataclass
class _Feed:
    owner: TeamName
    readers: tuple[TeamName, ...] = ()


CUSTOMERS = "shop.customers"  # another team's feed, the source of a dimension
OWNERS = {TOPIC: "sales", CUSTOMERS: "other"}
READERS = {TOPIC: (TeamName("finance"),)}  # granted reads of sales.orders


class _Feeds:
    def current(self, topic: str) -> _Feed:
        if topic not in OWNERS:
            raise FeedNotFound(topic)
        return _Feed(TeamName(OWNERS[topic]), READERS.get(topic, ()))


class _Reader:
    def at(self, topic: str, partition: int, offset: int) -> RawRecord | None:
        if offset != 11:
            return None  # gone from Kafka
        headers = (("hub.request-id", b"req-1"), ("hub.idempotency-key", b"k-1:1"))
        return RawRecord(topic, partition, offset, 0, None, frame(SchemaId(7), b"\x02"), headers)


class _Registry:
    def schema(self, *, schema_id: int) -> None:
        raise HubError(f"schema {schema_id} not found")


SILVER = "silver.sales_orders_current"
FACT = "gold.fact_orders"  # built from BRONZE, keyed on DIMENSION
DIMENSION = "gold.dim_customer"  # built from CUSTOMERS; its inferred members from BRONZE


def _silver_row(table: str, key: dict[str, Any]) -> dict[str, Any]:
    """The loader's answer for silver and gold rows, as `row_lookup.row_position` gives it."""
    if set(key) != {"id"}:
        raise HubError(f"{table} has no column 'nope'", code=ErrorCode.INVALID_ROW_KEY)
    if str(key["id"]) != "42":
        raise HubError(f"No row of {table} has id={key['id']!r}.", code=ErrorCode.LINEAGE_NOT_FOUND)
    bronze = "bronze.shop_customers" if table == DIMENSION else BRONZE
    return {"table": table, "bronze_table": bronze, "partition": 0, "offset": 11}


@pytest.fixture
def client(hub_engine: Engine, tmp_path: Path) -> tuple[TestClient, dict[str, str]]:
    bronze = tmp_path / "bronze.db" / "sales_orders"
    write_commit(
        bronze,
        0,
        LedgerEntry(
            LedgerKind.BRONZE,
            batch=0,
            topic=TOPIC,
            ranges=(OffsetRange(0, 10, 12),),
            requests=(RequestSpan("req-1", 0, 10, 12),),
        ),
    )
    write_commit(
        tmp_path / "silver.db" / "sales_orders_current",
        1,
        LedgerEntry(LedgerKind.SILVER, batch=0, reads=(TableRead(BRONZE, 0, 0),)),
    )
    write_commit(
        tmp_path / "bronze.db" / "shop_customers",
        0,
        LedgerEntry(LedgerKind.BRONZE, batch=0, topic=CUSTOMERS, ranges=(OffsetRange(0, 0, 20),)),
    )
    history = "silver.shop_customers_history"
    write_commit(
        tmp_path / "silver.db" / "shop_customers_history",
        0,
        LedgerEntry(LedgerKind.SILVER, batch=0, reads=(TableRead("bronze.shop_customers", 0, 0),)),
    )
    dimension = tmp_path / "gold.db" / "dim_customer"
    write_commit(dimension, 0, LedgerEntry(LedgerKind.GOLD, reads=(TableRead(history, 0, 0),)))
    # Inferred members for the fact's orders: the newest entry names the fact's bronze table.
    write_commit(dimension, 1, LedgerEntry(LedgerKind.GOLD, reads=(TableRead(BRONZE, 0, 0),)))
    reads = (TableRead(BRONZE, 0, 0), TableRead(DIMENSION, 0, 1))
    write_commit(tmp_path / "gold.db" / "fact_orders", 0, LedgerEntry(LedgerKind.GOLD, reads=reads))
    teams = TeamStore(hub_engine)
    for team in ("sales", "other", "finance"):
        teams.register(name=TeamName(team))
    app = FastAPI()
    install_error_handlers(app)
    settings = ApiSettings(loader_url="http://loader.test", loader_token="row-token")
    loader_settings = LoaderSettings(control_token="row-token", warehouse_dir=tmp_path)
    routes = ControlRoutes(loader_settings, LoaderStatus(loader_settings), row=_silver_row)
    install(
        app,
        settings=settings,
        keys=KeyVerifier(teams, cache_seconds=60),
        lineage_store=LineageStore(hub_engine),
        lineage_sync=LineageSync(hub_engine, tmp_path, min_interval_s=0),
        feeds=_Feeds(),
        reader=_Reader(),
        registry=_Registry(),
        loader=LoaderClient(settings, transport=httpx.WSGITransport(app=routes)),
    )
    app.include_router(lineage_routes.router)
    tokens = {
        "sales": teams.create_key(team=TeamName("sales"))[1],
        "other": teams.create_key(team=TeamName("other"))[1],
        "finance": teams.create_key(team=TeamName("finance"))[1],
        "admin": teams.create_key(team=None, admin=True)[1],
    }
    return TestClient(app), {k: f"Bearer {v}" for k, v in tokens.items()}


def test_the_owning_team_traces_a_row_to_its_request_and_every_version(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    http, keys = client

    answer = http.get(
        "/v1/lineage/rows",
        params={"table": BRONZE, "partition": 0, "offset": 11},
        headers={"Authorization": keys["sales"]},
    )

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["topic"], body["bronze_version"], body["in_kafka"]) == (TOPIC, 0, True)
    assert (body["request_id"], body["idempotency_key"], body["schema_id"]) == ("req-1", "k-1", 7)
    assert [(v["table"], v["version"]) for v in body["versions"]] == [
        (BRONZE, 0),
        (DIMENSION, 1),  # the inferred members its orders made
        (FACT, 0),
        ("silver.sales_orders_current", 1),
    ]


def test_a_request_id_leads_to_every_version_for_its_team_and_an_admin(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    http, keys = client

    answers = [
        http.get("/v1/lineage/positions", params={"request_id": "req-1"},
                 headers={"Authorization": keys[who]})
        for who in ("sales", "admin", "finance", "other")
    ]  # fmt: skip

    # The owner, an admin and a team the owner granted reads trace it; no other team does.
    assert [a.status_code for a in answers] == [200, 200, 200, 403]
    assert answers[0].json()["bronze"][0]["first_offset"] == 10
    assert answers[2].json() == answers[0].json()
    assert answers[3].json()["error_code"] == 40301


@pytest.mark.parametrize(
    ("path", "params", "status", "code"),
    [
        ("/v1/lineage/rows", {"table": "silver.x", "partition": 0, "offset": 1}, 422, 42280),
        ("/v1/lineage/rows", {"table": BRONZE, "partition": 0, "offset": 99}, 404, 40460),
        ("/v1/lineage/positions", {}, 422, 42280),
        ("/v1/lineage/positions", {"lsn": 5, "request_id": "x"}, 422, 42280),
        ("/v1/lineage/positions", {"topic": TOPIC, "partition": 0}, 422, 42280),
        ("/v1/lineage/positions", {"topic": "other.feed", "partition": 0, "offset": 1}, 403, 40301),
        ("/v1/lineage/positions", {"lsn": 5}, 404, 40460),
        ("/v1/lineage/positions", {"request_id": "a\x00b"}, 422, 42280),
        ("/v1/lineage/positions", {"topic": "Sales\n", "partition": 0, "offset": 1}, 422, 42280),
    ],
)
def test_bad_or_unanswerable_questions_get_a_4xx_with_a_code(
    client: tuple[TestClient, dict[str, str]],
    path: str,
    params: dict[str, Any],
    status: int,
    code: int,
) -> None:
    http, keys = client

    answer = http.get(path, params=params, headers={"Authorization": keys["sales"]})

    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code


@pytest.mark.parametrize("given", [None, "", "a b", "x" * 65, "id\n", "ü"])
def test_a_request_id_that_is_not_a_plain_token_is_replaced_by_a_new_unique_one(
    given: str | None,
) -> None:
    made = {request_id_of(given) for _ in range(3)}

    assert len(made) == 3 and given not in made
    assert all(re.fullmatch(r"[0-9a-f]{16}-[0-9a-f]+", m) for m in made)


def test_a_plain_token_request_id_is_kept() -> None:
    assert request_id_of("req-7.a:b_c") == "req-7.a:b_c"


@pytest.mark.parametrize("key", ["id=42", '{"id": 42}', " id = 42 "])
def test_a_silver_row_found_by_its_key_traces_to_its_bronze_record(
    client: tuple[TestClient, dict[str, str]], key: str
) -> None:
    http, keys = client

    answer = http.get(
        "/v1/lineage/rows", params={"table": SILVER, "key": key},
        headers={"Authorization": keys["sales"]},
    )  # fmt: skip

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["table"], body["bronze_table"], body["topic"]) == (SILVER, BRONZE, TOPIC)
    assert (body["partition"], body["offset"], body["request_id"]) == (0, 11, "req-1")
    assert body["key"] in ({"id": "42"}, {"id": 42})
    assert (SILVER, 1) in [(v["table"], v["version"]) for v in body["versions"]]


@pytest.mark.parametrize(
    ("table", "who", "bronze", "topic", "read"),
    [
        (FACT, "sales", BRONZE, TOPIC, BRONZE),
        # A dimension's rows come from its silver history's feed, not from the fact feed its
        # inferred members were made for.
        (DIMENSION, "other", "bronze.shop_customers", CUSTOMERS, "silver.shop_customers_history"),
    ],
)
def test_a_gold_row_found_by_its_key_traces_to_the_record_of_its_source_feed(
    client: tuple[TestClient, dict[str, str]],
    table: str,
    who: str,
    bronze: str,
    topic: str,
    read: str,
) -> None:
    http, keys = client

    answer = http.get(
        "/v1/lineage/rows", params={"table": table, "key": "id=42"},
        headers={"Authorization": keys[who]},
    )  # fmt: skip

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["table"], body["bronze_table"], body["topic"]) == (table, bronze, topic)
    assert (body["partition"], body["offset"], body["key"]) == (0, 11, {"id": "42"})
    versions = {(v["table"], v["version"]) for v in body["versions"]}
    assert {(bronze, 0), (table, 0)} <= versions
    assert read == BRONZE or (read, 0) in versions


@pytest.mark.parametrize(
    ("params", "who", "status", "code"),
    [
        ({"table": SILVER, "key": "id=7"}, "sales", 404, 40460),
        ({"table": SILVER, "key": "nope=1"}, "sales", 422, 42281),
        ({"table": SILVER, "key": "id"}, "sales", 422, 42281),
        ({"table": SILVER, "key": '{"id": [1]}'}, "sales", 422, 42281),
        ({"table": SILVER, "key": "id=42", "partition": 0}, "sales", 422, 42280),
        ({"table": "gold.fact_x", "key": "id=42"}, "sales", 404, 40460),
        ({"table": "gold.cube_orders", "key": "id=42"}, "sales", 422, 42280),
        ({"table": DIMENSION, "key": "id=42"}, "sales", 403, 40301),
        ({"table": FACT, "key": "id=42"}, "other", 403, 40301),
        ({"table": FACT, "key": "id=7"}, "sales", 404, 40460),
        ({"table": "silver.unknown_current", "key": "id=42"}, "sales", 404, 40460),
        ({"table": SILVER, "key": "id=42"}, "other", 403, 40301),
    ],
)
def test_bad_or_forbidden_row_keys_get_a_4xx_with_a_code(
    client: tuple[TestClient, dict[str, str]],
    params: dict[str, Any],
    who: str,
    status: int,
    code: int,
) -> None:
    http, keys = client

    answer = http.get("/v1/lineage/rows", params=params, headers={"Authorization": keys[who]})

    assert answer.status_code == status, answer.text
    assert answer.json()["error_code"] == code


def test_without_a_loader_a_row_by_key_is_503_50350(
    client: tuple[TestClient, dict[str, str]],
) -> None:
    http, keys = client
    app = cast(FastAPI, http.app)
    services: HubServices = app.state.services
    app.state.services = replace(services, loader=LoaderClient(ApiSettings(loader_url=None)))

    answer = http.get(
        "/v1/lineage/rows", params={"table": SILVER, "key": "id=42"},
        headers={"Authorization": keys["sales"]},
    )  # fmt: skip

    assert (answer.status_code, answer.json()["error_code"]) == (503, 50350)


@pytest.mark.parametrize(
    ("text", "key"),
    [("id=42", {"id": "42"}), ("a=1, b=x", {"a": "1", "b": "x"}), ('{"id": 42}', {"id": 42})],
)
def test_a_row_key_is_col_value_pairs_or_a_json_object(text: str, key: dict[str, Any]) -> None:
    assert parse_key(text) == key


def _loader_ledger(warehouse: Path) -> LoaderLedger:
    """The API's ledger source reading through the loader's `/ledger` on `warehouse`."""
    settings = LoaderSettings(control_token="ledger-token", warehouse_dir=warehouse)
    routes = ControlRoutes(settings, LoaderStatus(settings))
    api = ApiSettings(loader_url="http://loader.test", loader_token="ledger-token")
    return LoaderLedger(LoaderClient(api, transport=httpx.WSGITransport(app=routes)))


def test_an_api_that_cannot_read_the_warehouse_indexes_it_through_the_loader_page_by_page(
    client: tuple[TestClient, dict[str, str]],
    hub_engine: Engine,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(status, "LEDGER_PAGE", 1)  # the API asks again after each commit
    sync = LineageSync(hub_engine, _loader_ledger(tmp_path), min_interval_s=0)

    assert sync.tables() == LineageSync(hub_engine, tmp_path).tables()
    first = sync.sync()
    write_commit(
        tmp_path / "bronze.db" / "sales_orders",
        1,
        LedgerEntry(LedgerKind.BRONZE, batch=1, topic=TOPIC, ranges=(OffsetRange(0, 13, 20),)),
    )
    second = sync.sync()

    assert (first, second) == (7, 1)  # every entry of the warehouse, then the new one alone
    store = LineageStore(hub_engine)
    assert [h.version for h in store.bronze_holding(table=BRONZE, partition=0, offset=11)] == [0]
    assert [h.version for h in store.bronze_holding(table=BRONZE, partition=0, offset=15)] == [1]
    assert store.sources_of(FACT) == [BRONZE, DIMENSION]
    assert sync.sync() == 0


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"table": "bronze.unknown"}, ErrorCode.LINEAGE_NOT_FOUND),
        ({"table": "bronze.sales_orders/../../etc"}, ErrorCode.LINEAGE_NOT_FOUND),
        ({"table": "quarantine.sales_orders"}, ErrorCode.LINEAGE_NOT_FOUND),
        ({"table": BRONZE, "after": "one"}, ErrorCode.MALFORMED_REQUEST),
    ],
)
def test_the_loader_reads_the_ledger_of_its_own_tables_alone(
    client: tuple[TestClient, dict[str, str]], tmp_path: Path, params: dict[str, str], code: int
) -> None:
    settings = LoaderSettings(control_token="ledger-token", warehouse_dir=tmp_path)
    routes = ControlRoutes(settings, LoaderStatus(settings))
    with httpx.Client(
        transport=httpx.WSGITransport(app=routes),
        base_url="http://loader.test",
        headers={"Authorization": "Bearer ledger-token"},
    ) as loader:
        answer = loader.get("/ledger", params=params)

    assert answer.json()["error_code"] == code
    assert answer.status_code in (400, 404)


def test_table_ids_and_replaced_locations_reach_the_index_through_the_loader(
    hub_engine: Engine, tmp_path: Path
) -> None:
    # bronze.orders was rebuilt and swapped in; silver read version 0 of each location.
    landed = LedgerEntry(LedgerKind.BRONZE, batch=0, topic="orders", ranges=(OffsetRange(0, 0, 4),))
    write_commit(tmp_path / "bronze.db" / "orders", 0, landed, table_id="id-old")
    rebuild = tmp_path / "_rebuilds" / "orders" / "20261128T100000Z"
    write_commit(rebuild, 0, replace(landed, batch=None), table_id="id-new")
    (rebuild / SWAPPED_IN).write_text("bronze.orders")
    history = tmp_path / "silver.db" / "orders_history"
    for version, table_id in enumerate(("id-old", "id-new")):
        read = TableRead("bronze.orders", 0, 0, table_id)
        write_commit(history, version, LedgerEntry(LedgerKind.SILVER, batch=0, reads=(read,)))

    LineageSync(hub_engine, _loader_ledger(tmp_path), min_interval_s=0).sync()
    store = LineageStore(hub_engine)

    assert [v.version for v in store.downstream([("bronze.orders", 0)])] == [1]
    assert [v.version for v in store.downstream([("bronze.orders@original", 0)])] == [0]
    held = store.bronze_holding(topic="orders", partition=0, offset=2)
    assert sorted(h.table for h in held) == ["bronze.orders", "bronze.orders@original"]
