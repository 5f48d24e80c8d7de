"""The hub's catalog: feeds (topics with an owner, a kind and a schema), teams and API keys.

Above the registry, below the central log: it knows who owns what, not how records move.
"""

from catalog.feeds import FeedStore
from catalog.teams import TeamStore
from catalog.types import ApiKey, Feed, FeedKind, Principal, Team, TeamName

__all__ = ["ApiKey", "Feed", "FeedKind", "FeedStore", "Principal", "Team", "TeamName", "TeamStore"]
