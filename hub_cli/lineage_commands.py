"""`hub lineage row` and `hub lineage position`: ask the API where a row came from, and which
table versions hold a source position (docs/lineage.md)."""

import json
from typing import Annotated, Any

import typer

from hub_cli.api_requests import ApiOption, KeyOption, request

lineage_app = typer.Typer(
    help="Trace records: a table row to its source, a source position to its table versions.",
    no_args_is_help=True,
)


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
    return request("GET", api, key, path, params=params)


def _show(body: dict[str, Any]) -> None:
    typer.echo(json.dumps(body, indent=2))
