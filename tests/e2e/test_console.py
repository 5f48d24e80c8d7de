"""The web console in a real headless Chromium against the session's API and Kafka: sign-in,
the feeds page, a feed's versions, diff, records and dead letters, and connector control by
its owner, with another team's key seeing no controls and refused when it forges one; and the
loader's view (tables, lag, freshness, quarantine and its replay by the owner) through an API
that reads a loader's control routes; and the Lineage page tracing bronze rows, silver rows by
key and source positions, with another team's key shown no lineage of the owner's feeds."""

import html
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from playwright.sync_api import (
    APIResponse,
    Browser,
    BrowserContext,
    Page,
    expect,
    sync_playwright,
)
from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert

from tests.support.connect import ConnectHub, connector_file
from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.waiting import wait_until

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from spark_loaders.settings import LoaderSettings

pytestmark = pytest.mark.e2e

CHROMIUM = "/usr/bin/chromium"
# Set to a folder to keep the screenshots there as well (docs/images/console/ is made so).
SCREENSHOTS = os.environ.get("HUB_CONSOLE_SCREENSHOTS")

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "note", "type": "string", "default": ""},
    ],
}
ORDER_V2 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "order_id", "type": "string"},
        {"name": "quantity", "type": "long", "aliases": ["qty"]},
        {"name": "channel", "type": "string", "default": "web"},
    ],
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium, Debian's, for the tests of this module. Closed after them:
    Playwright's sync API keeps an event loop running on this thread while it is open, and
    every later `asyncio.run` of the session would fail."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make setup` installs Debian's chromium package")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--headless"]
        )
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    fresh = browser.new_context(viewport={"width": 1280, "height": 900})
    yield fresh
    fresh.close()


@pytest.fixture(scope="module")
def shop(team_key: Callable[[str], str]) -> str:
    """A key of team `shop`, which owns the feed and the connector under test."""
    return team_key("shop")


@pytest.fixture(scope="module")
def rival(team_key: Callable[[str], str]) -> str:
    return team_key("rivals")


@pytest.fixture(scope="module")
def orders(api_url: str, shop: str) -> str:
    """A feed of team `shop` with two schema versions, three records and one dead letter."""
    topic = unique_topic("shop")
    create_feed(api_url, shop, topic=topic, schema=ORDER_V1, owner="shop")
    registered = httpx.post(
        f"{api_url}/subjects/{topic}-value/versions",
        headers=bearer(shop),
        json={"schema": json.dumps(ORDER_V2)},
        timeout=30,
    )
    assert registered.status_code == 200, registered.text
    good = [{"value": {"order_id": f"o-{i}", "quantity": i}} for i in (1, 2, 3)]
    assert publish(api_url, shop, topic, good).status_code == 200
    bad = [{"value": {"order_id": "o-bad", "quantity": "many"}}]
    assert publish(api_url, shop, topic, bad, on_error="dlq").status_code == 200
    return topic


def _shot(page: Page, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / f"{name}.png"))


def _sign_in(context: BrowserContext, api_url: str, key: str) -> Page:
    page = context.new_page()
    page.goto(f"{api_url}/console")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Feeds", exact=True)).to_be_visible()
    return page


def _post_form(context: BrowserContext, page: Page, url: str) -> APIResponse:
    """A form post with `page`'s session: its cookie, its form token and its origin, as a
    person could forge it from the console's own page."""
    token = page.locator('input[name="csrf_token"]').first.get_attribute("value") or ""
    origin = "/".join(url.split("/")[:3])
    return context.request.post(url, form={"csrf_token": token}, headers={"Origin": origin})


