"""Errors of the catalog."""

from registry.errors import ErrorCode, TerminalError


class FeedNotFound(TerminalError):
    code = ErrorCode.FEED_NOT_FOUND

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"Feed '{topic}' not found. Create it with POST /v1/feeds, or list feeds with "
            "GET /v1/feeds."
        )


class FeedExists(TerminalError):
    code = ErrorCode.FEED_EXISTS

    def __init__(self, topic: str) -> None:
        super().__init__(f"Feed '{topic}' already exists.")


class TeamNotFound(TerminalError):
    code = ErrorCode.TEAM_NOT_FOUND

    def __init__(self, team: str) -> None:
        super().__init__(f"Team '{team}' not found; create it with `hub team create {team}`.")


class TeamExists(TerminalError):
    code = ErrorCode.TEAM_EXISTS

    def __init__(self, team: str) -> None:
        super().__init__(f"Team '{team}' already exists.")


class InvalidFeed(TerminalError):
    code = ErrorCode.INVALID_FEED
