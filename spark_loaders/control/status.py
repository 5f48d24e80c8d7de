"""The loader's status and control on its health port: `GET /status`, `/plan`, `POST /replay`.

The console (hub_api/console/) shows what the loader alone knows: each table's rows, last
commit and freshness, each feed's lag behind Kafka and its quarantined records by reason. The
API asks the loader for them over its health port (hub_core/health.py), with a bearer token
both sides are given (`HUB_LOADER_CONTROL_TOKEN`, `HUB_API_LOADER_TOKEN`). Without the setting
the routes answer 404: nothing is open by default. See
docs/adr/0039-loader-status-and-control-for-the-console.md.

- `GET /status`: every table of bronze, silver, gold and quarantine with its rows, last commit
  version and time, freshness; every feed with its lag (records, from the streaming progress
  the loader follows for its metrics), its state and its quarantined records by reason.
  Table facts come from the tables' Delta logs (spark_loaders/tables/delta_log.py), re-read by a
  background thread every `HUB_LOADER_STATUS_REFRESH_SECONDS`: a request never runs a Spark job.
- `GET /plan?topic=T`: what the subject's latest registered schema does to `bronze.<T>`;
  `POST /plan?topic=T` with a candidate Avro schema as the body: what it would do, as
  `hub load plan` says (spark_loaders/bronze/plan.py).
- `POST /replay?topic=T`: replay the feed's quarantine, as `hub load replay T` does.
- `GET /row?table=silver.<t>_current&key={"id": 42}`: the `_hub_partition` and `_hub_offset` of
  a silver or gold row found by its key, for row lineage (spark_loaders/control/row_lookup.py, ADRs
  0042 and 0047).
- `GET /ledger`: the tables with ledger entries, where they live and their newest version;
  `GET /ledger?table=T&after=V`: the table's commits after version V (at most
  `LEDGER_PAGE`), for the API's lineage index when it cannot read the warehouse itself
  (object storage: ADR 0048). Read from the Delta logs, as the API would: no Spark job.

Bodies are JSON; errors are `{"error_code", "message"}` with the hub's codes.
"""

import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from hub_core.errors import ErrorCode, HubError
from hub_core.health import HealthServer, StartResponse
from hub_core.ledger import (
    RETIRED,
    LocalFiles,
    LogFiles,
    log_commits,
    logged_tables,
    table_location,
    warehouse_tables,
)
from hub_core.naming import TopicName, table_suffix, topic_name, value_subject
from spark_loaders.bronze.feed_status import FeedStatusBook
from spark_loaders.runtime.metrics import LOADER_METRICS, LoaderMetrics
from spark_loaders.runtime.storage import HadoopFiles
from spark_loaders.settings import LAYERS, LoaderSettings
from spark_loaders.tables.delta_log import LogFacts, TableLog

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROUTES = ("/status", "/plan", "/replay", "/row", "/ledger")
# Commits in one `/ledger` answer: the API asks again after the last one it got.
LEDGER_PAGE = 1000
# Layers whose tables /status lists, in the order data flows through them.
STATUS_LAYERS = (*LAYERS, "quarantine")
_MAX_BODY_BYTES = 1024 * 1024  # a candidate schema


@dataclass(frozen=True, slots=True)
class TableStatus:
    """One table's facts from its Delta log; None where the log cannot say."""

    table: str
    layer: str
    rows: int | None
    version: int | None
    committed_at: float | None  # Unix time of the last commit
    freshness_s: float | None  # seconds since the last commit, as of the last refresh
    by_reason: dict[str, int]