def test_sign_in_refuses_a_wrong_key_and_keeps_the_key_from_scripts(
    browser: Browser, context: BrowserContext, api_url: str, shop: str, tmp_path: Path
) -> None:
    page = context.new_page()
    page.goto(f"{api_url}/console/feeds")  # not signed in: the sign-in page
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("API key").fill("not-a-key")
    page.keyboard.press("Enter")
    expect(page.get_by_role("alert")).to_contain_text("not a valid API key")
    _shot(page, tmp_path, "sign-in")

    page = _sign_in(context, api_url, shop)
    expect(page.get_by_text("Signed in as team shop")).to_be_visible()
    # The only cookie is the session's: a random id, not the key, for /console only.
    (cookie,) = context.cookies()
    assert cookie["name"] == "hub_console_session"
    assert shop.split("_", 2)[2] not in cookie["value"]
    assert (cookie["httpOnly"], cookie["secure"], cookie["sameSite"]) == (True, True, "Strict")
    assert cookie["path"] == "/console"
    assert cookie["expires"] > 0  # Max-Age: the session's lifetime
    assert page.evaluate("document.cookie") == ""
    assert shop not in page.content()
    # The cookie stands for no key: the API itself still wants a header.
    assert context.request.get(f"{api_url}/v1/whoami").status == 401
    page.get_by_role("link", name="Connectors").click()
    expect(page.get_by_role("heading", name="Connectors", exact=True)).to_be_visible()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert [c["name"] for c in context.cookies()] == ["hub_console_form"]  # the sign-in form's
    # Sign-out ended the session in the hub: a copy of its cookie signs nobody in.
    copy = browser.new_context()
    try:
        copy.add_cookies([{"name": cookie["name"], "value": cookie["value"],
                           "domain": cookie["domain"], "path": cookie["path"]}])  # fmt: skip
        replayed = copy.new_page()
        replayed.goto(f"{api_url}/console/feeds")
        expect(replayed.get_by_role("heading", name="Sign in")).to_be_visible()
    finally:
        copy.close()


def test_feeds_page_shows_owner_kind_partitions_and_records_of_the_last_hour(
    context: BrowserContext, api_url: str, rival: str, orders: str, tmp_path: Path
) -> None:
    page = _sign_in(context, api_url, rival)
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=orders))
    cells = [c.strip() for c in row.get_by_role("cell").all_inner_texts()]
    # Owner, kind, partitions, records/s, chart, records in the last hour, newest record.
    assert cells[:3] == ["shop", "event", "1"]
    assert float(cells[3]) > 0
    assert cells[5] == "3"
    assert cells[6].endswith("UTC")
    chart = row.get_by_role("img")
    assert chart.get_attribute("aria-label", timeout=5_000).endswith(", 3")  # type: ignore[union-attr]
    _shot(page, tmp_path, "feeds")


def test_feed_page_shows_versions_their_diff_latest_records_and_dead_letters(
    context: BrowserContext, api_url: str, shop: str, orders: str, tmp_path: Path
) -> None:
    page = _sign_in(context, api_url, shop)
    page.get_by_role("link", name=orders).click()
    expect(page.get_by_role("heading", name=orders, exact=True)).to_be_visible()

    diff = page.locator("table", has=page.get_by_role("columnheader", name="Detail"))
    changes = {
        tuple(c.strip() for c in r.get_by_role("cell").all_inner_texts()[:2]): r.inner_text()
        for r in diff.get_by_role("row").all()[1:]
    }
    assert set(changes) == {("renamed", "was 'qty'"), ("widened", "int → long"),
                            ("added", "string, default \"web\""),
                            ("removed", "string, default \"\"")}  # fmt: skip
    renamed = changes[("renamed", "was 'qty'")]
    assert "quantity" in renamed
    assert "compatible: the newer schema finds the field by its name or alias" in renamed
    assert "incompatible: READER_FIELD_MISSING_DEFAULT_VALUE: field 'qty'" in renamed

    # The other way round: version 1 knows no alias, so its `qty` is a new field without a
    # default, which version 1 cannot fill when it reads data of version 2.
    page.get_by_label("From version").select_option("2")
    page.get_by_label("to version").select_option("1")
    page.get_by_role("button", name="Compare").click()
    expect(page.get_by_role("heading", name="Changes from version 2 to version 1")).to_be_visible()
    qty = diff.get_by_role("row").filter(has=page.get_by_role("rowheader", name="qty"))
    expect(qty).to_contain_text("added")
    expect(qty).to_contain_text("incompatible: READER_FIELD_MISSING_DEFAULT_VALUE")
    _shot(page, tmp_path, "feed")

    records = page.locator("section", has=page.get_by_role("heading", name="Latest records"))
    rows = records.get_by_role("row").all()[1:]
    assert len(rows) == 3
    versions = httpx.get(f"{api_url}/subjects/{orders}-value/versions/2", timeout=30).json()
    newest = [c.strip() for c in rows[0].get_by_role("cell").all_inner_texts()]
    assert newest[4:6] == [str(versions["id"]), "2"]
    assert json.loads(newest[6]) == {"order_id": "o-3", "quantity": 3, "channel": "web"}

    letters = page.locator("section", has=page.get_by_role("heading", name="Dead letters"))
    (letter,) = letters.get_by_role("row").all()[1:]
    expect(letter).to_contain_text("42220")
    expect(letter).to_contain_text("at $.quantity")
    expect(letter).to_contain_text('"many"')
    expect(letters).to_contain_text("hub load replay")  # the owner is told how replay works


