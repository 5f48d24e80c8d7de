"""Table maintenance settings: per-layer choices, a retention floor, and `hub load maintain`
refusing what it cannot do before Spark starts."""

import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from spark_loaders.settings import LoaderSettings
from tests.support.cli import hub

pytestmark = pytest.mark.unit


def test_by_default_bronze_is_maintained_on_schedule_and_silver_and_gold_compact_on_write() -> None:
    settings = LoaderSettings()

    assert settings.maintenance_seconds == 3600
    assert settings.layers("maintenance_layers") == ("bronze",)
    assert settings.layers("auto_compact_layers") == ("silver", "gold")
    assert settings.vacuum_retention_hours == 168


def test_layers_are_read_in_flow_order_and_may_be_none() -> None:
    settings = LoaderSettings(maintenance_layers=" gold, bronze ", auto_compact_layers="")

    assert settings.layers("maintenance_layers") == ("bronze", "gold")
    assert settings.layers("auto_compact_layers") == ()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("maintenance_layers", "bronze,platinum", r"unknown layer\(s\) platinum"),
        ("auto_compact_layers", "Silver", r"unknown layer\(s\) Silver"),
        ("vacuum_retention_hours", 12, "greater than or equal to 24"),
        ("maintenance_seconds", -1, "greater than or equal to 0"),
    ],
)
def test_what_would_break_readers_or_means_nothing_is_refused(
    field: str, value: object, message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        LoaderSettings(**{field: value})  # type: ignore[arg-type]


def test_maintain_refuses_an_unknown_layer_before_spark_starts(tmp_path: Path) -> None:
    env = {**os.environ, "HUB_HOME": str(tmp_path)}

    result = hub("load", "maintain", "--layer", "bronze", "--layer", "platinum", env=env)

    assert result.returncode == 2
    # The message as read, whatever the width of the box it is printed in.
    message = " ".join(re.sub("[│╭╮╰╯─]", " ", result.stderr).split())
    assert "unknown layer(s) platinum; choose from bronze, silver, gold" in message
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("hours", "interval"), [(168.0, "interval 168 hours"), (36.5, "interval 2190 minutes")]
)
def test_new_tables_keep_their_log_and_removed_files_for_the_vacuum_retention(
    hours: float, interval: str
) -> None:
    from spark_loaders.tables.maintenance import (
        AUTO_COMPACT_LAYERS_CONF,
        interval_hours,
        session_conf,
    )

    conf = session_conf(LoaderSettings(vacuum_retention_hours=hours, auto_compact_layers="gold"))

    defaults = "spark.databricks.delta.properties.defaults."
    assert conf[f"{defaults}logRetentionDuration"] == interval
    assert conf[f"{defaults}deletedFileRetentionDuration"] == interval
    assert conf[AUTO_COMPACT_LAYERS_CONF] == "gold"
    assert interval_hours(interval) == hours


@pytest.mark.parametrize(
    ("interval", "hours"),
    [("interval 7 days", 168.0), ("interval 1 week", 168.0), ("INTERVAL 90 MINUTES", 1.5)],
)
def test_table_retention_properties_are_read_as_hours(interval: str, hours: float) -> None:
    from spark_loaders.tables.maintenance import interval_hours

    assert interval_hours(interval) == hours
    # Unreadable retention counts as long: VACUUM then keeps Delta's own check.
    assert interval_hours("calendar 3 fortnights") == float("inf")
