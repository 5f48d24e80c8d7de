"""`hub load plan` against a real registry: the table changes and the registry's verdict."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.hub_client import unique_topic
from tests.support.loader import register

pytestmark = pytest.mark.integration

V1 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"}],
}


def plan(
    api_url: str, home: Path, subject: str, schema: dict[str, object]
) -> "subprocess.CompletedProcess[str]":
    candidate = home / "candidate.avsc"
    candidate.write_text(json.dumps(schema))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("HUB_")},
        "HUB_LOADER_REGISTRY_URL": api_url,
        "HUB_LOADER_WAREHOUSE_DIR": str(home / "warehouse"),
        "HUB_LOADER_CHECKPOINT_DIR": str(home / "checkpoints"),
    }
    return subprocess.run(
        [sys.executable, "-m", "hub_cli.main", "load", "plan", subject, str(candidate)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_plan_shows_added_and_widened_columns_of_a_compatible_version(
    api_url: str, admin_key: str, tmp_path: Path
) -> None:
    topic = unique_topic("plan")
    register(api_url, admin_key, f"{topic}-value", V1)
    v2 = {
        **V1,
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "qty", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
    result = plan(api_url, tmp_path, f"{topic}-value", v2)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "compared with registered version 1" in result.stdout
    assert "widen qty int -> bigint (on append)" in result.stdout
    assert "add column note string" in result.stdout
    assert "registry: compatible" in result.stdout


def test_plan_fails_when_the_registry_would_refuse_the_schema(
    api_url: str, admin_key: str, tmp_path: Path
) -> None:
    topic = unique_topic("plan")
    register(api_url, admin_key, f"{topic}-value", V1)
    v2 = {**V1, "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "string"}]}
    result = plan(api_url, tmp_path, f"{topic}-value", v2)
    assert result.returncode == 1
    assert "cannot change qty int -> string" in result.stdout
    assert "registry: INCOMPATIBLE" in result.stdout