@pytest.fixture
def running_connector(
    tmp_path: Path, connect_hub: ConnectHub, shop: str
) -> Iterator[tuple[str, ConnectHub]]:
    """A jdbc connector of team `shop` over a SQLite table, run by a worker in this process."""
    folder = tmp_path / "source"
    folder.mkdir()
    engine = create_engine(f"sqlite:///{folder / 'app.db'}")
    table = Table(
        "events",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=False),
        Column("kind", String(20), nullable=False),
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": i, "kind": "click"} for i in (1, 2)])
    engine.dispose()
    connector = connector_file(
        tmp_path,
        kind="jdbc",
        owner="shop",
        prefixed=True,
        source={
            "url": f"sqlite:///{folder / 'app.db'}",
            "mode": "incrementing",
            "incrementing_column": "id",
            "tables": ["events"],
            "poll_seconds": 0.2,
        },
    )
    with connect_hub.worker(connector.file):
        yield connector.name, connect_hub


def _state(api_url: str, name: str) -> Any:
    response = httpx.get(f"{api_url}/v1/connectors/{name}/status", timeout=30)
    return response.json()["connector"]["state"] if response.status_code == 200 else None


def test_connector_owner_pauses_resumes_and_restarts_and_another_team_cannot(
    browser: Browser,
    context: BrowserContext,
    api_url: str,
    shop: str,
    rival: str,
    running_connector: tuple[str, ConnectHub],
    tmp_path: Path,
) -> None:
    name, _hub = running_connector
    wait_until(lambda: _state(api_url, name) == "RUNNING", timeout_s=60, what="RUNNING")
    page = _sign_in(context, api_url, shop)
    page.get_by_role("link", name="Connectors").click()
    section = page.locator(f"section#connector-{name}")
    expect(section.get_by_role("row", name="Owner")).to_contain_text("shop")
    expect(section.get_by_role("row", name="State")).to_contain_text("RUNNING")
    expect(section.get_by_role("row", name="Position")).to_contain_text('"id": 2')
    _shot(page, tmp_path, "connectors")

    for action, state in (("Pause", "PAUSED"), ("Resume", "RUNNING"), ("Restart", "RUNNING")):
        page.locator(f"section#connector-{name}").get_by_role(
            "button", name=f"{action} {name}"
        ).click()
        expect(page.get_by_role("status")).to_contain_text(f"to {action.lower()}")
        wait_until(lambda s=state: _state(api_url, name) == s, timeout_s=30, what=state)
        page.reload()
        expect(page.locator(f"section#connector-{name}").get_by_role("row", name="State")
               ).to_contain_text(state)  # fmt: skip

    other = browser.new_context()
    try:
        rival_page = _sign_in(other, api_url, rival)
        rival_page.get_by_role("link", name="Connectors").click()
        rival_section = rival_page.locator(f"section#connector-{name}")
        # The other team sees the connector (its state may be anything by now) but no action.
        expect(rival_section.get_by_role("row", name="Owner")).to_contain_text("shop")
        expect(rival_section.get_by_role("button")).to_have_count(0)
        _shot(rival_page, tmp_path, "connectors-other-team")
        # A forged action with the other team's cookie and form token is refused by the server;
        # without the token, it is refused as a forged form before that.
        forged = _post_form(other, rival_page, f"{api_url}/console/connectors/{name}/pause")
        assert forged.status == 403
        assert f"Connector '{name}' belongs to team 'shop'" in html.unescape(forged.text())
        tokenless = other.request.post(f"{api_url}/console/connectors/{name}/pause",
                                       headers={"Origin": api_url})  # fmt: skip
        assert tokenless.status == 403 and "40310" in tokenless.text()
    finally:
        other.close()
    target = httpx.get(f"{api_url}/v1/connectors/{name}", timeout=30).json()["target_state"]
    assert target == "STARTED"


