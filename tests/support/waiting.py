"""Polling for conditions that become true in the background."""

import time
from collections.abc import Callable


def wait_until(
    predicate: Callable[[], bool], *, timeout_s: float, what: str, interval_s: float = 0.5
) -> None:
    """Poll `predicate` until it is true; fail naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
