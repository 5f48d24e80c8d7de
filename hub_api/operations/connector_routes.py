"""Connectors: Kafka Connect's REST verbs over the shared connector state in Kafka.

Connectors run as their own processes (`hub connect run`); these routes read what they report
and ask them to pause, resume or restart through the configs topic they follow.
"""

from typing import Any

from fastapi import APIRouter, Response, status

from catalog.types import TeamName
from connectors.control import without_traces
from hub_api.auth import Caller, Reader, authorize_connector
from hub_api.deps import Control
from hub_api.limits import CheckedBodyRoute

router = APIRouter(route_class=CheckedBodyRoute, prefix="/v1/connectors", tags=["connectors"])


@router.get("")
def list_connectors(control: Control, _reader: Reader) -> list[str]:
    """Names of every connector a `hub connect run` process has announced."""
    return control.names()


@router.get("/{name}")
def get_connector(name: str, control: Control, _reader: Reader) -> dict[str, Any]:
    """The connector's configuration (secrets masked), its type, owner team and worker, and
    the state it was asked to be in (`STARTED` or `PAUSED`)."""
    info = control.describe(name)
    return {
        "name": info.name,
        "type": info.type,
        "owner": info.owner,
        "worker_id": info.worker_id,
        "target_state": control.target_state(name),
        "config": info.config,
    }


@router.get("/{name}/status")
def connector_status(name: str, control: Control, reader: Reader) -> dict[str, Any]:
    """Kafka Connect's status shape: the connector's state and worker, and each task's.

    Failure traces and retry errors are shown to the owner team's keys and admin keys only;
    other readers get each state and a short message with the failure's code instead.
    """
    status = control.status(name)
    owner = control.describe(name).owner
    if reader is not None and reader.may_write(TeamName(owner)):
        return status
    return without_traces(status, owner=owner)


@router.get("/{name}/offsets")
def connector_offsets(name: str, control: Control, _reader: Reader) -> dict[str, Any]:
    """The source positions the connector has committed, one per source partition."""
    return {
        "offsets": [
            {"partition": o.partition, "offset": o.offset} for o in control.stored_offsets(name)
        ]
    }


@router.put("/{name}/pause", status_code=status.HTTP_202_ACCEPTED)
def pause_connector(name: str, control: Control, caller: Caller) -> Response:
    """Stop reading the source; the position is kept. Needs the owner team's or an admin key."""
    authorize_connector(control, name, caller)
    control.pause(name)
    return Response(status_code=status.HTTP_202_ACCEPTED)


@router.put("/{name}/resume", status_code=status.HTTP_202_ACCEPTED)
def resume_connector(name: str, control: Control, caller: Caller) -> Response:
    """Continue a paused connector from its position."""
    authorize_connector(control, name, caller)
    control.resume(name)
    return Response(status_code=status.HTTP_202_ACCEPTED)


@router.post("/{name}/restart", status_code=status.HTTP_202_ACCEPTED)
def restart_connector(name: str, control: Control, caller: Caller) -> Response:
    """Stop the connector's task and start it again from its committed position."""
    authorize_connector(control, name, caller)
    control.restart(name)
    return Response(status_code=status.HTTP_202_ACCEPTED)
