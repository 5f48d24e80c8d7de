"""The Helm chart stays in step with the code it deploys.

Kubernetes would start the pods happily with a misspelt variable or a renamed command and the hub
would run on defaults or crash-loop; these tests catch that drift here instead.
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic_settings import BaseSettings
from typer.core import TyperGroup

from connectors.settings import ConnectSettings
from hub_api.settings import ApiSettings
from hub_cli.main import app
from hub_kafka.settings import KafkaSettings
from registry.settings import RegistrySettings
from spark_loaders.services.analyst_settings import AnalystSettings
from spark_loaders.settings import LoaderSettings

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "integration-hub"
CONTAINERFILE = REPO / "image" / "Containerfile"
SETTINGS: list[type[BaseSettings]] = [
    RegistrySettings,
    KafkaSettings,
    ApiSettings,
    LoaderSettings,
    ConnectSettings,
    AnalystSettings,
]
# Read directly from the environment by the logging setup, not by a settings class.
LOGGING_VARIABLES = {"HUB_LOG_FORMAT", "HUB_LOG_LEVEL"}


def _known_variables() -> set[str]:
    known = set(LOGGING_VARIABLES)
    for settings in SETTINGS:
        prefix = settings.model_config.get("env_prefix", "")
        known.update(f"{prefix}{field}".upper() for field in settings.model_fields)
    return known


def _env_maps(values: Any) -> list[dict[str, Any]]:
    """Every `env:` map in the values, at any depth."""
    found: list[dict[str, Any]] = []
    if isinstance(values, dict):
        for key, value in values.items():
            if key == "env" and isinstance(value, dict):
                found.append(value)
            else:
                found.extend(_env_maps(value))
    elif isinstance(values, list):
        for item in values:
            found.extend(_env_maps(item))
    return found


def _values() -> dict[str, Any]:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert isinstance(values, dict)
    return values


def test_every_hub_variable_the_chart_sets_is_read_by_a_settings_class() -> None:
    names = {name for env in _env_maps(_values()) for name in env}
    for template in (CHART / "templates").glob("*"):
        names.update(re.findall(r"name: (HUB_[A-Z0-9_]+)", template.read_text()))

    assert names, "the chart sets no HUB_ variables at all"
    assert names - _known_variables() == set()


def test_every_command_the_pods_run_exists_in_the_hub_cli() -> None:
    # The image's entrypoint is `hub` (behind tini): a pod's args are a hub command.
    entrypoint = re.search(r"^ENTRYPOINT (.*)$", CONTAINERFILE.read_text(), re.MULTILINE)
    assert entrypoint is not None and json.loads(entrypoint.group(1))[-1] == "hub"
    commands = [
        ["hub", *re.findall(r'"([^"]+)"', match)]
        for template in (CHART / "templates").glob("*.yaml")
        for match in re.findall(r"args: \[(.*)\]", template.read_text())
    ]
    assert len(commands) >= 5
    # Typer ships its own click: its groups are `TyperGroup`s, not the click package's `Group`.
    group = typer.main.get_command(app)
    assert isinstance(group, TyperGroup)
    for args in commands:
        assert args[0] == "hub"
        command: Any = group
        for word in args[1:]:
            if not isinstance(command, TyperGroup):
                break
            sub = command.get_command(command.context_class(command), word)
            assert sub is not None, f"`{' '.join(args)}`: no command {word!r}"
            command = sub
        assert not isinstance(command, TyperGroup), f"`{' '.join(args)}` names a group"


def test_the_thrift_server_is_deployed_with_hub_key_logins_and_the_apis_url() -> None:
    template = (CHART / "templates" / "analyst.yaml").read_text()
    analyst = _values()["analyst"]

    assert analyst["auth"] == "hub-keys"
    assert analyst["env"]["HUB_ANALYST_HOST"] == "0.0.0.0"
    assert "name: HUB_ANALYST_API_URL" in template
    # The forced setting comes after every map of variables, so none of them can override it.
    forced = template.index('- name: HUB_ANALYST_AUTH\n              value: "hub-keys"')
    assert forced > template.rindex('include "hub.componentEnv"')


def test_the_chart_fails_rather_than_render_a_thrift_server_without_authentication() -> None:
    template = (CHART / "templates" / "analyst.yaml").read_text()

    guard = re.search(r'\{\{- if ne \(toString \$auth\) "hub-keys" \}\}\s*\{\{- fail ', template)
    assert guard is not None, "analyst.yaml lost its `fail` on an unauthenticated Thrift server"
    # Every place HUB_ANALYST_AUTH can be set feeds the guard: analyst.auth and the env maps.
    assert "$auth := .Values.analyst.auth" in template
    assert "list .Values.env .Values.analyst.env .Values.loader.env" in template


# Maps and lists the docs describe as one value: their keys are free-form.
_FREE_FORM = {"env", "resources", "podLabels", "labels", "annotations"}


def _value_paths(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and value and key not in _FREE_FORM:
            paths.update(_value_paths(value, f"{prefix}{key}."))
        else:
            paths[f"{prefix}{key}"] = value
    return paths


def test_the_deployment_docs_list_every_value_with_its_default() -> None:
    doc = (REPO / "docs" / "deployment.md").read_text()
    table = doc[doc.index("## Values") :]
    rows = dict(re.findall(r"^\| `([A-Za-z0-9.]+)` \| ([^|]*) \|", table, re.MULTILINE))
    paths = _value_paths(_values())

    assert set(rows) == set(paths), "docs/deployment.md's values table and values.yaml differ"
    for path, default in paths.items():
        if isinstance(default, (str, int, float, bool)):
            shown = str(default).lower() if isinstance(default, bool) else default
            assert f"`{shown}`" in rows[path] or (default == "" and '`""`' in rows[path]), (
                f"{path}: the docs give {rows[path].strip()!r}, values.yaml {default!r}"
            )
