"""Liveness, readiness and metrics for orchestrators, load balancers and Prometheus."""

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Receive, Scope, Send

from hub_api.deps import Metrics, Services

router = APIRouter(tags=["operations"])

LIVEZ_PATH = "/livez"
_LIVEZ_BODY = b'{"status":"ok"}'
_LIVEZ_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(_LIVEZ_BODY)).encode()),
    ],
}


class Liveness:
    """ASGI middleware answering `GET /livez` itself, in front of the framework.

    A liveness probe asks one thing: does this process still accept and answer HTTP? Answered
    here it costs only the HTTP server's own work (no routing, dependencies, thread pool,
    metrics or key checks), so frequent probes cost next to nothing, and it is the floor that
    every route's cost is measured against (bench/registry.py). It is not in the OpenAPI
    document and not counted in the request metrics; `/healthz` stays the routed equivalent.
    """

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["path"] == LIVEZ_PATH
            and scope["method"] in ("GET", "HEAD")
        ):
            await send(_LIVEZ_START)
            await send({"type": "http.response.body", "body": _LIVEZ_BODY})
            return
        await self._app(scope, receive, send)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up and serving HTTP; it checks no dependency."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(services: Services) -> JSONResponse:
    """Ready when the database and Kafka both answer; 503 naming what does not."""
    checks = {
        "database": await run_in_threadpool(_database_answers, services.engine),
        "kafka": "ok" if await run_in_threadpool(services.topic_admin.ping) else "unreachable",
    }
    ready = all(state == "ok" for state in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )


@router.get("/metrics")
def metrics(collectors: Metrics) -> Response:
    """Prometheus metrics in the text exposition format."""
    return Response(collectors.exposition(), media_type=CONTENT_TYPE_LATEST)


def _database_answers(engine: Engine) -> str:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return f"unreachable: {type(exc).__name__}"
    return "ok"
