"""Rendering the hub's errors as HTTP answers: `{"error_code", "message"}` and a 4xx/5xx status."""

import logging
from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from hub_core.errors import ErrorCode, HubError, TerminalError

log = logging.getLogger(__name__)

# The registry's media type; Confluent clients accept it and plain JSON alike.
REGISTRY_MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryJSONResponse(JSONResponse):
    """JSON answered with the registry's media type, as Confluent's registry does."""

    media_type = REGISTRY_MEDIA_TYPE


# Paths of the Confluent registry API, whose errors carry the registry's media type too.
_REGISTRY_PATHS = ("/subjects", "/schemas", "/config", "/mode", "/compatibility")


def error_response(
    code: ErrorCode, message: str, *, media_type: str | None = None, **extra: object
) -> JSONResponse:
    """The one error body of the hub."""
    body: dict[str, object] = {"error_code": int(code), "message": message, **extra}
    headers = None
    if code.http_status == 503:
        headers = {"Retry-After": "5"}
    elif code.http_status == 401:
        headers = {"WWW-Authenticate": 'Bearer realm="hub"'}
    return JSONResponse(body, status_code=code.http_status, headers=headers, media_type=media_type)


def media_type_of(request: Request) -> str | None:
    """The media type of an error answer to `request`: the registry's on registry paths."""
    return REGISTRY_MEDIA_TYPE if request.url.path.startswith(_REGISTRY_PATHS) else None


def hub_error_response(request: Request, exc: HubError) -> JSONResponse:
    """The answer to a request that failed with `exc`; server-side failures are logged."""
    if exc.code.http_status >= 500:
        log.warning("request failed: %s (%s)", exc.message, int(exc.code))
    return error_response(exc.code, exc.message, media_type=media_type_of(request))


# A page for a failed request, or None for the JSON answer: how the console renders errors.
ErrorPages = Callable[[Request, HubError], Response | None]


def install_error_handlers(app: FastAPI, *, pages: ErrorPages | None = None) -> None:
    """Map domain exceptions and framework errors to coded answers; `pages` may answer a
    domain error with a page of its own (the console's paths) instead of JSON."""

    @app.exception_handler(HubError)
    async def _hub_error(request: Request, exc: HubError) -> Response:
        page = pages(request, exc) if pages is not None else None
        return page if page is not None else hub_error_response(request, exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
        )
        return error_response(
            ErrorCode.MALFORMED_REQUEST,
            f"Malformed request: {problems}",
            media_type=media_type_of(request),
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Unknown paths and methods keep their status, in the hub's error shape.
        return JSONResponse(
            {"error_code": exc.status_code, "message": str(exc.detail)},
            status_code=exc.status_code,
        )


class Unauthenticated(TerminalError):
    code = ErrorCode.UNAUTHENTICATED

    def __init__(self, message: str | None = None) -> None:
        super().__init__(
            message
            or "A valid API key is required: send `Authorization: Bearer <key>` (or Basic auth "
            "with the key as password). Create keys with `hub key create --team TEAM`."
        )


class Forbidden(TerminalError):
    code = ErrorCode.FORBIDDEN


class FeedSubjectTaken(TerminalError):
    """A new feed whose subject belongs to another team: the feed would make it its own."""

    code = ErrorCode.FEED_SUBJECT_TAKEN

    def __init__(self, topic: str, *, owner: str, subject: str, holder: str) -> None:
        super().__init__(
            f"Feed '{topic}' of team '{owner}' would take over subject '{subject}', which is "
            f"registered and belongs to team '{holder}' (a subject of no feed belongs to the team "
            f"named by its domain): a feed's subjects belong to the feed's team. Create the feed "
            f"with owner '{holder}', choose a topic in team '{owner}''s domain "
            f"('{owner}.<name>'), or have the subject deleted for good first."
        )


class ConfirmationMissing(TerminalError):
    code = ErrorCode.MALFORMED_REQUEST


class UnsupportedMediaType(TerminalError):
    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE


class MalformedBody(TerminalError):
    code = ErrorCode.MALFORMED_REQUEST


class TooManyRecords(TerminalError):
    code = ErrorCode.TOO_MANY_RECORDS


class RecordTextTooLarge(TerminalError):
    """One record of a streamed body is larger, as JSON text, than a record may be; it is
    answered in its place, unread (hub_api/rest_proxy/record_stream.py)."""

    code = ErrorCode.RECORD_TOO_LARGE

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"$: the record is {size} bytes of JSON; a record may be at most {limit} bytes "
            "(HUB_KAFKA_MAX_RECORD_BYTES, the most Kafka accepts), so it was not read. Make it "
            "smaller: split it, or move large content out of the record and publish a "
            "reference to it."
        )
        self.path = "$"


class BodyTooLarge(Exception):
    """The body went over the size limit while it streamed in; answered with 413."""
