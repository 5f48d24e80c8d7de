"""Health, readiness and Prometheus metrics."""

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.api_server import serve_api
from tests.support.hub_client import create_feed, publish, unique_topic

pytestmark = pytest.mark.integration


def test_liveness_and_readiness_of_a_healthy_api(api_url: str) -> None:
    assert httpx.get(f"{api_url}/healthz").json() == {"status": "ok"}
    live = httpx.get(f"{api_url}/livez")
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    assert httpx.post(f"{api_url}/livez").status_code == 404  # only probes' GET is answered
    ready = httpx.get(f"{api_url}/readyz")
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "checks": {"database": "ok", "kafka": "ok"}}


def test_readiness_names_an_unreachable_kafka(tmp_path: Path) -> None:
    with serve_api(
        database_url=f"sqlite:///{tmp_path / 'hub.db'}", bootstrap_servers="127.0.0.1:1"
    ) as url:
        ready = httpx.get(f"{url}/readyz", timeout=30)
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"database": "ok", "kafka": "unreachable"}


def test_metrics_count_records_by_feed_and_reason(
    api_url: str, team_key: Callable[[str], str]
) -> None:
    key = team_key("ops")
    topic = unique_topic("ops")
    schema = {"type": "record", "name": "Ping", "fields": [{"name": "n", "type": "int"}]}
    create_feed(api_url, key, topic=topic, schema=schema, owner="ops")
    publish(api_url, key, topic, [{"value": {"n": 1}}, {"value": {"n": 2}}, {"value": {"n": "x"}}])

    text = httpx.get(f"{api_url}/metrics").text

    assert f'hub_records_accepted_total{{feed="{topic}"}} 2.0' in text
    assert f'hub_records_rejected_total{{feed="{topic}",reason="INVALID_RECORD"}} 1.0' in text
    assert f'hub_publish_request_seconds_count{{feed="{topic}"}} 1.0' in text
    assert (
        'hub_http_requests_total{method="POST",route="/v1/feeds/{topic}/records",status="207"}'
        in text
    )
