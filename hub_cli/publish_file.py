"""`hub publish FEED FILE.jsonl`: a JSON-lines file through the publish API, in batches.

Each batch carries an Idempotency-Key derived from the file's content and the batch's place in
it, so running the same command again after a crash or a failed batch publishes nothing twice.
The same key is what makes it safe to send a batch again when the API did not answer, or
answered 503 or 429 (overloaded, Kafka unavailable): such a batch is retried with jittered
exponential backoff, waiting at least what the answer's `Retry-After` asks, for a bounded time
(`PUBLISH_BACKOFF`); then its records are reported as failed.
"""

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

from hub_cli.errors import ApiUnavailable
from hub_core.errors import ErrorCode
from hub_core.retries import Backoff, retry_after_seconds, retry_transient

# Up to six tries in about two minutes per batch: an API restarting, Kafka back from a short
# outage. A `Retry-After` longer than a minute ends the retries: re-run the command later.
PUBLISH_BACKOFF = Backoff(
    initial_s=1.0, max_s=15.0, jitter_s=1.0, attempts=6, timeout_s=120.0, max_retry_after_s=60.0
)


@dataclass
class PublishSummary:
    lines: int = 0
    accepted: int = 0
    dead_lettered: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(self.rejected.values())

    def describe(self) -> str:
        text = f"{self.lines} lines: {self.accepted} published"
        if self.dead_lettered:
            text += f", {self.dead_lettered} dead-lettered"
        if self.failed:
            reasons = ", ".join(f"{n} x {code}" for code, n in self.rejected.most_common())
            text += f", {self.failed} failed ({reasons})"
        return text


def _batches(
    path: Path, *, batch_size: int, values: bool
) -> Iterator[tuple[list[tuple[int, Any]], int]]:
    """Batches of (line number, record or parse error), each with the bytes read so far.

    A bad line never stops the file: it is reported and the rest is sent.
    """
    batch: list[tuple[int, Any]] = []
    position = 0
    with path.open("rb") as lines:
        for number, raw in enumerate(lines, start=1):
            position += len(raw)
            if not raw.strip():
                continue
            try:
                document = json.loads(raw)
            except json.JSONDecodeError as exc:
                batch.append((number, ValueError(f"line {number} is not JSON: {exc.msg}")))
            else:
                if values:
                    batch.append((number, {"value": document}))
                elif isinstance(document, dict) and "value" in document:
                    batch.append((number, document))
                else:
                    batch.append(
                        (number, ValueError(f'line {number} has no "value" (use --values)'))
                    )
            if len(batch) >= batch_size:
                yield batch, position
                batch = []
    if batch:
        yield batch, position


def publish_file(
    *,
    api_url: str,
    api_key: str | None,
    feed: str,
    path: Path,
    batch_size: int,
    values: bool,
    on_error: str,
    show_progress: bool = True,
    backoff: Backoff = PUBLISH_BACKOFF,
) -> PublishSummary:
    """Send the file's records in batches, retrying batches the API could not take yet."""
    summary = PublishSummary()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    columns = (TextColumn("{task.description}"), BarColumn(), TransferSpeedColumn(),
               TimeRemainingColumn())  # fmt: skip
    with (
        httpx.Client(base_url=api_url, headers=headers, timeout=120) as http,
        Progress(*columns, disable=not show_progress) as progress,
    ):
        task = progress.add_task(f"publishing to {feed}", total=path.stat().st_size)
        batches = _batches(path, batch_size=batch_size, values=values)
        for index, (batch, position) in enumerate(batches):
            records = [(n, r) for n, r in batch if not isinstance(r, Exception)]
            for number, error in ((n, r) for n, r in batch if isinstance(r, Exception)):
                summary.rejected["40001"] += 1
                summary.failures.append(
                    {"line": number, "error_code": 40001, "message": str(error)}
                )
            summary.lines += len(batch)
            if records:
                answer = _send(
                    http,
                    feed,
                    [r for _, r in records],
                    on_error=on_error,
                    idempotency_key=f"{digest}-{index}",
                    backoff=backoff,
                )
                _tally(summary, [n for n, _ in records], answer)
            progress.update(task, completed=position)
    return summary


def _send(
    http: httpx.Client,
    feed: str,
    records: list[Any],
    *,
    on_error: str,
    idempotency_key: str,
    backoff: Backoff,
) -> dict[str, Any]:
    """POST one batch; send it again (same key) while the API is unreachable or says to."""

    def once() -> dict[str, Any]:
        try:
            response = http.post(
                f"/v1/feeds/{feed}/records",
                params={"on_error": on_error},
                json={"records": records},
                headers={"Idempotency-Key": idempotency_key},
            )
        except httpx.TransportError as exc:
            unreachable = {
                "error_code": int(ErrorCode.KAFKA_UNAVAILABLE),
                "message": f"API unreachable: {exc}",
            }
            raise ApiUnavailable(unreachable) from exc
        body = _body(response)
        if _come_back_later(response, body):
            wait = retry_after_seconds(response.headers.get("Retry-After"))
            raise ApiUnavailable(body, retry_after_s=wait)
        return body

    try:
        return retry_transient(once, backoff=backoff)
    except ApiUnavailable as exc:
        return exc.answer


def _come_back_later(response: httpx.Response, body: dict[str, Any]) -> bool:
    """503 and 429 ask to be asked again; so does a 409 for a key whose first use is running."""
    if response.status_code in (503, 429):
        return True
    in_use = int(ErrorCode.IDEMPOTENCY_KEY_IN_USE)
    return response.status_code == 409 and body.get("error_code") == in_use


def _body(response: httpx.Response) -> dict[str, Any]:
    """The JSON answer, or an error naming the status when a proxy answered something else."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    status = response.status_code
    return {"error_code": status, "message": f"HTTP {status}: {response.text[:200]}"}


def _tally(summary: PublishSummary, lines: list[int], answer: dict[str, Any]) -> None:
    results = answer.get("results")
    if not isinstance(results, list) or len(results) != len(lines):
        # A request-level refusal (401, 404, 413, ...): every record of the batch failed.
        code = str(answer.get("error_code", "unknown"))
        results = [{"error_code": code, "message": answer.get("message", "")} for _ in lines]
    for line, result in zip(lines, results, strict=True):
        if "offset" in result and "error_code" not in result:
            summary.accepted += 1
        elif result.get("dead_lettered"):
            summary.dead_lettered += 1
        else:
            summary.rejected[str(result.get("error_code"))] += 1
            summary.failures.append({"line": line, **result})
