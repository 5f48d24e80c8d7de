"""The `jdbc` connector file: the connector model and its `source:` section."""

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from connectors.base import ConnectorBase, check_topic, is_topic_prefix

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
            check_topic(self.topic)
        if self.topic_prefix is not None and not is_topic_prefix(self.topic_prefix):
            raise ValueError(
                f"topic_prefix '{self.topic_prefix}' must be lowercase dot-separated "
                "segments of letters, digits and underscores, e.g. 'erp'"
            )
        return self
