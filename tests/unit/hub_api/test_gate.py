"""Rate limits per API key: a token bucket per key, each key on its own."""

import pytest

from hub_api.gate import TokenBuckets

pytestmark = pytest.mark.unit


def test_a_key_gets_its_burst_then_waits_for_its_rate() -> None:
    buckets = TokenBuckets(rate=0.001, burst=3)

    waits = [buckets.take("key-a") for _ in range(4)]

    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] > 0  # seconds until the key has a request again


def test_one_key_over_its_rate_leaves_other_keys_their_burst() -> None:
    buckets = TokenBuckets(rate=0.001, burst=2)
    for _ in range(5):
        buckets.take("hasty")

    assert buckets.take("calm") == 0.0
    assert buckets.take("calm") == 0.0
