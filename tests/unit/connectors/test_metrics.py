"""The connector worker's metrics: errors by code, one state at a time, and sources' lag."""

import datetime as dt
import time

import pytest

from connectors.control import State
from connectors.errors import SourceUnavailable
from connectors.metrics import ConnectorMetrics
from hub_core.errors import ErrorCode, TerminalError

pytestmark = pytest.mark.unit


def _value(metrics: ConnectorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_batches_count_records_and_dead_letters_per_topic() -> None:
    metrics = ConnectorMetrics()
    metrics.published("erp", "erp.orders", records=3, dead_lettered=2)
    metrics.published("erp", "erp.orders", records=4, dead_lettered=0)
    metrics.published("erp", "erp.lines", records=0, dead_lettered=0)
    labels = {"connector": "erp", "topic": "erp.orders"}
    assert _value(metrics, "hub_connector_records_published_total", **labels) == 7
    assert _value(metrics, "hub_connector_records_dead_lettered_total", **labels) == 2
    lines = {"connector": "erp", "topic": "erp.lines"}
    assert _value(metrics, "hub_connector_records_published_total", **lines) is None


def test_errors_are_counted_by_the_name_of_their_code() -> None:
    metrics = ConnectorMetrics()
    metrics.failed("erp", SourceUnavailable("down"))
    metrics.failed("erp", SourceUnavailable("down again"))
    metrics.failed("erp", TerminalError("bad", code=ErrorCode.CDC_SETUP_FAILED))
    metrics.failed("erp", RuntimeError("a bug"))
    code = SourceUnavailable.code.name
    assert _value(metrics, "hub_connector_errors_total", connector="erp", code=code) == 2
    assert _value(metrics, "hub_connector_errors_total", connector="erp",
                  code="CDC_SETUP_FAILED") == 1  # fmt: skip
    assert _value(metrics, "hub_connector_errors_total", connector="erp", code="UNKNOWN") == 1


def test_a_connector_is_in_one_state_at_a_time() -> None:
    metrics = ConnectorMetrics()
    metrics.state("erp", State.RUNNING)
    metrics.state("erp", State.FAILED)
    states = {
        s.value: _value(metrics, "hub_connector_state", connector="erp", hub_connector_state=s)
        for s in State
    }
    assert states == {s.value: (1.0 if s is State.FAILED else 0.0) for s in State}


def test_files_no_longer_followed_and_gone_slots_lose_their_lag() -> None:
    metrics = ConnectorMetrics()
    lag = metrics.source("web")
    lag.unread_bytes({"/var/log/app.log": 10, "/var/log/app.log.1": 3})
    lag.unread_bytes({"/var/log/app.log": 0})
    unread = "hub_connector_logfile_unread_bytes"
    assert _value(metrics, unread, connector="web", path="/var/log/app.log") == 0
    assert _value(metrics, unread, connector="web", path="/var/log/app.log.1") is None
    lag.slot_bytes("hub_cdc", 4096)
    assert _value(metrics, "hub_connector_cdc_slot_lag_bytes", connector="web",
                  slot="hub_cdc") == 4096  # fmt: skip
    lag.slot_bytes("hub_cdc", None)
    assert _value(metrics, "hub_connector_cdc_slot_lag_bytes", connector="web",
                  slot="hub_cdc") is None  # fmt: skip


def test_a_positions_age_is_measured_when_scraped_and_naive_times_are_utc() -> None:
    metrics = ConnectorMetrics()
    moment = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
    metrics.source("erp").position_time("orders", moment.replace(tzinfo=None))
    age = _value(metrics, "hub_connector_jdbc_position_age_seconds", connector="erp",
                 table="orders")  # fmt: skip
    assert age is not None and 3600 <= age < 3610
    time.sleep(0.2)
    later = _value(metrics, "hub_connector_jdbc_position_age_seconds", connector="erp",
                   table="orders")  # fmt: skip
    assert later is not None and later > age
