"""The loader's metrics: lag per topic-partition from a query's progress, and the counters."""

import pytest

from spark_loaders.runtime.metrics import LoaderMetrics, source_lag

pytestmark = pytest.mark.unit


def test_lag_is_the_latest_offset_minus_the_offset_the_last_batch_read_to() -> None:
    progress = {
        "name": "hub-bronze",
        "sources": [
            {
                "endOffset": {"shop.orders": {"0": 120, "1": 80}},
                "latestOffset": {"shop.orders": {"0": 150, "1": 80}, "shop.carts": {"0": 7}},
            }
        ],
    }
    assert source_lag(progress) == {("shop.orders", "0"): 30, ("shop.orders", "1"): 0}


def test_a_source_other_than_kafka_has_no_lag() -> None:
    progress = {"sources": [{"endOffset": "42", "latestOffset": None}]}
    assert source_lag(progress) == {}


def test_counters_add_up_per_table_and_reason_and_lag_follows_progress() -> None:
    metrics = LoaderMetrics()
    metrics.landed("bronze.t", 5)
    metrics.landed("bronze.t", 0)
    metrics.quarantined("bronze.t", {"PAYLOAD_UNDECODABLE": 2, "SCHEMA_UNRESOLVABLE": 0})
    metrics.follow(
        [
            {
                "name": "hub-bronze",
                "sources": [{"endOffset": {"t": {"0": 1}}, "latestOffset": {"t": {"0": 4}}}],
            },
            None,
        ]
    )

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert value("hub_loader_records_landed_total", table="bronze.t") == 5
    assert (
        value(
            "hub_loader_records_quarantined_total", table="bronze.t", reason="PAYLOAD_UNDECODABLE"
        )
        == 2
    )
    assert (
        value(
            "hub_loader_records_quarantined_total", table="bronze.t", reason="SCHEMA_UNRESOLVABLE"
        )
        is None
    )
    assert value("hub_loader_last_landed_timestamp_seconds", table="bronze.t") is not None
    assert value("hub_loader_lag_records", query="hub-bronze", topic="t", partition="0") == 3
