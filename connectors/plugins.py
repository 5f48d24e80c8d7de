"""The one map from a connector file's `type` to its plugin: its model and how to build its source.

A plugin is a folder `connectors/<name>/`: `config.py` holds the connector's pydantic model
(unknown keys refused) and `source.py` has `create(config) -> Source`. A source module is imported
only when a connector of its type runs, so a process tailing log files loads no database driver.
"""

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from connectors.base import ConnectorBase
from connectors.jdbc.config import JdbcConnector
from connectors.logfile.config import LogfileConnector
from connectors.postgres.config import PostgresCdcConnector

if TYPE_CHECKING:
    from connectors.runtime import Source


@dataclass(frozen=True, slots=True)
class Plugin:
    """A connector type: the model its files validate against and the module of its source."""

    model: type[ConnectorBase]
    source_module: str

    def build_source(self, config: ConnectorBase) -> "Source":
        """A new source for a validated connector of this type (imports its module once)."""
        module = importlib.import_module(self.source_module)
        source: Source = module.create(config)
        return source


ConnectorConfig = JdbcConnector | LogfileConnector | PostgresCdcConnector

PLUGINS: dict[str, Plugin] = {
    "postgres-cdc": Plugin(PostgresCdcConnector, "connectors.postgres.source"),
    "jdbc": Plugin(JdbcConnector, "connectors.jdbc.source"),
    "logfile": Plugin(LogfileConnector, "connectors.logfile.source"),
}
