"""The declarative warehouse model: dimensions and facts of star schemas, read from YAML.

Pydantic refuses unknown keys; every error names the file, the key path, the bad value and,
where there is a closed set, the valid choices.
"""

import re
from enum import IntEnum, unique
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spark_loaders.warehouse.errors import InvalidWarehouseModel

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_TOPIC = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")


@unique
class ScdType(IntEnum):
    """How a dimension keeps attribute changes: overwrite (1) or a new version (2)."""

    OVERWRITE = 1
    VERSIONED = 2


def _name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError("must be lowercase letters, digits and `_`, starting with a letter")
    return value


class Dimension(BaseModel):
    """A dimension table `gold.dim_<name>`, one member per business key of a changelog feed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Table `gold.dim_<name>`; the surrogate key is `<name>_key`.")
    source: str = Field(description="The changelog feed (topic) the members come from.")
    business_key: list[str] = Field(min_length=1, description="Row columns identifying a member.")
    attributes: list[str] = Field(
        min_length=1, description="Tracked row columns copied into the dimension."
    )
    scd_type: ScdType = Field(default=ScdType.VERSIONED, description="1 overwrite, 2 versions.")

    _check_name = field_validator("name")(classmethod(lambda cls, v: _name(v)))

    @field_validator("source")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not _TOPIC.match(value):
            raise ValueError("must be a hub topic `<domain>.<name>`, e.g. `shop.customers`")
        return value


class DimensionReference(BaseModel):
    """Which fact columns hold a dimension's business key, and which time picks the version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dimension: str = Field(description="Name of a dimension of this model.")
    columns: dict[str, str] = Field(
        min_length=1,
        description="Fact column -> the dimension's business key column, one per key column.",
    )
    as_of: str | None = Field(
        default=None,
        description="Fact column whose time picks the dimension version; default: event_time.",
    )


class Fact(BaseModel):
    """A fact table `gold.fact_<name>`: one row per grain of an event feed's records."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Table `gold.fact_<name>`.")
    source: str = Field(description="The feed (topic) whose bronze records are the facts.")
    grain: list[str] = Field(min_length=1, description="Columns identifying one fact row.")
    event_time: str = Field(description="Timestamp column of the fact: when it happened.")
    measures: list[str] = Field(default_factory=list, description="Numeric columns to keep.")
    dimensions: list[DimensionReference] = Field(
        default_factory=list, description="Foreign keys to the model's dimensions."
    )

    _check_name = field_validator("name")(classmethod(lambda cls, v: _name(v)))

    @field_validator("source")
    @classmethod
    def _topic(cls, value: str) -> str:
        if not _TOPIC.match(value):
            raise ValueError("must be a hub topic `<domain>.<name>`, e.g. `shop.orders`")
        return value


class WarehouseModel(BaseModel):
    """A model file: its dimensions and facts."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = Field(default=1, description="Model file format version; only 1 exists.")
    dimensions: list[Dimension] = Field(default_factory=list)
    facts: list[Fact] = Field(default_factory=list)

    @field_validator("version")
    @classmethod
    def _version(cls, value: int) -> int:
        if value != 1:
            raise ValueError("valid choices: 1")
        return value

    def dimension(self, name: str) -> Dimension:
        return next(d for d in self.dimensions if d.name == name)


def load_model(path: Path) -> WarehouseModel:
    """Read and validate a model file; errors name the file, key path, value and choices."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise InvalidWarehouseModel(
            f"{path}: cannot read the model file ({exc.strerror})."
        ) from exc
    except yaml.YAMLError as exc:
        raise InvalidWarehouseModel(f"{path}: not valid YAML: {exc}") from exc
    return parse_model(data, source=str(path))


def parse_model(data: Any, *, source: str) -> WarehouseModel:
    """Validate model data read from `source` (a file name, for messages)."""
    if not isinstance(data, dict):
        raise InvalidWarehouseModel(
            f"{source}: a model is a mapping with `dimensions` and `facts`, "
            f"not {type(data).__name__}."
        )
    try:
        model = WarehouseModel.model_validate(data)
    except ValidationError as exc:
        raise InvalidWarehouseModel(
            f"{source}: " + "; ".join(_describe(e) for e in exc.errors())
        ) from exc
    _check_references(model, source)
    return model


def _describe(error: Any) -> str:
    path = _path(error["loc"])
    value = error.get("input")
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{path}: unknown key (remove it or fix its spelling)"
    if kind == "missing":
        return f"{path}: required key missing"
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind == "enum":
        message = "valid choices: " + str(error.get("ctx", {}).get("expected", ""))
    return f"{path}: {value!r} is invalid: {message}"


def _path(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _check_references(model: WarehouseModel, source: str) -> None:
    """Cross-checks pydantic cannot do field by field: names, references, key arity."""
    problems: list[str] = []
    listed: dict[str, list[str]] = {
        "dimensions": [d.name for d in model.dimensions],
        "facts": [f.name for f in model.facts],
    }
    for kind, item_names in listed.items():
        seen: set[str] = set()
        for i, name in enumerate(item_names):
            if name in seen:
                problems.append(f"{kind}[{i}].name: {name!r} is used twice")
            seen.add(name)
    names = [d.name for d in model.dimensions]
    for i, dim in enumerate(model.dimensions):
        overlap = sorted(set(dim.business_key) & set(dim.attributes))
        if overlap:
            problems.append(
                f"dimensions[{i}].attributes: {overlap} are business key columns already"
            )
    for i, fact in enumerate(model.facts):
        for j, ref in enumerate(fact.dimensions):
            where = f"facts[{i}].dimensions[{j}]"
            if ref.dimension not in names:
                problems.append(
                    f"{where}.dimension: {ref.dimension!r} is not a dimension of this model; "
                    f"valid choices: {', '.join(names) or '(none declared)'}"
                )
                continue
            key = model.dimension(ref.dimension).business_key
            wrong = sorted(set(ref.columns.values()) - set(key))
            if wrong or len(ref.columns) != len(key):
                problems.append(
                    f"{where}.columns: {ref.columns!r} must map one fact column to each business "
                    f"key column of {ref.dimension!r}; valid choices: {', '.join(key)}"
                )
    if problems:
        raise InvalidWarehouseModel(f"{source}: " + "; ".join(problems))
