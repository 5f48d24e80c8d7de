"""What every connector file has, whatever its type, and the checks the plugins' models share.

A plugin's model (`connectors/<name>/config.py`) subclasses `ConnectorBase`, adds its `type`
literal, its topic keys and its `source:` model, and is listed in `connectors.plugins.PLUGINS`.
"""

import re

from pydantic import BaseModel, ConfigDict, Field

from hub_core.errors import TerminalError
from hub_core.naming import topic_name

_NAME = r"^[a-z][a-z0-9_-]{0,99}$"
_SEGMENTS = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$")


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


def check_topic(value: str) -> None:
    """Raise ValueError (which pydantic reports at the key) when `value` is no valid topic name."""
    try:
        topic_name(value)
    except TerminalError as exc:
        raise ValueError(exc.message) from exc


def is_topic_prefix(value: str) -> bool:
    """Whether `value` can start topic names: lowercase dot-separated segments, e.g. `cdc.shop`."""
    return _SEGMENTS.match(value) is not None
