"""Connector files: YAML validated by pydantic, unknown keys refused, secrets from the environment.

A file names its connector, its `type` (which picks the `source:` model from `CONNECTOR_TYPES`),
the team that owns its feeds and where records go. `${VAR}` references are replaced by
environment variables after parsing; values that came from the environment are never shown.
"""

import os
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self, Union

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from connectors.errors import ConfigProblem, ConnectorConfigError, SecretMissing
from connectors.jdbc.config import JdbcSource
from connectors.logfile.config import LogfileSource
from connectors.postgres.config import PostgresCdcSource
from hub_core.errors import TerminalError
from hub_core.naming import topic_name

MASK = "**********"
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NAME = r"^[a-z][a-z0-9_-]{0,99}$"
_SEGMENT = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


class SchemaOptions(BaseModel):
    """How the Avro schemas of the connector's feeds are named and described."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    namespace: str = Field(
        default="hub.connect", description="Avro namespace of the generated record schemas."
    )
    doc: str | None = Field(default=None, description="Avro `doc` of the generated records.")


class ConnectorBase(BaseModel):
    """Keys every connector file has, whatever its type."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: str = Field(
        pattern=_NAME,
        description="Unique name of the connector (lowercase letters, digits, `-`, `_`).",
    )
    owner: str = Field(description="The team that owns the connector's feeds (`hub team create`).")
    partitions: int = Field(default=1, ge=1, le=1000, description="Partitions of new feeds.")
    schema_options: SchemaOptions = Field(
        default_factory=SchemaOptions,
        alias="schema",
        description="Naming of the generated Avro schemas.",
    )


def _check_topic(value: str) -> None:
    try:
        topic_name(value)
    except TerminalError as exc:
        raise ValueError(exc.message) from exc


class JdbcConnector(ConnectorBase):
    """Polls tables or a query of any SQLAlchemy database."""

    type: Literal["jdbc"] = Field(description="`jdbc`.")
    topic_prefix: str | None = Field(
        default=None,
        description="With `source.tables`: each table goes to `<topic_prefix>.<table>`.",
    )
    topic: str | None = Field(default=None, description="With `source.query`: the topic.")
    source: JdbcSource = Field(description="Where and how to poll.")

    @model_validator(mode="after")
    def _topics(self) -> Self:
        if self.source.query is not None and self.topic is None:
            raise ValueError("a `source.query` connector needs `topic`")
        if self.source.tables and self.topic_prefix is None:
            raise ValueError("a `source.tables` connector needs `topic_prefix`")
        if self.topic is not None:
            _check_topic(self.topic)
        if self.topic_prefix is not None and not _SEGMENT.match(self.topic_prefix):
            raise ValueError(
                f"topic_prefix '{self.topic_prefix}' must be lowercase dot-separated "
                "segments of letters, digits and underscores, e.g. 'erp'"
            )
        return self


class LogfileConnector(ConnectorBase):
    """Tails log files into one event feed."""

    type: Literal["logfile"] = Field(description="`logfile`.")
    topic: str = Field(description="The feed the lines go to, e.g. `web.access_log`.")
    source: LogfileSource = Field(description="Which files and how to read their lines.")

    @model_validator(mode="after")
    def _topic_and_fields(self) -> Self:
        from connectors.logfile.formats import LineParser

        _check_topic(self.topic)
        try:
            LineParser(self.source)
        except ValueError as exc:
            raise ValueError(f"source.fields: {exc}") from exc
        return self


class PostgresCdcConnector(ConnectorBase):
    """Streams row changes of PostgreSQL tables (logical replication)."""

    type: Literal["postgres-cdc"] = Field(description="`postgres-cdc`.")
    topic_prefix: str = Field(
        description="Topics are `<topic_prefix>.<schema>.<table>`, e.g. prefix `cdc.shop`."
    )
    source: PostgresCdcSource = Field(description="The database, tables and replication slot.")

    @model_validator(mode="after")
    def _prefix(self) -> Self:
        if not _SEGMENT.match(self.topic_prefix):
            raise ValueError(
                f"topic_prefix '{self.topic_prefix}' must be lowercase dot-separated segments, "
                "e.g. 'cdc.shop'"
            )
        return self


ConnectorConfig = JdbcConnector | LogfileConnector | PostgresCdcConnector

# The one map from a file's `type` to its model.
CONNECTOR_TYPES: dict[str, type[ConnectorBase]] = {
    "postgres-cdc": PostgresCdcConnector,
    "jdbc": JdbcConnector,
    "logfile": LogfileConnector,
}


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
    model = CONNECTOR_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        choices = ", ".join(CONNECTOR_TYPES)
        message = (
            f"{kind!r} is not a connector type; choose one of: {choices}"
            if "type" in raw
            else f"required key is missing; choose one of: {choices}"
        )
        raise ConnectorConfigError(path, [ConfigProblem("type", message)])
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
