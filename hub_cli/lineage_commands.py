"""`hub lineage row` and `hub lineage position`: ask the API where a row came from, and which
table versions hold a source position (docs/lineage.md)."""

import json
from typing import Annotated, Any

import httpx
import typer

from hub_cli.errors import LineageRequestFailed
from hub_core.errors import ErrorCode

lineage_app = typer.Typer(
    help="Trace records: a table row to its source, a source position to its table versions.",
    no_args_is_help=True,
)

ApiOption = Annotated[
    str, typer.Option("--api", envvar="HUB_API_URL", help="Base URL of the hub's API.")
]
KeyOption = Annotated[
    str | None, typer.Option("--key", envvar="HUB_API_KEY", help="API key of the feed's team.")
]


@lineage_app.command("row")
def row(
    table: Annotated[
        str,
        typer.Argument(
            help="bronze.<topic with underscores>, silver.<...>_current/_history, "
            "gold.dim_<name> or gold.fact_<name>."
        ),
    ],
    partition: Annotated[
        int | None, typer.Argument(min=0, help="A bronze row's _hub_partition.")
    ] = None,
    offset: Annotated[int | None, typer.Argument(min=0, help="A bronze row's _hub_offset.")] = None,
    row_key: Annotated[
        str | None,
        typer.Option(
            "--row-key",
            help="A silver or gold row's key: id=42, a=1,b=x, or JSON '{\"id\": 42}'.",
        ),
    ] = None,
    api: ApiOption = "http://127.0.0.1:8080",
    key: KeyOption = None,
) -> None:
    """Where a row came from (a bronze row by its partition and offset, a silver or gold row by
    its key), and every silver and gold version that read it."""
    query = {"table": table, "partition": partition, "offset": offset, "key": row_key}
    _show(_get(api, key, "/v1/lineage/rows", query))


@lineage_app.command("position")
def position(
    lsn: Annotated[int | None, typer.Option(min=0, help="A source LSN (CDC).")] = None,
    request_id: Annotated[
        str | None, typer.Option("--request-id", help="A publish request's X-Request-Id.")
    ] = None,
    topic: Annotated[
        str | None, typer.Option(help="A topic, with --partition and --offset.")
    ] = None,
    partition: Annotated[int | None, typer.Option(min=0)] = None,
    offset: Annotated[int | None, typer.Option(min=0)] = None,
    api: ApiOption = "http://127.0.0.1:8080",
    key: KeyOption = None,
) -> None:
    """Every table version (bronze, silver, gold) holding a source position."""
    query = {"lsn": lsn, "request_id": request_id, "topic": topic}
    _show(
        _get(api, key, "/v1/lineage/positions", {**query, "partition": partition, "offset": offset})
    )


def _get(api: str, key: str | None, path: str, params: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    query = {name: value for name, value in params.items() if value is not None}
    try:
        response = httpx.get(f"{api.rstrip('/')}{path}", params=query, headers=headers, timeout=30)
    except httpx.TransportError as exc:
        raise LineageRequestFailed(f"The API at {api} did not answer: {exc}") from exc
    try:
        body: dict[str, Any] = response.json()
    except ValueError:
        body = {"message": response.text[:500]}
    if response.status_code != 200:
        code: int = body.get("error_code", 0)
        raise LineageRequestFailed(
            str(body.get("message", response.text[:500])),
            code=ErrorCode(code) if code in ErrorCode._value2member_map_ else None,
        )
    return body


def _show(body: dict[str, Any]) -> None:
    typer.echo(json.dumps(body, indent=2))
