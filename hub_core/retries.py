"""Retries by failure kind: only transient failures are tried again, with backoff, for a bound.

Whether a retry can help is in a failure's type (see `hub_core.errors`): a `HubError` whose
`retryable` is true (a `TransientError`: Kafka, a database or a source unavailable) is tried
again; anything else, terminal errors and exceptions the hub never classified, is raised at once,
since repeating a wrong request only repeats its answer. Waits grow exponentially with random
jitter, so clients that failed together do not all come back at the same moment, and retries end
after a number of attempts or a time, whichever comes first: a dependency that stays away
becomes a failure someone sees. When the failing server said when to come back (an HTTP
`Retry-After`, carried as `TransientError.retry_after_s`), the wait is at least that long, plus
jitter; a server asking for more than `Backoff.max_retry_after_s` ends the retries instead.

tenacity drives every retry (ADR 0019), through one function: `retry_transient_interruptibly`
waits with a sleep of the caller's, because connector tasks must leave a backoff wait at once when
asked to stop; `retry_transient` is the same with `time.sleep`, and logs every scheduled retry.
"""

import datetime as dt
import email.utils
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import tenacity

from hub_core.errors import HubError

T = TypeVar("T")

log = logging.getLogger(__name__)


def is_transient(error: BaseException) -> bool:
    """Whether a retry may help: the failure says so in its type (`TransientError`)."""
    return isinstance(error, HubError) and error.retryable


def retry_after_seconds(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """An HTTP `Retry-After` value (delta-seconds or an HTTP date) in seconds; None if unusable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - (now or dt.datetime.now(dt.UTC))).total_seconds())


@dataclass(frozen=True, slots=True)
class Backoff:
    """Jittered exponential backoff, bounded in attempts and in time.

    The n-th wait is `min(max_s, initial_s * 2**(n-1) + uniform(0, jitter_s))`; retries end after
    `attempts` attempts in all or once `timeout_s` has passed since the first, whichever comes
    first (None: no bound of that kind; one of them is required).
    """

    initial_s: float = 0.5
    max_s: float = 10.0
    jitter_s: float = 1.0
    attempts: int | None = 5
    timeout_s: float | None = 60.0
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.attempts is None and self.timeout_s is None:
            raise ValueError("a Backoff needs `attempts`, `timeout_s` or both: retries are bounded")

    def should_retry(self, error: BaseException) -> bool | float:
        """False for failures a retry cannot fix; for a transient one, True (the exponential
        wait) or, when its server named a wait, that wait plus jitter."""
        if not is_transient(error):
            return False
        hint = getattr(error, "retry_after_s", None)
        if hint is None:
            return True
        if hint > self.max_retry_after_s:
            return False  # waiting that long is the caller's decision, not a retry's
        return float(hint) + random.uniform(0, self.jitter_s)


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A transient failure about to be retried: what failed, and when the next attempt is."""

    attempt: int  # attempts made so far, the failed one included
    wait_s: float  # until the next attempt
    elapsed_s: float  # since the first attempt started
    error: BaseException


def retry_transient(action: Callable[[], T], *, backoff: Backoff) -> T:
    """`action()`, tried again after transient failures as `backoff` says; the last one raises.
    Each retry is logged as a warning before its wait: what failed, and when it is tried again."""
    return retry_transient_interruptibly(
        action, backoff=backoff, sleep=time.sleep, on_retry=_log_retry
    )


def _log_retry(notice: RetryNotice) -> None:
    log.warning(
        "attempt %d failed after %.1fs, retrying in %.1fs: %s",
        notice.attempt, notice.elapsed_s, notice.wait_s, notice.error,
    )  # fmt: skip


def retry_transient_interruptibly(
    action: Callable[[], T],
    *,
    backoff: Backoff,
    sleep: Callable[[float], None],
    on_retry: Callable[[RetryNotice], None] | None = None,
    also: Callable[[BaseException], bool] | None = None,
) -> T:
    """`action()`, tried again after transient failures as `backoff` says (the last one raises),
    waiting with `sleep(seconds)`, which may raise to end it (as a task asked to stop does).
    `on_retry` hears of each retry before its wait; `also`, when given, must hold too for a
    transient failure to be retried."""

    def retryable(error: BaseException) -> bool:
        return backoff.should_retry(error) is not False and (also is None or also(error))

    def wait(state: tenacity.RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome is not None else None
        named = backoff.should_retry(error) if error is not None else True
        if isinstance(named, float):
            return named
        return exponential(state)

    def notify(state: tenacity.RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            error = state.outcome.exception()
            assert error is not None
            on_retry(
                RetryNotice(
                    attempt=state.attempt_number,
                    wait_s=state.upcoming_sleep,
                    elapsed_s=state.seconds_since_start or 0.0,
                    error=error,
                )
            )

    exponential = tenacity.wait_exponential_jitter(
        multiplier=backoff.initial_s, max=backoff.max_s, jitter=backoff.jitter_s
    )
    stops: list[tenacity.stop.stop_base] = []
    if backoff.attempts is not None:
        stops.append(tenacity.stop_after_attempt(backoff.attempts))
    if backoff.timeout_s is not None:
        stops.append(tenacity.stop_after_delay(backoff.timeout_s))
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(retryable),
        stop=tenacity.stop_any(*stops),
        wait=wait,
        sleep=sleep,
        before_sleep=notify,
        reraise=True,
    )
    return retrying(action)
