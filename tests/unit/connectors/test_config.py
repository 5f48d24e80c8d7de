"""Connector files: every problem named with its file, key path, bad value and choices."""

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from connectors.config import load
from connectors.errors import ConnectorConfigError, SecretMissing
from connectors.reference import render
from connectors.sources import secret_values
from hub_core.errors import ErrorCode
from tests.support.cli import hub

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "connectors" / "examples").glob("*.yaml"))


def _jdbc(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "erp-orders",
        "type": "jdbc",
        "owner": "erp",
        "topic_prefix": "erp",
        "source": {
            "url": "postgresql+psycopg://reader:${ERP_PASSWORD}@db/erp",
            "mode": "incrementing",
            "incrementing_column": "id",
            "tables": ["orders"],
        },
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = config
        for part in parents:
            target = target[part]
        target[last] = value
    return config


def _write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "connector.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _problems(tmp_path: Path, config: dict[str, Any]) -> ConnectorConfigError:
    with pytest.raises(ConnectorConfigError) as caught:
        load(_write(tmp_path, config))
    return caught.value


@pytest.fixture(autouse=True)
def _password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERP_PASSWORD", "s3cr3t-pw")


def test_a_valid_file_loads_with_its_secret_substituted(tmp_path: Path) -> None:
    loaded = load(_write(tmp_path, _jdbc()))
    assert loaded.config.type == "jdbc"
    assert loaded.config.source.url.get_secret_value().endswith(":s3cr3t-pw@db/erp")
    assert "s3cr3t-pw" in secret_values(loaded)


def test_an_unknown_key_is_named_with_the_valid_keys(tmp_path: Path) -> None:
    error = _problems(tmp_path, _jdbc(source__poll_interval=3))
    assert error.code is ErrorCode.INVALID_CONNECTOR_CONFIG
    [problem] = error.problems
    assert problem.path == "source.poll_interval"
    assert "unknown key" in problem.message
    assert "poll_seconds" in problem.message
    assert str(tmp_path / "connector.yaml") in error.message


def test_a_bad_choice_names_the_value_and_the_choices(tmp_path: Path) -> None:
    error = _problems(tmp_path, _jdbc(source__mode="bulk"))
    [problem] = error.problems
    assert problem.path == "source.mode"
    assert "'bulk'" in problem.message
    for choice in ("incrementing", "timestamp", "timestamp+incrementing"):
        assert f"'{choice}'" in problem.message


def test_an_unknown_type_lists_the_connector_types(tmp_path: Path) -> None:
    error = _problems(tmp_path, _jdbc(type="mysql-binlog"))
    [problem] = error.problems
    assert problem.path == "type"
    assert "'mysql-binlog'" in problem.message
    assert "postgres-cdc, jdbc, logfile" in problem.message


def test_every_problem_of_a_file_is_reported_at_once(tmp_path: Path) -> None:
    config = _jdbc(partitions=0, source__batch_size="many")
    del config["owner"]
    error = _problems(tmp_path, config)
    assert sorted(p.path for p in error.problems) == ["owner", "partitions", "source.batch_size"]


def test_a_missing_environment_variable_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ERP_PASSWORD")
    with pytest.raises(SecretMissing) as caught:
        load(_write(tmp_path, _jdbc()))
    assert caught.value.code is ErrorCode.CONNECTOR_SECRET_MISSING
    [problem] = caught.value.problems
    assert problem.path == "source.url"
    assert "ERP_PASSWORD" in problem.message


def test_values_from_the_environment_are_masked_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ERP_NS", "ns-from-env")
    caplog.set_level(logging.DEBUG)
    loaded = load(_write(tmp_path, _jdbc(schema={"namespace": "${ERP_NS}"})))
    public = loaded.public()
    assert public["source"]["url"] == "**********"
    assert public["schema"]["namespace"] == "**********"
    assert "s3cr3t-pw" not in repr(loaded.config)
    assert "s3cr3t-pw" not in caplog.text
    # A bad value that came from the environment is not echoed in the error either.
    monkeypatch.setenv("ERP_PARTITIONS", "not-a-number-s3cr3t")
    error = _problems(tmp_path, _jdbc(partitions="${ERP_PARTITIONS}"))
    assert "s3cr3t" not in error.message


def test_mode_columns_and_topics_are_checked_together(tmp_path: Path) -> None:
    [problem] = _problems(tmp_path, _jdbc(source__mode="timestamp")).problems
    assert "timestamp_column" in problem.message
    [problem] = _problems(tmp_path, _jdbc(topic_prefix="ERP!")).problems
    assert "topic_prefix" in problem.message


def test_logfile_fields_must_name_groups_of_the_pattern(tmp_path: Path) -> None:
    config = {
        "name": "app-log",
        "type": "logfile",
        "owner": "web",
        "topic": "web.app_log",
        "source": {
            "paths": ["/var/log/app.log"],
            "format": "regex",
            "pattern": r"^(?P<level>\w+) (?P<text>.*)$",
            "fields": {"level": {}, "message": {"source": "msg"}},
        },
    }
    [problem] = _problems(tmp_path, config).problems
    assert "message (group 'msg')" in problem.message
    assert "level, text" in problem.message


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_shipped_examples_are_valid(example: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ERP_DB_PASSWORD", "x")
    monkeypatch.setenv("SHOP_DB_PASSWORD", "y")
    assert load(example).name


def test_the_checked_in_reference_is_up_to_date() -> None:
    checked_in = (REPO / "docs" / "connectors-reference.md").read_text()
    assert checked_in == render(), (
        "docs/connectors-reference.md is out of date: "
        "run `python -m connectors.reference > docs/connectors-reference.md`"
    )


def test_validate_command_prints_each_files_problems_and_fails(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(_jdbc(source__url="sqlite:///app.db")))
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(_jdbc(source__mode="bulk", extra=1)))

    passed = hub("connect", "validate", str(good))
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "ok (jdbc connector 'erp-orders')" in passed.stdout

    failed = hub("connect", "validate", str(good), str(bad))
    assert failed.returncode == 1
    assert f"{bad}: 2 problem(s) (error 42240)" in failed.stdout
    assert "source.mode: 'bulk' is not a valid choice" in failed.stdout
    assert "extra: unknown key" in failed.stdout
    assert "1 of 2 file(s) have problems" in failed.stdout


def test_a_malformed_database_url_is_refused_without_echoing_it(tmp_path: Path) -> None:
    [problem] = _problems(tmp_path, _jdbc(source__url="postgres//reader:pw-9f3@db")).problems
    assert problem.path == "source.url"
    assert "not a SQLAlchemy URL" in problem.message
    assert "pw-9f3" not in problem.message
