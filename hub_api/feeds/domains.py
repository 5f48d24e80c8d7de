"""Where a feed may be created: a team creates feeds in its own domain, an admin anywhere but
over another team's subjects (docs/adr/0058-feeds-in-their-owner-s-domain.md).

A feed's subjects belong to the feed's team, and a subject of no feed to the team its domain
names (docs/adr/0020-subject-ownership.md). So creating a feed hands `<topic>-value` and
`<topic>-key` to its owner: a feed of team `a` on `b.planned` would take `b.planned-value`, and
its configuration and mode, from team `b`, which may have registered it ahead of its own feed.
"""

import re

from catalog.types import Principal, TeamName
from hub_api.errors import FeedSubjectTaken, Forbidden
from hub_core.naming import TopicName, key_subject, value_subject
from publish.feeds import FeedService
from registry.errors import SubjectNotFound
from registry.service import RegistryService
from registry.types import Subject

# A team name that can be the first segment of a topic (`hub_core.naming`).
_DOMAIN = re.compile(r"[a-z][a-z0-9_]*")


def domain_of(topic: TopicName) -> str:
    """The domain of a topic: its first dot-separated segment (`sales` of `sales.orders`)."""
    return topic.partition(".")[0]


def require_feed_creator(
    principal: Principal,
    *,
    topic: TopicName,
    owner: TeamName,
    feeds: FeedService,
    registry: RegistryService,
) -> None:
    """403 (40301) for a team key creating a feed outside its own domain; 409 (40925) for an
    admin creating one whose subject is registered and belongs to another team than `owner`.

    The caller may already write for `owner` (`require_owner`). A topic that is already a feed
    is left to `FeedService.create`, whose 40920 names the feed's owner.
    """
    domain = domain_of(topic)
    if domain == owner or feeds.find(topic) is not None:
        return
    if not principal.admin:
        raise Forbidden(
            f"Topic '{topic}' is in domain '{domain}': a team creates feeds in its own domain "
            f"only, so team '{owner}' creates topics '{owner}.<name>'"
            + (
                ""
                if _DOMAIN.fullmatch(owner)
                else " (its name is no topic domain: lowercase letters, digits and '_'; an "
                "admin key creates its feeds)"
            )
            + f". Choose such a topic, or ask team '{domain}' or an admin to create this feed."
        )
    for subject in (value_subject(topic), key_subject(topic)):
        try:
            registry.versions(subject=Subject(subject), include_deleted=True)
        except SubjectNotFound:
            continue
        raise FeedSubjectTaken(topic, owner=owner, subject=subject, holder=domain)
