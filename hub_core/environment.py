"""The environment of a child process: the parent's, minus the hub secrets it does not need.

A process reads its settings from `HUB_*` variables, and a child inherits every variable of its
parent: without care, the Kafka broker's JVM would hold the registry database's password and the
loader an admin key it never uses. Each child names the secrets it needs; every other variable
that looks like a hub secret is left out. Variables outside `HUB_*` (PATH, JAVA_HOME, the cloud
credentials a loader's `s3a://` tables need) pass through unchanged.
"""

import os
import re
from collections.abc import Collection, Mapping

# Names of hub settings that hold a secret: keys, passwords, tokens, and URLs that carry
# credentials (the registry database URL, the metastore's JDBC URL).
_SECRET_NAME = re.compile(
    r"^HUB_\w*(KEY|KEYS|PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIALS?|DATABASE_URL|METASTORE_URL)$"
)


def is_secret(name: str) -> bool:
    """Whether the environment variable `name` holds a hub secret."""
    return bool(_SECRET_NAME.match(name))


def child_environment(
    *,
    needs: Collection[str] = (),
    extra: Mapping[str, str] | None = None,
    parent: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """`parent` (default: this process's environment) without the hub secrets not in `needs`,
    plus `extra` (which may hold secrets: the caller gives them on purpose)."""
    source = os.environ if parent is None else parent
    kept = {name: value for name, value in source.items() if not is_secret(name) or name in needs}
    return {**kept, **(extra or {})}