# The loader's view: a feed landed in bronze by the session's Spark, one record of it in
# quarantine (written with a schema its feed's cannot read), the loader's /status, /plan and
# /replay served as the loader serves them, and an API that reads them.
ITEM_V1 = {
    "type": "record",
    "name": "Item",
    "fields": [
        {"name": "item_id", "type": "string"},
        {"name": "qty", "type": "int"},
        {"name": "ratio", "type": "double"},
    ],
}
# Written under another subject: it has no `ratio`, which ITEM_V1 needs (no default).
STRAY = {
    "type": "record",
    "name": "Item",
    "fields": [{"name": "item_id", "type": "string"}, {"name": "qty", "type": "int"}],
}
# The fix: `ratio` gets a default, so the stray record resolves and replay lands it.
ITEM_V2 = {**ITEM_V1, "fields": [*ITEM_V1["fields"][:2], {"name": "ratio", "type": "double",
                                                           "default": 0.0}]}  # fmt: skip
CONTROL_TOKEN = "console-test-control-token"


@pytest.fixture(scope="module")
def items(
    api_url: str,
    admin_key: str,
    shop: str,
    kafka_bootstrap: str,
    spark: "SparkSession",
    loader_settings: "LoaderSettings",
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, "LoaderSettings"]:
    """A feed of team `shop`: three records in bronze, one in quarantine (SCHEMA_UNRESOLVABLE);
    and the loader settings that landed it."""
    from pydantic import SecretStr

    from hub_kafka.settings import KafkaSettings
    from spark_loaders.bronze.loader import BronzeLoader
    from spark_loaders.runtime.metrics import LOADER_METRICS
    from spark_loaders.runtime.progress import last_progress
    from tests.support.loader import produce_avro, register

    topic = unique_topic("shop")
    create_feed(api_url, shop, topic=topic, schema=ITEM_V1, owner="shop")
    good = [{"value": {"item_id": f"i-{i}", "qty": i, "ratio": 0.5}} for i in (1, 2, 3)]
    assert publish(api_url, shop, topic, good).status_code == 200
    stray_id = register(api_url, admin_key, f"{topic}.stray-value", STRAY)
    produce_avro(kafka_bootstrap, topic, stray_id, STRAY, [{"item_id": "i-stray", "qty": 7}])
    settings = loader_settings.model_copy(
        update={
            "checkpoint_dir": tmp_path_factory.mktemp("console-loader") / "checkpoints",
            "topic_pattern": topic.replace(".", "\\."),
            "schema_refresh_seconds": 0.0,
            "status_refresh_seconds": 1.0,
            "control_token": SecretStr(CONTROL_TOKEN),
        }
    )
    query = BronzeLoader(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap)).start(
        available_now=True
    )
    query.awaitTermination(600)
    assert query.exception() is None
    LOADER_METRICS.follow([last_progress(query)])  # as the running loader does every second
    return topic, settings


@pytest.fixture(scope="module")
def console_with_loader(
    items: tuple[str, "LoaderSettings"],
    spark: "SparkSession",
    api_database: str,
    kafka_bootstrap: str,
) -> Iterator[str]:
    """An API whose console reads the loader's status, plan and replay: the control routes on
    a health server of their own, with the session's Spark, as `hub load run` mounts them."""
    from hub_core.health import HealthServer
    from spark_loaders.control.status import serve_status
    from tests.support.api_server import serve_api

    _topic, settings = items
    health = HealthServer("127.0.0.1", 0, name="loader")
    with health:
        status = serve_status(health, settings, spark)
        try:
            loader = {"loader_url": f"http://127.0.0.1:{health.port}",
                      "loader_token": CONTROL_TOKEN,
                      "lineage_warehouse_dir": settings.warehouse_dir}  # fmt: skip
            with serve_api(
                database_url=api_database, bootstrap_servers=kafka_bootstrap, api=loader
            ) as url:
                yield url
        finally:
            status.stop()


def _quarantine(page: Page) -> Any:
    return page.locator("section#quarantine")


