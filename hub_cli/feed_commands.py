"""`hub feed grant|revoke|restrict|open`: who reads a feed's records, tables and lineage.

Each command asks the feeds API with a key of the feed's team (or an admin key) and prints the
feed's read policy as the API answers it (docs/security.md, "Read grants").
"""

from typing import Annotated, Any
from urllib.parse import quote

import typer

from hub_cli.api_requests import ApiOption, KeyOption, request

feed_app = typer.Typer(
    help="Feeds: who may read them (read grants).",
    no_args_is_help=True,
)

Topic = Annotated[str, typer.Argument(help="The feed (topic), e.g. sales.orders.")]
Team = Annotated[str, typer.Argument(help="The team to grant or revoke reads.")]


@feed_app.command("grant")
def grant(
    topic: Topic, team: Team, api: ApiOption = "http://127.0.0.1:8080", key: KeyOption = None
) -> None:
    """Let TEAM read the feed's records, tables and lineage while the feed is restricted."""
    _show(request("PUT", api, key, f"/v1/feeds/{_part(topic)}/readers/{_part(team)}"))


@feed_app.command("revoke")
def revoke(
    topic: Topic, team: Team, api: ApiOption = "http://127.0.0.1:8080", key: KeyOption = None
) -> None:
    """Take back TEAM's reads of the feed (its owner and admins always read it)."""
    _show(request("DELETE", api, key, f"/v1/feeds/{_part(topic)}/readers/{_part(team)}"))


@feed_app.command("restrict")
def restrict(topic: Topic, api: ApiOption = "http://127.0.0.1:8080", key: KeyOption = None) -> None:
    """Let only the feed's owner, the teams it granted and admins read it."""
    _show(request("PATCH", api, key, f"/v1/feeds/{_part(topic)}", body={"read_public": False}))


@feed_app.command("open")
def open_reads(
    topic: Topic, api: ApiOption = "http://127.0.0.1:8080", key: KeyOption = None
) -> None:
    """Let every team read the feed again."""
    _show(request("PATCH", api, key, f"/v1/feeds/{_part(topic)}", body={"read_public": True}))


def _part(name: str) -> str:
    """`name` as one path segment: a slash in it cannot reach another route."""
    return quote(name, safe="")


def _show(feed: dict[str, Any]) -> None:
    readers = ", ".join(feed.get("readers", [])) or "none"
    if feed.get("read_public", True):
        typer.echo(
            f"{feed['topic']}: every team reads it (teams granted for when it is not: {readers})"
        )
    else:
        typer.echo(f"{feed['topic']}: read by team {feed['owner']}, admins and: {readers}")
