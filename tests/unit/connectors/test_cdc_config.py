"""The `postgres-cdc` source block: defaults, and problems named with their fix."""

import pytest
from pydantic import ValidationError

from connectors.postgres.config import PostgresCdcSource

pytestmark = pytest.mark.unit


def test_defaults() -> None:
    source = PostgresCdcSource.model_validate(
        {"dsn": "postgresql://hub@db/shop", "tables": ["public.orders"]}
    )
    assert (source.slot, source.publication, source.snapshot_mode) == (
        "hub_cdc",
        "hub_cdc",
        "initial",
    )
    assert source.create_slot and source.create_publication
    assert source.snapshot_processes == 1  # one process unless asked for more
    assert "hub@db" not in repr(source)  # the DSN is a secret


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ({"tables": ["orders"]}, "schema.table"),
        ({"tables": ["public.a", "public.a"]}, "twice"),
        ({"slot": "Bad-Slot"}, "not a valid slot/publication name"),
        ({"snapshot_mode": "always"}, "initial"),
        ({"heartbeat_seconds": 0}, "greater than 0"),
        ({"snapshot_processes": 0}, "greater than or equal to 1"),
        ({"unknown": 1}, "Extra inputs are not permitted"),
    ],
)
def test_problems_are_named(override: dict[str, object], message: str) -> None:
    config = {"dsn": "postgresql://hub@db/shop", "tables": ["public.orders"], **override}
    with pytest.raises(ValidationError, match=message):
        PostgresCdcSource.model_validate(config)