def test_tables_lag_freshness_and_the_owners_replay_of_a_feeds_quarantine(
    browser: Browser,
    context: BrowserContext,
    console_with_loader: str,
    items: tuple[str, "LoaderSettings"],
    api_url: str,
    admin_key: str,
    shop: str,
    rival: str,
    tmp_path: Path,
) -> None:
    from tests.support.loader import register

    url, (topic, _settings) = console_with_loader, items
    table = f"bronze.{topic.replace('.', '_')}"
    page = _sign_in(context, url, shop)

    # Feeds: the loader's lag (it caught up) and the bronze table's freshness.
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=topic))
    cells = [c.strip() for c in row.get_by_role("cell").all_inner_texts()]
    assert cells[7] == "0"
    assert cells[8].endswith((" s", " min"))
    _shot(page, tmp_path, "feeds")

    # Tables: bronze with its rows, version, last commit and freshness; a plan of the fix.
    page.get_by_role("link", name="Tables").click()
    expect(page.get_by_role("heading", name="Tables", exact=True)).to_be_visible()
    bronze = page.get_by_role("row").filter(has=page.get_by_role("link", name=table))
    cells = [c.strip() for c in bronze.get_by_role("cell").all_inner_texts()]
    assert cells[0] == "3" and cells[2].endswith("UTC")
    page.get_by_label("Feed").select_option(topic)
    page.get_by_label("Candidate schema").fill(json.dumps(ITEM_V2))
    page.get_by_role("button", name="Show the plan").click()
    expect(page.get_by_role("heading", name=f"Plan for {table}")).to_be_visible()
    expect(page.get_by_role("status").last).to_contain_text("registry: compatible")
    _shot(page, tmp_path, "tables")

    # The feed: its quarantined record and reason; the owner's Replay before the fix keeps it.
    page.goto(f"{url}/console/feeds/{topic}")
    quarantine = _quarantine(page)
    expect(quarantine.get_by_role("row", name="SCHEMA_UNRESOLVABLE")).to_contain_text("1")
    replay = quarantine.get_by_role("button", name="Replay 1 quarantined record")
    expect(replay).to_be_visible()
    quarantine.scroll_into_view_if_needed()
    _shot(page, tmp_path, "feed-quarantine")

    other = browser.new_context()
    try:
        rival_page = _sign_in(other, url, rival)
        rival_page.goto(f"{url}/console/feeds/{topic}")
        expect(
            _quarantine(rival_page).get_by_role("row", name="SCHEMA_UNRESOLVABLE")
        ).to_be_visible()
        expect(_quarantine(rival_page).get_by_role("button")).to_have_count(0)
        forged = _post_form(other, rival_page, f"{url}/console/feeds/{topic}/replay")
        assert forged.status == 403
        assert f"Feed '{topic}' belongs to team 'shop'" in html.unescape(forged.text())
    finally:
        other.close()

    register(api_url, admin_key, f"{topic}-value", ITEM_V2)  # the fix
    # The page answers once the loader's replay, a Spark job, is done: on two busy cores that
    # takes longer than Playwright's 30 s for a navigation (the API waits up to 120 s).
    replay.click(timeout=120_000)
    expect(page.get_by_role("status")).to_contain_text("1 record landed")
    expect(_quarantine(page)).to_contain_text("No quarantined records")
    page.get_by_role("link", name="Tables").click()
    bronze = page.get_by_role("row").filter(has=page.get_by_role("link", name=table))
    assert bronze.get_by_role("cell").first.inner_text().strip() == "4"


# Change events of a `customers` table, as a CDC connector writes them (the Debezium envelope).
ROW = {
    "type": "record",
    "name": "Customer",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}],
}
ENVELOPE = {
    "type": "record",
    "name": "Envelope",
    "namespace": "shop.console",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "Customer"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "ts_ms", "type": "long"}, {"name": "db", "type": "string"},
            {"name": "table", "type": "string"},
            {"name": "txId", "type": ["null", "long"], "default": None},
            {"name": "lsn", "type": ["null", "long"], "default": None}]}},
    ],
}  # fmt: skip


def _change(op: str, id_: int, name: str, *, lsn: int, tx: int) -> dict[str, Any]:
    row = {"id": id_, "name": name}
    return {
        "before": row if op == "u" else None,
        "after": row,
        "op": op,
        "ts_ms": lsn,
        "source": {"ts_ms": lsn, "db": "shop", "table": "customers", "txId": tx, "lsn": lsn},
    }


