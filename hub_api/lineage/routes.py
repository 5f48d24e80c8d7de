"""The lineage API: from a table row (bronze by position, silver and gold by key) to its
source, and from a source position to every table version that holds it (docs/lineage.md,
ADR 0038)."""

from typing import Annotated

from fastapi import APIRouter, Query

from catalog.errors import InvalidLineageQuery
from hub_api.auth import Caller
from hub_api.deps import Lineage
from hub_api.lineage_models import PositionsPublic, RowLineagePublic

router = APIRouter(prefix="/v1/lineage", tags=["lineage"])

_INT32 = 2**31 - 1
_INT64 = 2**63 - 1


@router.get("/rows", response_model=RowLineagePublic)
def row_lineage(
    lineage: Lineage,
    caller: Caller,
    table: Annotated[
        str,
        Query(
            max_length=300,
            description="A bronze table `bronze.<t>` (with `partition` and `offset`), or a "
            "silver table `silver.<t>_current` or `silver.<t>_history`, or a gold table "
            "`gold.dim_<name>` or `gold.fact_<name>` (with `key`).",
        ),
    ],
    partition: Annotated[
        int | None, Query(ge=0, le=_INT32, description="The row's `_hub_partition`.")
    ] = None,
    offset: Annotated[
        int | None, Query(ge=0, le=_INT64, description="The row's `_hub_offset`.")
    ] = None,
    key: Annotated[
        str | None,
        Query(
            max_length=1024,
            description="A silver or gold row's key: `id=42`, `a=1,b=x`, or a JSON object.",
        ),
    ] = None,
) -> RowLineagePublic:
    """Where a row came from: its Kafka position, the publish request id or source LSN and
    transaction id, its schema id, the bronze version that landed it, and every silver and gold
    version that read that version. A bronze row is named by its `partition` and `offset`, a
    silver or gold row by its `key` (found by the loader: 503 50350 when the API knows none;
    422 42281 for a column the table lacks or a value of the wrong type). A team asks about its
    own feeds; 404 (40460) when no landed version holds the row."""
    if key is not None and partition is None and offset is None:
        return lineage.row_by_key(caller, table=table, key=key)
    if key is not None or partition is None or offset is None:
        raise InvalidLineageQuery(
            "Give a bronze row's partition= and offset= together, or a silver or gold row's "
            "key=, not both."
        )
    return lineage.row(caller, table=table, partition=partition, offset=offset)


@router.get("/positions", response_model=PositionsPublic)
def position_lineage(
    lineage: Lineage,
    caller: Caller,
    lsn: Annotated[int | None, Query(ge=0, le=_INT64, description="A source LSN (CDC).")] = None,
    request_id: Annotated[
        str | None, Query(max_length=64, description="A publish request's `X-Request-Id`.")
    ] = None,
    topic: Annotated[str | None, Query(max_length=249)] = None,
    partition: Annotated[int | None, Query(ge=0, le=_INT32)] = None,
    offset: Annotated[int | None, Query(ge=0, le=_INT64)] = None,
) -> PositionsPublic:
    """Every table version (bronze, silver, gold) holding a source LSN, the records of a
    publish request, or a Kafka offset (`topic`, `partition` and `offset` together). Give
    exactly one kind (else 422, 42280); 404 (40460) when no landed version holds it."""
    return lineage.positions(
        caller,
        lsn=lsn,
        request_id=request_id,
        topic=topic,
        partition=partition,
        offset=offset,
    )
