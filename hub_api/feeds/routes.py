"""Feeds: team-owned topics with a kind and a schema."""

from typing import Annotated

from fastapi import APIRouter, Query, status

from catalog.types import TeamName
from hub_api.auth import Caller, Reader, require_owner
from hub_api.deps import Feeds, Loader, Registry
from hub_api.errors import ConfirmationMissing
from hub_api.feeds.domains import require_feed_creator
from hub_api.feeds.models import (
    ErrorPublic,
    FeedCreate,
    FeedDetailPublic,
    FeedPatch,
    FeedPublic,
    FeedReadersPublic,
)
from hub_api.limits import CheckedBodyRoute
from hub_api.loader_client import ReplayPublic, replay_result
from hub_core.naming import feed_topic_name
from publish.feeds import FeedSpec

router = APIRouter(route_class=CheckedBodyRoute, prefix="/v1/feeds", tags=["feeds"])


@router.post("", response_model=FeedPublic, status_code=status.HTTP_201_CREATED)
def create_feed(body: FeedCreate, feeds: Feeds, registry: Registry, caller: Caller) -> FeedPublic:
    """Create a feed: its Kafka topic (and `<topic>.dlq`) and its schemas.

    A team key creates feeds of its team in its domain (`<team>.<name>`); an admin key creates
    them anywhere, but not over a registered subject of another team (409, code 40925).
    """
    owner = TeamName(body.owner)
    require_owner(caller, owner, what=f"A feed of team '{owner}'")
    topic = feed_topic_name(body.topic)  # 40001 or 42227 before anything is looked up
    require_feed_creator(caller, topic=topic, owner=owner, feeds=feeds, registry=registry)
    feed = feeds.create(
        FeedSpec(
            topic=topic,
            owner=owner,
            kind=body.kind,
            value_schema=str(body.value_schema),
            partitions=body.partitions,
            key_fields=tuple(body.key_fields),
            retention_ms=body.retention_ms,
            description=body.description,
            read_public=body.read_public,
            readers=tuple(TeamName(team) for team in dict.fromkeys(body.readers)),
        )
    )
    return FeedPublic.of(feed)


@router.get("", response_model=list[FeedPublic])
def list_feeds(
    feeds: Feeds, _reader: Reader, owner: Annotated[str | None, Query()] = None
) -> list[FeedPublic]:
    """Every feed, or those of one team."""
    return [FeedPublic.of(f) for f in feeds.list(owner=TeamName(owner) if owner else None)]


@router.get("/{topic}", response_model=FeedDetailPublic)
def get_feed(topic: str, feeds: Feeds, _reader: Reader) -> FeedDetailPublic:
    """A feed with its schema versions, partitions and end offsets."""
    return FeedDetailPublic.of_detail(feeds.describe(topic))


@router.patch("/{topic}", response_model=FeedPublic)
def update_feed(topic: str, body: FeedPatch, feeds: Feeds, caller: Caller) -> FeedPublic:
    """Change a feed's description, retention or read policy (`read_public`)."""
    require_owner(caller, feeds.get(topic).owner, what=f"Feed '{topic}'")
    return FeedPublic.of(
        feeds.update(
            topic,
            description=body.description,
            retention_ms=body.retention_ms,
            read_public=body.read_public,
        )
    )


@router.get("/{topic}/readers", response_model=FeedReadersPublic)
def feed_readers(topic: str, feeds: Feeds, _reader: Reader) -> FeedReadersPublic:
    """Who reads the feed's records and tables: every team, or its owner and `readers` (admins
    always). From the catalog alone; the analysts' server asks it for read grants on tables.

    404 for an unknown feed (40420).
    """
    return FeedReadersPublic.of(feeds.get(topic))


@router.put("/{topic}/readers/{team}", response_model=FeedPublic)
def grant_reads(topic: str, team: str, feeds: Feeds, caller: Caller) -> FeedPublic:
    """Let `team` read the feed's records, tables and lineage while the feed is not public.

    Owner or admin only (403, 40301); 404 for an unknown feed (40420) or team (40421).
    """
    require_owner(caller, feeds.get(topic).owner, what=f"Feed '{topic}'")
    return FeedPublic.of(feeds.grant(topic, TeamName(team)))


@router.delete("/{topic}/readers/{team}", response_model=FeedPublic)
def revoke_reads(topic: str, team: str, feeds: Feeds, caller: Caller) -> FeedPublic:
    """Take back `team`'s reads of the feed; its owner and admins always read it."""
    require_owner(caller, feeds.get(topic).owner, what=f"Feed '{topic}'")
    return FeedPublic.of(feeds.revoke(topic, TeamName(team)))


@router.delete("/{topic}", response_model=FeedPublic)
def delete_feed(
    topic: str,
    feeds: Feeds,
    caller: Caller,
    confirm: Annotated[str | None, Query(description="Must repeat the topic name.")] = None,
) -> FeedPublic:
    """Delete a feed and its topics (its records are gone); `confirm` must repeat the topic."""
    feed_topic_name(topic)  # a `.dlq` or internal topic is never a feed's to delete: 42227
    require_owner(caller, feeds.get(topic).owner, what=f"Feed '{topic}'")
    if confirm != topic:
        raise ConfirmationMissing(
            f"Deleting feed '{topic}' deletes its records. Repeat its name to confirm: "
            f"DELETE /v1/feeds/{topic}?confirm={topic}"
        )
    return FeedPublic.of(feeds.delete(topic))


@router.post(
    "/{topic}/replay",
    response_model=ReplayPublic,
    responses={
        401: {"model": ErrorPublic, "description": "No valid API key (40101)."},
        403: {"model": ErrorPublic, "description": "Another team's feed (40301)."},
        404: {
            "model": ErrorPublic,
            "description": "No such feed (40420), or nothing of it quarantined (40450).",
        },
        503: {
            "model": ErrorPublic,
            "description": "No loader configured (50350), or it did "
            "not answer (50351); see `Retry-After`.",
        },
    },
)
def replay_feed(topic: str, feeds: Feeds, caller: Caller, loader: Loader) -> ReplayPublic:
    """Replay the feed's quarantine in the loader, as `hub load replay TOPIC` does: records
    that decode now land in bronze exactly once; the others stay with their new reason.

    Owner or admin only. 503 (code 50350) when this API knows no loader, 50351 when the
    loader does not answer; 404 (40450) when nothing of the feed was quarantined.
    """
    require_owner(caller, feeds.get(topic).owner, what=f"Feed '{topic}'")
    return ReplayPublic.model_validate(replay_result(loader, topic))
