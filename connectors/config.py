"""Connector files: YAML validated by pydantic, unknown keys refused, secrets from the environment.

A file names its connector, its `type` (which picks the plugin, and so the model, from
`connectors.plugins.PLUGINS`), the team that owns its feeds and where records go. `${VAR}`
references are replaced by environment variables after parsing; values that came from the
environment are never shown.
"""

import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from connectors.errors import ConfigProblem, ConnectorConfigError, SecretMissing
from connectors.plugins import PLUGINS, ConnectorConfig

# Until connectors/postgres/source.py imports its model from its own plugin.

MASK = "**********"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, slots=True)
class LoadedConnector:
    """A validated connector file and the key paths whose values came from the environment."""

    path: Path
    config: ConnectorConfig
    secret_paths: frozenset[str]

    @property
    def name(self) -> str:
        return self.config.name

    def public(self) -> dict[str, Any]:
        """The configuration as JSON, with secrets and environment-provided values masked."""
        dumped: dict[str, Any] = self.config.model_dump(mode="json", by_alias=True)
        for path in self.secret_paths:
            _mask(dumped, path.split("."))
        return dumped


def load(path: Path) -> LoadedConnector:
    """Read, substitute and validate one connector file; every problem is reported at once."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        problem = ConfigProblem("", f"cannot read the file: {exc}")
        raise ConnectorConfigError(path, [problem]) from exc
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConnectorConfigError(path, [ConfigProblem("", f"not valid YAML: {exc}")]) from exc
    if not isinstance(raw, dict):
        raise ConnectorConfigError(
            path, [ConfigProblem("", "expected a mapping of keys (name, type, owner, source)")]
        )
    kind = raw.get("type")
    plugin = PLUGINS.get(kind) if isinstance(kind, str) else None
    if plugin is None:
        choices = ", ".join(PLUGINS)
        message = (
            f"{kind!r} is not a connector type; choose one of: {choices}"
            if "type" in raw
            else f"required key is missing; choose one of: {choices}"
        )
        raise ConnectorConfigError(path, [ConfigProblem("type", message)])
    model = plugin.model
    secret_paths: set[str] = set()
    missing: list[ConfigProblem] = []
    substituted = _substitute(raw, (), secret_paths, missing)
    if missing:
        raise SecretMissing(path, missing)
    try:
        config = model.model_validate(substituted)
    except ValidationError as exc:
        problems = [_problem(model, error, secret_paths) for error in exc.errors()]
        raise ConnectorConfigError(path, problems) from None
    return LoadedConnector(
        path=path,
        config=typing.cast(ConnectorConfig, config),
        secret_paths=frozenset(secret_paths),
    )


def _substitute(
    value: Any, at: tuple[str, ...], secrets: set[str], missing: list[ConfigProblem]
) -> Any:
    if isinstance(value, dict):
        return {k: _substitute(v, (*at, str(k)), secrets, missing) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, (*at, str(i)), secrets, missing) for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def replace(match: re.Match[str]) -> str:
        variable = match.group(1)
        found = os.environ.get(variable)
        if found is None:
            missing.append(
                ConfigProblem(
                    ".".join(at),
                    f"environment variable {variable} is not set; export it before running "
                    "the connector",
                )
            )
            return ""
        return found

    secrets.add(".".join(at))
    return _ENV_REF.sub(replace, value)


def _problem(model: type[BaseModel], error: ErrorDetails, secrets: set[str]) -> ConfigProblem:
    location = [str(part) for part in error["loc"]]
    path = ".".join(location)
    kind = error["type"]
    shown = MASK if path in secrets else repr(error.get("input"))
    if kind == "extra_forbidden":
        valid = _valid_keys(model, location[:-1])
        return ConfigProblem(path, f"unknown key; valid keys here: {', '.join(valid)}")
    if kind == "missing":
        return ConfigProblem(path, "required key is missing")
    if kind == "literal_error":
        expected = (error.get("ctx") or {}).get("expected", "")
        return ConfigProblem(path, f"{shown} is not a valid choice; choose one of: {expected}")
    message = error["msg"].removeprefix("Value error, ")
    if kind == "value_error" or path in secrets:
        return ConfigProblem(path, message)
    return ConfigProblem(path, f"{message} (got {shown})")


def _valid_keys(model: type[BaseModel], location: list[str]) -> list[str]:
    """The keys the model at `location` accepts, as written in files."""
    current: type[BaseModel] | None = model
    for part in location:
        if current is None:
            break
        field = next(
            (f for n, f in current.model_fields.items() if part in (n, f.alias)),
            None,
        )
        current = _model_in(field.annotation) if field is not None else None
    if current is None:
        return []
    return [f.alias or n for n, f in current.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType, list, dict):
        for argument in typing.get_args(annotation):
            found = _model_in(argument)
            if found is not None:
                return found
    return None


def _mask(tree: Any, parts: list[str]) -> None:
    for part in parts[:-1]:
        if isinstance(tree, dict):
            tree = tree.get(part)
        elif isinstance(tree, list) and part.isdigit() and int(part) < len(tree):
            tree = tree[int(part)]
        else:
            return
    last = parts[-1]
    if isinstance(tree, dict) and last in tree:
        tree[last] = MASK
    elif isinstance(tree, list) and last.isdigit() and int(last) < len(tree):
        tree[int(last)] = MASK
