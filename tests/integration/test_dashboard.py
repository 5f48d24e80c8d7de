"""The Grafana dashboard the chart ships queries only metrics the hub exposes.

A renamed metric, or a typo in a panel, would leave a panel silently empty in production. The
names exposed are those of real `/metrics` answers: the session's API, and a connector worker
serving its registry over the health server as `hub connect run` does. The loader's are those
of the registry its health server serves (`spark_loaders.runtime.metrics`), collected in this
process rather than by starting Spark.
"""

import json
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest

from hub_core.health import HealthServer
from spark_loaders.runtime.metrics import LOADER_METRICS
from tests.conftest import REPO
from tests.support.connect import ConnectHub, connector_file
from tests.support.metrics import dashboard_queries, queried_metrics, series_names

pytestmark = pytest.mark.integration

DASHBOARD = REPO / "helm" / "integration-hub" / "dashboards" / "hub.json"


def test_every_metric_the_dashboard_queries_is_exposed_by_a_component(
    tmp_path: Path, api_url: str, connect_hub: ConnectHub
) -> None:
    connect_hub.team_key("erp")
    lines = tmp_path / "app.log"
    lines.write_text('{"n": 1}\n')
    log = connector_file(tmp_path, kind="logfile", owner="erp", source={
        "paths": [str(lines)], "format": "json", "poll_seconds": 0.2,
        "fields": {"n": {"type": "long", "required": True}},
    })  # fmt: skip
    with (
        connect_hub.worker(log.file) as worker,
        HealthServer("127.0.0.1", 0, name="connectors", metrics=worker.metrics.registry) as health,
    ):
        connectors = httpx.get(f"http://127.0.0.1:{health.port}/metrics").text
    exposed = {
        "api": series_names(httpx.get(f"{api_url}/metrics").text),
        "connectors": series_names(connectors),
        "loader": series_names(generate_latest(LOADER_METRICS.registry).decode()),
    }

    queries = dashboard_queries(json.loads(DASHBOARD.read_text()))
    assert len(queries) >= 15
    queried = {name: expr for expr in queries for name in queried_metrics(expr)}
    every = set().union(*exposed.values())
    missing = {name: expr for name, expr in queried.items() if name not in every}
    assert not missing, f"the dashboard queries metrics no component exposes: {missing}"
    # Each component's metrics appear on the dashboard.
    for component, names in exposed.items():
        assert queried.keys() & names, f"no panel shows the {component}'s metrics"