@pytest.fixture(scope="module")
def customers(
    api_url: str,
    shop: str,
    kafka_bootstrap: str,
    spark: "SparkSession",
    items: tuple[str, "LoaderSettings"],
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    """A feed of team `shop` carrying change events, landed in bronze and in silver."""
    import re

    from hub_kafka.settings import KafkaSettings
    from spark_loaders.silver.changes import ChangelogSpec
    from spark_loaders.silver.loader import SilverLoader
    from tests.support.loader import land_once, produce_avro

    topic = unique_topic("shop")
    create_feed(api_url, shop, topic=topic, schema=ENVELOPE, owner="shop", partitions=1)
    latest = httpx.get(f"{api_url}/subjects/{topic}-value/versions/latest", timeout=30).json()
    # LSNs no other test of the session uses: the warehouse, and so the lineage index, is shared.
    changes = [
        _change("c", 1, "ann", lsn=9100, tx=1),
        _change("c", 2, "bob", lsn=9110, tx=1),
        _change("u", 1, "anne", lsn=9120, tx=2),
    ]
    produce_avro(kafka_bootstrap, topic, latest["id"], ENVELOPE, changes)
    settings = items[1].model_copy(
        update={
            "checkpoint_dir": tmp_path_factory.mktemp("console-customers") / "checkpoints",
            "topic_pattern": re.escape(topic),
        }
    )
    land_once(spark, settings, KafkaSettings(bootstrap_servers=kafka_bootstrap))
    suffix = topic.replace(".", "_")
    spec = ChangelogSpec(f"bronze.{suffix}", f"silver.{suffix}", ("id",))
    silver = SilverLoader(spark, spec, checkpoint_dir=str(settings.checkpoint_dir))
    silver.start(available_now=True).awaitTermination(600)
    return topic


def _facts(page: Page) -> dict[str, str]:
    """The answer's facts table, by row header."""
    facts = page.locator("table.facts").get_by_role("row").all()
    return {
        r.get_by_role("rowheader").inner_text().strip(): r.get_by_role("cell").inner_text().strip()
        for r in facts
    }


def _versions(page: Page) -> list[list[str]]:
    table = page.locator("table", has=page.get_by_role("columnheader", name="Commit time"))
    rows = table.get_by_role("row").all()[1:]
    return [[c.strip() for c in r.locator("th, td").all_inner_texts()] for r in rows]


def test_lineage_page_traces_rows_by_position_and_key_and_source_positions(
    browser: Browser,
    context: BrowserContext,
    console_with_loader: str,
    items: tuple[str, "LoaderSettings"],
    customers: str,
    rival: str,
    shop: str,
    tmp_path: Path,
) -> None:
    url, (topic, _settings) = console_with_loader, items
    bronze = f"bronze.{topic.replace('.', '_')}"
    current = f"silver.{customers.replace('.', '_')}_current"
    page = _sign_in(context, url, shop)

    # A published record's bronze row, by its partition and offset.
    page.get_by_role("link", name="Lineage", exact=True).click()
    expect(page.get_by_role("heading", name="Lineage", exact=True)).to_be_visible()
    page.get_by_label("Table").fill(bronze)
    page.get_by_label("Row partition").fill("0")
    page.get_by_label("Row offset").fill("0")
    page.get_by_role("button", name="Trace the row").click()
    expect(page.get_by_role("heading", name=f"Record {topic} 0:0")).to_be_visible()
    facts = _facts(page)
    assert (facts["Topic"], facts["Partition"], facts["Offset"]) == (topic, "0", "0")
    assert facts["In Kafka"].startswith("yes")
    assert facts["Schema id"].endswith(f"(version 1 of {topic}-value)")
    assert facts["Request id"]
    assert facts["Bronze version"].isdigit()
    (landed,) = _versions(page)
    assert landed[:3] == [bronze, facts["Bronze version"], "bronze"]
    assert landed[3].endswith("UTC")
    _shot(page, tmp_path, "lineage-row")
    page.get_by_role("link", name=topic).first.click()  # the topic leads to its feed
    expect(page.get_by_role("heading", name=topic, exact=True)).to_be_visible()

    # From the feed's latest records, an offset leads to its position's lineage.
    page.get_by_role("link", name="Lineage of offset 0 in partition 0").click()
    expect(page.get_by_role("heading", name=f"Record {topic} 0:0")).to_be_visible()
    assert page.get_by_label("Topic", exact=True).input_value() == topic
    assert _versions(page)[0][:3] == landed[:3]

    # A silver row by its key: the change event it holds, its LSN and transaction, and every
    # version holding it (bronze, then the silver tables that read that bronze version).
    page.get_by_label("Table").fill(current)
    page.get_by_label("Row key").fill("id=1")
    page.get_by_role("button", name="Trace the row").click()
    expect(page.get_by_role("heading", name=f"{current} row id=1")).to_be_visible()
    facts = _facts(page)
    assert (facts["Topic"], facts["Offset"]) == (customers, "2")  # the update, not the create
    assert (facts["Source LSN"], facts["Transaction id"]) == ("9120", "2")
    tables = {(v[0], v[2]) for v in _versions(page)}
    assert {(f"bronze.{customers.replace('.', '_')}", "bronze"), (current, "silver")} <= tables
    page.locator("#answer").evaluate("heading => heading.scrollIntoView()")
    _shot(page, tmp_path, "lineage")

    # A source position: the LSN leads to the same versions.
    page.get_by_role("link", name="9120", exact=True).click()
    expect(page.get_by_role("heading", name="Source LSN 9120")).to_be_visible()
    commits = page.locator("table", has=page.get_by_role("columnheader", name="Source LSNs"))
    expect(commits).to_contain_text("9100\u20139120")  # an en dash
    assert {(v[0], v[2]) for v in _versions(page)} == tables
    _shot(page, tmp_path, "lineage-position")

    # Bad questions are answered on the page with their codes.
    page.get_by_label("Table").fill(current)
    page.get_by_label("Row key").fill("nope=1")
    page.get_by_role("button", name="Trace the row").click()
    expect(page.get_by_role("alert")).to_contain_text("42281")
    expect(page.get_by_role("alert")).to_contain_text("has no column 'nope'")
    page.get_by_label("Row key").fill("id=99")
    page.get_by_role("button", name="Trace the row").click()
    expect(page.get_by_role("alert")).to_contain_text("40460")
    page.get_by_label("Source LSN").fill("5")
    page.get_by_label("Publish request id").fill("req-x")
    page.get_by_role("button", name="Trace the position").click()
    expect(page.get_by_role("alert")).to_contain_text("42280")

    # Another team is told whose feed it is, and shown nothing of its lineage.
    other = browser.new_context()
    try:
        rival_page = _sign_in(other, url, rival)
        for query in (f"table={current}&key=id%3D1", f"table={bronze}&partition=0&offset=0",
                      f"topic={topic}&partition=0&offset=0", "lsn=9120"):  # fmt: skip
            rival_page.goto(f"{url}/console/lineage?{query}")
            expect(rival_page.get_by_role("alert")).to_contain_text("40301")
            expect(rival_page.get_by_role("heading", name="Table versions holding it")
                   ).to_have_count(0)  # fmt: skip
            expect(rival_page.locator("table.facts")).to_have_count(0)
        _shot(rival_page, tmp_path, "lineage-other-team")
    finally:
        other.close()


def test_api_and_cli_trace_a_silver_row_by_key_through_the_running_loader(
    console_with_loader: str, customers: str, shop: str, rival: str
) -> None:
    from tests.support.cli import hub

    url = console_with_loader
    current = f"silver.{customers.replace('.', '_')}_current"
    history = f"silver.{customers.replace('.', '_')}_history"

    answer = httpx.get(f"{url}/v1/lineage/rows", params={"table": history, "key": '{"id": 2}'},
                       headers=bearer(shop), timeout=120)  # fmt: skip
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["topic"], body["offset"], body["lsn"], body["key"]) == (
        customers,
        1,
        9110,
        {"id": 2},
    )
    wrong = httpx.get(f"{url}/v1/lineage/rows", params={"table": current, "key": "id=two"},
                      headers=bearer(shop), timeout=120)  # fmt: skip
    assert (wrong.status_code, wrong.json()["error_code"]) == (422, 42281)
    assert "is bigint" in wrong.json()["message"]

    traced = hub("lineage", "row", current, "--row-key", "id=1", "--api", url, "--key", shop)
    assert traced.returncode == 0, traced.stderr
    found = json.loads(traced.stdout)
    assert (found["table"], found["offset"], found["lsn"], found["tx_id"]) == (current, 2, 9120, 2)
    refused = hub("lineage", "row", current, "--row-key", "id=1", "--api", url, "--key", rival)
    assert refused.returncode != 0
    assert "40301" in refused.stderr + refused.stdout
    assert "9120" not in refused.stdout
