"""`hub publish FEED FILE.jsonl`: a file through the API, with a summary, safe to run twice."""

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.support.cli import hub
from tests.support.hub_client import create_feed, unique_topic

pytestmark = pytest.mark.integration

EVENT = {
    "type": "record",
    "name": "Click",
    "fields": [{"name": "n", "type": "long"}, {"name": "url", "type": "string"}],
}


def test_a_file_is_published_in_batches_and_a_rerun_publishes_nothing_twice(
    api_url: str, team_key: Callable[[str], str], tmp_path: Path
) -> None:
    key = team_key("web")
    topic = unique_topic("web")
    create_feed(api_url, key, topic=topic, schema=EVENT, owner="web")
    lines = [json.dumps({"value": {"n": n, "url": f"/p/{n}"}}) for n in range(1_200)]
    lines[10] = json.dumps({"value": {"n": "ten", "url": "/p/10"}})  # invalid for the schema
    lines[20] = "{not json"
    data = tmp_path / "clicks.jsonl"
    data.write_text("\n".join(lines) + "\n")
    args = ["publish", topic, str(data), "--api", api_url, "--key", key, "--batch-size", "500",
            "--rejects", str(tmp_path / "rejects.jsonl")]  # fmt: skip

    first = hub(*args)

    assert first.returncode == 1, first.stderr
    assert "1200 lines: 1198 published, 2 failed" in first.stdout
    rejects = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert {(r["line"], r["error_code"]) for r in rejects} == {(11, 42220), (21, 40001)}
    assert _end_offset(api_url, topic) == 1_198

    again = hub(*args)
    assert "1198 published" in again.stdout
    assert _end_offset(api_url, topic) == 1_198  # answered from the idempotency keys


def _end_offset(api_url: str, topic: str) -> int:
    offsets = httpx.get(f"{api_url}/v1/feeds/{topic}").json()["end_offsets"]
    return sum(offsets.values())
