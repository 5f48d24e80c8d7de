"""`hub publish` against a scripted local HTTP server: what it sends again, and when."""

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from hub_cli.publish_file import publish_file
from hub_core.retries import Backoff
from tests.support.ports import free_port

pytestmark = pytest.mark.unit

QUICK = Backoff(initial_s=0.01, max_s=0.02, jitter_s=0.01, attempts=3, timeout_s=10.0)
ACCEPTED = (200, {}, {"results": [{"partition": 0, "offset": 0}, {"partition": 0, "offset": 1}]})
UNAVAILABLE = {"error_code": 50301, "message": "Kafka is unavailable; retry."}


@dataclass
class Script:
    """The answers to give, in order (the last one repeats), and what was asked."""

    answers: list[tuple[int, dict[str, str], dict[str, Any]]]
    requests: list[tuple[float, str | None]] = field(default_factory=list)


@pytest.fixture
def api() -> Iterator[tuple[str, Script]]:
    script = Script(answers=[])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            script.requests.append((time.monotonic(), self.headers.get("Idempotency-Key")))
            index = min(len(script.requests), len(script.answers)) - 1
            status, headers, body = script.answers[index]
            payload = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Type": "application/json"}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", script
    finally:
        server.shutdown()
        server.server_close()


def _publish(url: str, tmp_path: Path, backoff: Backoff | None = None) -> Any:
    data = tmp_path / "records.jsonl"
    data.write_text('{"value": {"n": 1}}\n{"value": {"n": 2}}\n')
    options = {} if backoff is None else {"backoff": backoff}
    return publish_file(
        api_url=url, api_key=None, feed="web.clicks", path=data, batch_size=500,
        values=False, on_error="reject", show_progress=False, **options,
    )  # fmt: skip


@pytest.mark.parametrize("status", [503, 429])
def test_a_batch_is_sent_again_with_its_key_no_sooner_than_retry_after_asks(
    api: tuple[str, Script], tmp_path: Path, status: int
) -> None:
    url, script = api
    script.answers = [(status, {"Retry-After": "1"}, UNAVAILABLE), ACCEPTED]

    summary = _publish(url, tmp_path)

    assert summary.accepted == 2 and summary.failed == 0
    (first, key), (second, again) = script.requests
    assert key is not None and again == key
    assert 1.0 <= second - first < 2.5  # the server's second, plus at most a second of jitter


def test_a_retry_after_beyond_the_bound_reports_the_batch_failed_without_waiting(
    api: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = api
    script.answers = [(503, {"Retry-After": "3600"}, UNAVAILABLE)]

    started = time.monotonic()
    summary = _publish(url, tmp_path)

    assert time.monotonic() - started < 5
    assert len(script.requests) == 1
    assert summary.rejected == {"50301": 2}


def test_without_retry_after_a_batch_is_retried_a_bounded_number_of_times(
    api: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = api
    script.answers = [(503, {}, UNAVAILABLE)]

    summary = _publish(url, tmp_path, QUICK)

    assert len(script.requests) == QUICK.attempts
    assert summary.rejected == {"50301": 2}
    assert summary.failures[0]["message"] == UNAVAILABLE["message"]


def test_a_batch_whose_key_is_still_in_use_is_sent_again(
    api: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = api
    in_use = {"error_code": 40922, "message": "The key's first request is still running."}
    script.answers = [(409, {}, in_use), ACCEPTED]

    summary = _publish(url, tmp_path, QUICK)

    assert summary.accepted == 2
    assert len(script.requests) == 2


def test_a_refusal_is_reported_at_once_and_never_sent_again(
    api: tuple[str, Script], tmp_path: Path
) -> None:
    url, script = api
    script.answers = [(404, {}, {"error_code": 40420, "message": "Feed 'web.clicks' not found."})]

    summary = _publish(url, tmp_path, QUICK)

    assert len(script.requests) == 1
    assert summary.rejected == {"40420": 2}


def test_an_unreachable_api_is_retried_a_bounded_number_of_times(tmp_path: Path) -> None:
    summary = _publish(f"http://127.0.0.1:{free_port()}", tmp_path, QUICK)

    assert summary.rejected == {"50301": 2}
    assert "API unreachable" in summary.failures[0]["message"]
