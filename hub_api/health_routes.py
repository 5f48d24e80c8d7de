"""Liveness for orchestrators and load balancers."""

from fastapi import APIRouter

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is up and serving HTTP; it checks no dependency."""
    return {"status": "ok"}
