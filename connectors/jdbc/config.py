"""The `jdbc` source configuration, as written in a connector YAML file."""

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

JdbcMode = Literal["incrementing", "timestamp", "timestamp+incrementing"]


class JdbcSource(BaseModel):
    """Polls tables (or one query) for rows past the last position seen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: SecretStr = Field(
        description=(
            "SQLAlchemy URL of the database, e.g. `postgresql+psycopg://hub:${DB_PASSWORD}@db/shop`"
            " or `sqlite:////data/app.db`."
        )
    )
    mode: JdbcMode = Field(
        description=(
            "incrementing: rows whose `incrementing_column` is above the last seen (new rows "
            "only); timestamp: rows whose `timestamp_column` is later than the last seen (new "
            "and updated rows); timestamp+incrementing: timestamp, then id to break ties."
        )
    )
    tables: list[str] = Field(
        default_factory=list,
        description="Tables to poll (`table` or `schema.table`); one topic per table.",
    )
    query: str | None = Field(
        default=None,
        description=(
            "A SELECT polled instead of tables (it is wrapped, so it may join and filter); "
            "needs the connector's `topic`."
        ),
    )
    incrementing_column: str | None = Field(
        default=None, description="A strictly increasing column (modes with `incrementing`)."
    )
    timestamp_column: str | None = Field(
        default=None, description="A last-modified column (modes with `timestamp`)."
    )
    key_columns: list[str] | None = Field(
        default=None,
        description="Columns that key the records; default: the table's primary key.",
    )
    poll_seconds: float = Field(default=5.0, gt=0, description="Pause between polls.")
    batch_size: int = Field(
        default=1000, gt=0, description="Rows read and published per batch at most."
    )
    timestamp_delay_seconds: float = Field(
        default=0.0,
        ge=0,
        description=(
            "Rows are read only once their timestamp is this far in the past, so a transaction "
            "that commits late with an older timestamp is not missed."
        ),
    )

    @field_validator("url")
    @classmethod
    def _sqlalchemy_url(cls, url: SecretStr) -> SecretStr:
        try:
            make_url(url.get_secret_value())
        except (ArgumentError, ValueError):
            # The value may hold a password: say what is expected, never echo it.
            raise ValueError(
                "not a SQLAlchemy URL; expected dialect+driver://user:password@host/database "
                "or sqlite:///path"
            ) from None
        return url

    @model_validator(mode="after")
    def _columns_for_mode(self) -> Self:
        if "incrementing" in self.mode and not self.incrementing_column:
            raise ValueError(f"mode '{self.mode}' needs `incrementing_column`")
        if "timestamp" in self.mode and not self.timestamp_column:
            raise ValueError(f"mode '{self.mode}' needs `timestamp_column`")
        if bool(self.tables) == (self.query is not None):
            raise ValueError("give either `tables` (a list) or `query`, not both or neither")
        return self