class LoaderStatus:
    """The tables' and feeds' facts, refreshed by a background thread."""

    def __init__(
        self,
        settings: LoaderSettings,
        *,
        metrics: LoaderMetrics = LOADER_METRICS,
        clock: Callable[[], float] = time.time,
        remote: LogFiles | None = None,
    ) -> None:
        self._settings = settings
        self._remote = remote  # how a warehouse on object storage is read
        self._metrics = metrics
        self._clock = clock
        self._logs: dict[tuple[str, str], TableLog] = {}
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # the thread's turn and a replay's may overlap
        self._tables: list[TableStatus] = []
        self._refreshed_at: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Refresh now, then every `status_refresh_seconds`, in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="loader-status", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh()
            except Exception:  # a table folder half written: the next turn reads it again
                log.warning("could not refresh the loader's status", exc_info=True)
            self._stop.wait(self._settings.status_refresh_seconds)

    def refresh(self) -> None:
        """Read the new commits of every table's log (a listing and new files; no Spark)."""
        with self._refreshing:
            self._refresh()

    def _refresh(self) -> None:
        warehouse = self._settings.warehouse_dir
        files: LogFiles = LocalFiles()
        if isinstance(warehouse, Path):
            located: Iterable[tuple[str, str, Path | str]] = self._locations(warehouse)
        elif self._remote is not None:
            files, located = self._remote, self._remote_locations(self._remote, str(warehouse))
        else:
            with self._lock:
                self._refreshed_at = self._clock()
            return
        now = self._clock()
        tables = []
        for layer, name, location in located:
            table_log = self._logs.get((layer, name))
            if table_log is None or table_log.location != location:
                table_log = self._logs[(layer, name)] = TableLog(location, files)
            facts = table_log.refresh()
            if facts is not None:
                tables.append(_table_status(layer, name, facts, now))
        with self._lock:
            self._tables = tables
            self._refreshed_at = now

    def _locations(self, warehouse: Path) -> Iterable[tuple[str, str, Path]]:
        from spark_loaders.bronze.reprocess import bronze_location

        for layer in STATUS_LAYERS:
            folder = warehouse / f"{layer}.db"
            names = (
                # A name with a dot is no table: what an interrupted creation left (ADR 0040).
                sorted(p.name for p in folder.iterdir() if p.is_dir() and "." not in p.name)
                if folder.is_dir()
                else []
            )
            for name in names:
                if layer == "bronze":
                    yield layer, name, bronze_location(self._settings, warehouse, name)
                else:
                    yield layer, name, folder / name

    def _remote_locations(self, files: LogFiles, warehouse: str) -> Iterable[tuple[str, str, str]]:
        """As `_locations`, on object storage: the tables the lineage index would find
        (`hub_core.ledger.warehouse_tables`, whose databases are the status layers); a
        reprocessed bronze table by the mark its swap left."""
        for table, location in warehouse_tables(files, warehouse).items():
            if RETIRED in table:
                continue  # a location a swap replaced: no table of the metastore any more
            layer, name = table.split(".", 1)
            yield layer, name, location

    def snapshot(self) -> dict[str, Any]:
        """The body of `GET /status`."""
        with self._lock:
            tables, refreshed_at = list(self._tables), self._refreshed_at
        now = self._clock()
        # Freshness counts on between refreshes: a table that stopped changing ages.
        tables = [
            replace(t, freshness_s=max(0.0, now - t.committed_at))
            if t.committed_at is not None
            else t
            for t in tables
        ]
        warehouse = self._settings.warehouse_dir
        unknown = (
            None
            if isinstance(warehouse, Path) or self._remote is not None
            else f"the warehouse is on object storage ({warehouse}) and this status has no "
            "Spark session to read it through, so the tables' facts are unknown"
        )
        return {
            "refreshed_at": refreshed_at,
            "refresh_seconds": self._settings.status_refresh_seconds,
            "tables_unknown": unknown,
            "tables": [asdict(t) for t in tables],
            "feeds": self._feeds(tables),
        }

    def _feeds(self, tables: list[TableStatus]) -> list[dict[str, Any]]:
        lag = self._metrics.lag_by_topic()
        states = {
            s.topic: s for s in FeedStatusBook.in_checkpoints(self._settings.state_dir).list()
        }
        quarantine = {t.table: t for t in tables if t.layer == "quarantine"}
        feeds = []
        for topic in sorted(set(lag) | set(states)):
            state = states.get(topic)
            held = quarantine.get(table_suffix(TopicName(topic)))
            feeds.append(
                {
                    "topic": topic,
                    "lag_records": lag.get(topic),
                    "state": state.state.value if state else None,
                    "reason_code": state.reason_code if state else None,
                    "message": state.message if state else None,
                    "quarantined": held.rows if held else 0,
                    "quarantined_by_reason": held.by_reason if held else {},
                }
            )
        return feeds


