"""One request of the command line to the hub's API, its refusals turned into `ApiRequestFailed`.

Shared by the commands that only ask the API (`hub lineage`, `hub feed`): the API checks the key
and the rights, and its coded answer is what the command reports.
"""

from typing import Annotated, Any

import httpx
import typer

from hub_cli.errors import ApiRequestFailed
from hub_core.errors import ErrorCode

ApiOption = Annotated[
    str, typer.Option("--api", envvar="HUB_API_URL", help="Base URL of the hub's API.")
]
KeyOption = Annotated[
    str | None, typer.Option("--key", envvar="HUB_API_KEY", help="API key of the feed's team.")
]


def request(
    method: str,
    api: str,
    key: str | None,
    path: str,
    *,
    params: dict[str, Any] | None = None,
    body: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The API's JSON answer to `method path`; `ApiRequestFailed` with its code unless 2xx."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    query = {name: value for name, value in (params or {}).items() if value is not None}
    try:
        response = httpx.request(
            method,
            f"{api.rstrip('/')}{path}",
            params=query,
            json=body,
            headers=headers,
            timeout=30,
        )
    except httpx.TransportError as exc:
        raise ApiRequestFailed(f"The API at {api} did not answer: {exc}") from exc
    try:
        answer: dict[str, Any] = response.json()
    except ValueError:
        answer = {"message": response.text[:500]}
    if not response.is_success:
        code: int = answer.get("error_code", 0)
        raise ApiRequestFailed(
            str(answer.get("message", response.text[:500])),
            code=ErrorCode(code) if code in ErrorCode._value2member_map_ else None,
        )
    return answer
