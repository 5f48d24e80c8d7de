"""Liveness, readiness and metrics for orchestrators, load balancers and Prometheus."""

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from hub_api.metrics import HubMetrics
from hub_kafka.admin import TopicAdmin

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up and serving HTTP; it checks no dependency."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> JSONResponse:
    """Ready when the database and Kafka both answer; 503 naming what does not."""
    engine: Engine = request.app.state.engine
    admin: TopicAdmin = request.app.state.topic_admin
    checks = {
        "database": await run_in_threadpool(_database_answers, engine),
        "kafka": "ok" if await run_in_threadpool(admin.ping) else "unreachable",
    }
    ready = all(state == "ok" for state in checks.values())
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status_code=200 if ready else 503,
    )


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Prometheus metrics in the text exposition format."""
    collectors: HubMetrics = request.app.state.metrics
    return Response(generate_latest(collectors.registry), media_type=CONTENT_TYPE_LATEST)


def _database_answers(engine: Engine) -> str:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        return f"unreachable: {type(exc).__name__}"
    return "ok"