def _table_status(layer: str, name: str, facts: LogFacts, now: float) -> TableStatus:
    committed = facts.committed_ms / 1000 if facts.committed_ms is not None else None
    return TableStatus(
        table=name,
        layer=layer,
        rows=facts.rows,
        version=facts.version,
        committed_at=committed,
        freshness_s=max(0.0, now - committed) if committed is not None else None,
        by_reason=facts.by_reason,
    )


class ControlRoutes:
    """`/status`, `/plan` and `/replay` as a WSGI app for `HealthServer.mount`."""

    def __init__(
        self,
        settings: LoaderSettings,
        status: LoaderStatus,
        *,
        spark: "SparkSession | None" = None,
        replay: Callable[[str], dict[str, Any]] | None = None,
        plan: Callable[[str, str | None], dict[str, Any]] | None = None,
        row: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    ) -> None:
        self._token = settings.control_token.get_secret_value() if settings.control_token else ""
        self._settings = settings
        self._status = status
        self._spark = spark
        self._replay = replay or self._replay_with_spark
        self._plan = plan or self._plan_from_log
        self._row = row or self._row_with_spark
        self._replaying = threading.Lock()  # one replay at a time: they MERGE the same tables

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        try:
            status, body = self._answer(environ)
        except HubError as exc:
            status, body = _error(exc.code, exc.message)
        except Exception:
            log.exception("the loader's %s failed", environ.get("PATH_INFO"))
            status, body = _error(
                ErrorCode.LOADER_ACTION_FAILED,
                f"The loader failed to answer {environ.get('PATH_INFO')}; its log has the details.",
            )
        data = json.dumps(body).encode()
        start_response(
            status,
            [
                ("Content-Type", "application/json"),
                ("Content-Length", str(len(data))),
                ("Cache-Control", "no-store"),
            ],
        )
        return [data]

    def _answer(self, environ: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        refusal = self._refusal(environ.get("HTTP_AUTHORIZATION"))
        if refusal is not None:
            return refusal
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "GET")
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if path == "/status" and method in ("GET", "HEAD"):
            return "200 OK", self._status.snapshot()
        if path == "/plan" and method in ("GET", "POST"):
            topic = topic_name((query.get("topic") or [""])[0])
            candidate = _body(environ) if method == "POST" else None
            return "200 OK", self._plan(topic, candidate)
        if path == "/replay" and method == "POST":
            topic = topic_name((query.get("topic") or [""])[0])
            with self._replaying:
                result = self._replay(topic)
            try:
                self._status.refresh()  # the console shows the replay's outcome at once
            except Exception:  # the replay is done: the next turn of the thread refreshes
                log.warning("could not refresh the status after a replay", exc_info=True)
            return "200 OK", result
        if path == "/row" and method == "GET":
            table = (query.get("table") or [""])[0]
            return "200 OK", self._row(table, _key((query.get("key") or [""])[0]))
        if path == "/ledger" and method == "GET":
            table = (query.get("table") or [""])[0]
            if not table:
                return "200 OK", self._ledger_tables()
            return "200 OK", self._ledger_commits(table, _version((query.get("after") or [""])[0]))
        return _error(
            ErrorCode.MALFORMED_REQUEST,
            f"{method} {path} is not a loader route: GET /status, GET or POST /plan?topic=T, "
            "POST /replay?topic=T, GET /row?table=T&key=K, GET /ledger[?table=T&after=V].",
        )

    def _refusal(self, header: str | None) -> tuple[str, dict[str, Any]] | None:
        """None when the request carries the control token; else the answer refusing it."""
        if not self._token:
            return _error(
                ErrorCode.LOADER_CONTROL_DISABLED,
                "The loader's control routes are off: set HUB_LOADER_CONTROL_TOKEN (and the "
                "same token in the API's HUB_API_LOADER_TOKEN) to turn them on.",
            )
        scheme, _, given = (header or "").partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return _error(
                ErrorCode.UNAUTHENTICATED,
                "The loader's control routes need its token: send `Authorization: Bearer "
                "<HUB_LOADER_CONTROL_TOKEN>`.",
            )
        if not hmac.compare_digest(given.strip().encode(), self._token.encode()):
            return _error(
                ErrorCode.FORBIDDEN,
                "That is not the loader's control token; give the API the same token as the "
                "loader (HUB_API_LOADER_TOKEN = HUB_LOADER_CONTROL_TOKEN).",
            )
        return None

    def _replay_with_spark(self, topic: str) -> dict[str, Any]:
        from spark_loaders.bronze.replay import replay

        if self._spark is None:
            raise HubError("This loader has no Spark session to replay with.",
                           code=ErrorCode.LOADER_ACTION_FAILED)  # fmt: skip
        result = replay(self._spark, self._settings, topic)
        return {**asdict(result), "message": result.describe()}

    def _row_with_spark(self, table: str, key: dict[str, Any]) -> dict[str, Any]:
        from spark_loaders.control.row_lookup import row_position

        if self._spark is None:
            raise HubError("This loader has no Spark session to read rows with.",
                           code=ErrorCode.LOADER_ACTION_FAILED)  # fmt: skip
        return row_position(self._spark, table, key)

    def _log_files(self) -> tuple[LogFiles, str]:
        """How this loader's warehouse is read, and where it is."""
        warehouse = self._settings.warehouse_dir
        if isinstance(warehouse, Path):
            return LocalFiles(), str(warehouse)
        if self._spark is None:
            raise HubError("This loader has no Spark session to read object storage with.",
                           code=ErrorCode.LOADER_ACTION_FAILED)  # fmt: skip
        return HadoopFiles(self._spark), str(warehouse)

    def _ledger_tables(self) -> dict[str, Any]:
        files, warehouse = self._log_files()
        return {
            "tables": [
                {"table": name, "location": table.location, "newest": table.newest}
                for name, table in logged_tables(files, warehouse).items()
            ]
        }

    def _ledger_commits(self, table: str, after: int) -> dict[str, Any]:
        files, warehouse = self._log_files()
        location = table_location(files, warehouse, table)
        if location is None:
            raise HubError(f"{table[:300]} is no table of this loader with ledger entries.",
                           code=ErrorCode.LINEAGE_NOT_FOUND)  # fmt: skip
        commits = log_commits(files, location, after=after, limit=LEDGER_PAGE)
        return {
            "table": table,
            "location": location,
            "commits": [
                {
                    "version": c.version,
                    "timestamp_ms": c.timestamp_ms,
                    "operation": c.operation,
                    "user_metadata": None if c.entry is None else c.entry.encode(),
                    "table_id": c.table_id,
                }
                for c in commits
            ],
            "more": len(commits) == LEDGER_PAGE,
        }

    def _plan_from_log(self, topic: str, candidate: str | None) -> dict[str, Any]:
        return plan_for(self._settings, topic, candidate)


