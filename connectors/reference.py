"""The configuration reference of connector files, generated from their pydantic models.

    python -m connectors.reference > docs/connectors-reference.md

A unit test fails when the checked-in page differs from what this prints.
"""

import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from connectors.base import ConnectorBase, SchemaOptions
from connectors.logfile.layout import LogField
from connectors.plugins import PLUGINS

_HEADER = """# Connector configuration reference

Generated from the pydantic models by `python -m connectors.reference`; do not edit by hand.
Unknown keys are refused everywhere. Any string value may contain `${ENV_VAR}` references,
replaced from the environment when the file is loaded; such values are never logged or shown.
See [Connectors](connectors.md) for what the keys are for and complete examples.
"""


def _type_name(annotation: Any) -> str:
    if annotation is SecretStr:
        return "secret string"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    origin = typing.get_origin(annotation)
    arguments = typing.get_args(annotation)
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in arguments)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in arguments if a is not type(None)) + " (optional)"
    if origin is list:
        return f"list of {_type_name(arguments[0])}"
    if origin is dict:
        return f"mapping of name to {_type_name(arguments[1])}"
    if isinstance(annotation, type):
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "see below"
        return f"`{value!r}`" if value not in ([], {}) else "empty"
    if field.default is None or field.default is PydanticUndefined:
        return "none"
    return f"`{field.default}`"


def _table(model: type[BaseModel], *, skip: tuple[str, ...] = ()) -> str:
    rows = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        if name in skip:
            continue
        description = (field.description or "").replace("|", "\\|").replace("\n", " ")
        key = field.alias or name
        rows.append(
            f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | {description} |"
        )
    return "\n".join(rows)


def _section(model: type[BaseModel], level: str, skip: tuple[str, ...] = ()) -> str:
    doc = (model.__doc__ or "").strip().splitlines()[0] if model.__doc__ else ""
    return f"{level} {model.__name__}\n\n{doc}\n\n{_table(model, skip=skip)}\n"


def render() -> str:
    """The whole reference page as Markdown."""
    common = tuple(ConnectorBase.model_fields)
    parts = [_HEADER, "## Keys of every connector file\n", _table(ConnectorBase), ""]
    parts.append(_section(SchemaOptions, "###"))
    for kind, plugin in PLUGINS.items():
        model = plugin.model
        parts.append(f"## `type: {kind}`\n")
        parts.append(_section(model, "###", skip=common))
        source = model.model_fields["source"].annotation
        assert isinstance(source, type) and issubclass(source, BaseModel)
        parts.append(_section(source, "###"))
        if kind == "logfile":
            parts.append(_section(LogField, "###"))
    return "\n".join(parts).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
