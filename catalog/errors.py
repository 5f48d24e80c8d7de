"""Errors of the catalog."""

from hub_core.errors import ErrorCode, TerminalError


class FeedNotFound(TerminalError):
    code = ErrorCode.FEED_NOT_FOUND

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"Feed '{topic}' not found. Create it with POST /v1/feeds, or list feeds with "
            "GET /v1/feeds."
        )


class FeedExists(TerminalError):
    code = ErrorCode.FEED_EXISTS

    def __init__(self, topic: str, *, owner: str | None = None) -> None:
        by = f", owned by team '{owner}'" if owner else ""
        super().__init__(f"Feed '{topic}' already exists{by}.")


class TableNameTaken(TerminalError):
    """A new feed whose tables would be another feed's: table names are the topic with dots as
    underscores, so two topics can name one table."""

    code = ErrorCode.TABLE_NAME_TAKEN

    def __init__(self, topic: str, *, table: str, existing: str, owner: str) -> None:
        super().__init__(
            f"Feed '{topic}' would land in table '{table}', which belongs to feed '{existing}' "
            f"(owned by team '{owner}'): table names are the topic with dots as underscores, so "
            "the two topics would share their bronze, silver and quarantine tables. Choose a "
            "topic that differs in more than '.' and '_'."
        )


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


class KeyNotFound(TerminalError):
    code = ErrorCode.KEY_NOT_FOUND

    def __init__(self, key_id: str) -> None:
        super().__init__(f"API key '{key_id}' not found.")


class IdempotencyKeyInUse(TerminalError):
    code = ErrorCode.IDEMPOTENCY_KEY_IN_USE

    def __init__(self, key: str) -> None:
        super().__init__(
            f"A request with Idempotency-Key '{key}' is still being processed; "
            "retry after it has been answered."
        )


class IdempotencyKeyReused(TerminalError):
    code = ErrorCode.IDEMPOTENCY_KEY_REUSED

    def __init__(self, key: str) -> None:
        super().__init__(
            f"Idempotency-Key '{key}' was already used for a different request; "
            "use a new key for a new request."
        )


class TopicExistsOutsideHub(TerminalError):
    code = ErrorCode.TOPIC_EXISTS_OUTSIDE_HUB

    def __init__(self, topic: str) -> None:
        super().__init__(
            f"Topic '{topic}' already exists in Kafka outside the hub (it is no feed); the hub "
            "does not adopt topics it did not create. Choose another topic, or have its owner "
            "delete it first."
        )


class LineageNotFound(TerminalError):
    code = ErrorCode.LINEAGE_NOT_FOUND

    def __init__(self, what: str) -> None:
        super().__init__(
            f"No landed table version holds {what}. The loader may not have landed it yet, or "
            "the lineage index does not see the table (HUB_API_LINEAGE_WAREHOUSE_DIR must be "
            "the loader's HUB_LOADER_WAREHOUSE_DIR); see docs/lineage.md."
        )


class InvalidLineageQuery(TerminalError):
    code = ErrorCode.INVALID_LINEAGE_QUERY

    def __init__(self, message: str) -> None:
        super().__init__(message)


class InvalidRowKey(TerminalError):
    code = ErrorCode.INVALID_ROW_KEY

    def __init__(self, message: str) -> None:
        super().__init__(message)