def plan_for(settings: LoaderSettings, topic: str, candidate: str | None) -> dict[str, Any]:
    """The plan of `candidate` (Avro schema text; None: the latest registered) for
    `bronze.<topic>`, from the table's Delta log and the registry, as `hub load plan` makes it."""
    from registry.avro import parse
    from spark_loaders.bronze.plan import plan, table_columns_from_log
    from spark_loaders.bronze.reprocess import bronze_location
    from spark_loaders.bronze.schemas import RegistryClient

    subject = value_subject(TopicName(topic))
    registry = RegistryClient(settings.registry_url, api_key=settings.registry_key)
    try:
        latest = registry.latest(subject)
        text = candidate if candidate is not None else (latest.text if latest else None)
        if text is None:
            raise HubError(
                f"Subject {subject} has no registered schema: send a candidate schema.",
                code=ErrorCode.SUBJECT_NOT_FOUND,
            )
        parse(text)  # an invalid candidate fails here with its INVALID_SCHEMA error
        verdict = registry.check(subject, text) if candidate is not None else None
    finally:
        registry.close()
    warehouse = settings.warehouse_dir
    notes: tuple[str, ...] = ()
    columns = None
    if isinstance(warehouse, Path):
        suffix = table_suffix(TopicName(topic))
        columns = table_columns_from_log(bronze_location(settings, warehouse, suffix))
    else:
        notes = (f"the table's columns are on object storage ({warehouse}); compared with the "
                 "registered schema instead",)  # fmt: skip
    result = plan(
        json.loads(text),
        table=f"bronze.{table_suffix(TopicName(topic))}",
        table_columns=columns,
        latest=json.loads(latest.text) if latest else None,
        latest_version=latest.version if latest else None,
    )
    result = replace(result, notes=result.notes + notes)
    if verdict is not None:
        result = replace(result, registry_verdict=(verdict.compatible, verdict.messages))
    return {
        "table": result.table,
        "baseline": result.baseline,
        "changes": [c.describe() for c in result.changes if c.applicable],
        "quarantined": list(result.quarantined),
        "notes": list(result.notes),
        "refused": result.refused,
        "registry_compatible": verdict.compatible if verdict is not None else None,
        "text": result.render(),
    }


def _body(environ: dict[str, Any]) -> str:
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length <= 0 or length > _MAX_BODY_BYTES:
        raise HubError(
            f"POST /plan needs a candidate Avro schema as its body (at most {_MAX_BODY_BYTES} "
            "bytes).",
            code=ErrorCode.MALFORMED_REQUEST,
        )
    return bytes(environ["wsgi.input"].read(length)).decode("utf-8", errors="replace")


def _key(text: str) -> dict[str, Any]:
    """The `key` parameter of `/row`: a JSON object of column names and values."""
    try:
        key = json.loads(text) if len(text) <= 4096 else None
    except ValueError:
        key = None
    if not isinstance(key, dict) or not all(isinstance(v, str | int | float | bool)
                                            for v in key.values()):  # fmt: skip
        raise HubError(
            "GET /row needs key=<a JSON object of the row's key columns and their values>, "
            'e.g. key={"id": 42}.',
            code=ErrorCode.INVALID_ROW_KEY,
        )
    return key


def _version(text: str) -> int:
    """The `after` of `/ledger`: a table version, or -1 (before the first) when not given."""
    if not text:
        return -1
    if not text.lstrip("-").isdigit() or not -1 <= int(text) < 2**63:
        raise HubError(f"after={text[:32]!r} is not a table version: give a whole number.",
                       code=ErrorCode.MALFORMED_REQUEST)  # fmt: skip
    return int(text)


def _error(code: ErrorCode, message: str) -> tuple[str, dict[str, Any]]:
    reasons = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
               409: "Conflict", 422: "Unprocessable Entity", 500: "Internal Server Error",
               503: "Service Unavailable"}  # fmt: skip
    status = code.http_status
    return f"{status} {reasons.get(status, 'Error')}", {"error_code": int(code), "message": message}


def serve_status(
    health: HealthServer, settings: LoaderSettings, spark: "SparkSession"
) -> LoaderStatus:
    """Mount the routes on the loader's `health` server and, when they are on, start
    refreshing the status; the caller stops it (`LoaderStatus.stop`) when the loader stops."""
    remote = None if isinstance(settings.warehouse_dir, Path) else HadoopFiles(spark)
    status = LoaderStatus(settings, remote=remote)
    health.mount(ROUTES, ControlRoutes(settings, status, spark=spark))
    if settings.control_token is not None and health.port is not None:
        status.start()
    return status
