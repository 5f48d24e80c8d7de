"""Retries by failure kind: what is retried, how long the waits are, and when retries end."""

import datetime as dt
import logging

import pytest

from hub_core.errors import ErrorCode, StoreUnavailable, TerminalError, TransientError
from hub_core.retries import (
    Backoff,
    RetryNotice,
    is_transient,
    retry_after_seconds,
    retry_transient,
    retry_transient_interruptibly,
)
from hub_kafka.errors import KafkaUnavailable

pytestmark = pytest.mark.unit

# No real waiting in these tests: the first wait is a millisecond, and none is longer.
QUICK = Backoff(initial_s=0.001, max_s=0.001, jitter_s=0.0, attempts=4, timeout_s=30.0)


class Flaky:
    """Fails with each of `failures` in turn, then answers `"done"`; counts its calls."""

    def __init__(self, *failures: BaseException) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def test_failures_whose_type_says_a_retry_can_help_are_the_transient_ones() -> None:
    assert is_transient(KafkaUnavailable("Kafka is away"))
    assert is_transient(StoreUnavailable("the database is away"))
    assert not is_transient(TerminalError("a wrong request"))
    assert not is_transient(ValueError("never classified"))


def test_transient_failures_are_retried_until_the_action_succeeds() -> None:
    action = Flaky(KafkaUnavailable("away"), StoreUnavailable("away"))

    assert retry_transient(action, backoff=QUICK) == "done"
    assert action.calls == 3


@pytest.mark.parametrize("failure", [TerminalError("wrong"), ValueError("unclassified")])
def test_terminal_and_unclassified_failures_are_raised_at_once(failure: Exception) -> None:
    action = Flaky(failure)

    with pytest.raises(type(failure)):
        retry_transient(action, backoff=QUICK)
    with pytest.raises(type(failure)):
        retry_transient_interruptibly(Flaky(failure), backoff=QUICK, sleep=lambda _: None)
    assert action.calls == 1


def test_retries_end_after_the_bounded_number_of_attempts_with_the_last_failure() -> None:
    action = Flaky(*(KafkaUnavailable(f"away {n}") for n in range(1, 10)))

    with pytest.raises(KafkaUnavailable, match="away 4"):
        retry_transient(action, backoff=QUICK)
    assert action.calls == QUICK.attempts


def test_retries_end_once_the_time_bound_has_passed() -> None:
    action = Flaky(*(KafkaUnavailable("away") for _ in range(100)))
    backoff = Backoff(initial_s=0.05, max_s=0.05, jitter_s=0.0, attempts=None, timeout_s=0.2)

    with pytest.raises(KafkaUnavailable):
        retry_transient(action, backoff=backoff)
    assert 2 <= action.calls < 10


def test_a_backoff_without_any_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="bounded"):
        Backoff(attempts=None, timeout_s=None)


def test_waits_grow_exponentially_with_jitter_up_to_the_longest_wait() -> None:
    backoff = Backoff(initial_s=1.0, max_s=5.0, jitter_s=0.5, attempts=6, timeout_s=None)
    waits: list[float] = []
    notices: list[RetryNotice] = []

    result = retry_transient_interruptibly(
        Flaky(*(KafkaUnavailable("away") for _ in range(5))),
        backoff=backoff,
        sleep=waits.append,
        on_retry=notices.append,
    )

    assert result == "done"
    assert len(waits) == 5
    for n, wait in enumerate(waits, start=1):
        floor = min(5.0, 2 ** (n - 1))
        assert floor <= wait <= min(5.0, floor + 0.5)
    assert [n.attempt for n in notices] == [1, 2, 3, 4, 5]
    assert [n.wait_s for n in notices] == waits
    assert all(isinstance(n.error, KafkaUnavailable) for n in notices)


def test_a_wait_that_raises_ends_the_retries() -> None:
    class Interrupted(Exception):
        pass

    def interrupted(_: float) -> None:
        raise Interrupted()

    action = Flaky(KafkaUnavailable("away"))
    with pytest.raises(Interrupted):
        retry_transient_interruptibly(action, backoff=QUICK, sleep=interrupted)
    assert action.calls == 1


def test_a_caller_condition_can_refuse_a_retry_of_a_transient_failure() -> None:
    action = Flaky(KafkaUnavailable("away"))

    with pytest.raises(KafkaUnavailable):
        retry_transient_interruptibly(
            action, backoff=QUICK, sleep=lambda _: None, also=lambda _: False
        )
    assert action.calls == 1


def test_a_servers_retry_after_is_waited_out_plus_jitter_and_never_shortened() -> None:
    backoff = Backoff(initial_s=0.5, max_s=2.0, jitter_s=1.0, max_retry_after_s=60.0)
    asked = TransientError("busy", code=ErrorCode.KAFKA_UNAVAILABLE, retry_after_s=30.0)

    for _ in range(50):
        wait = backoff.should_retry(asked)
        assert isinstance(wait, float)
        assert 30.0 <= wait <= 31.0  # beyond `max_s`: the server's word wins
    assert backoff.should_retry(TransientError("busy")) is True
    assert backoff.should_retry(TerminalError("wrong")) is False


def test_a_retry_after_beyond_the_bound_ends_the_retries_instead_of_waiting() -> None:
    backoff = Backoff(max_retry_after_s=60.0)
    action = Flaky(TransientError("come back in an hour", retry_after_s=3600.0))

    assert backoff.should_retry(TransientError("later", retry_after_s=3600.0)) is False
    with pytest.raises(TransientError, match="an hour"):
        retry_transient(action, backoff=backoff)
    assert action.calls == 1


def test_the_interruptible_driver_waits_what_the_server_asked_too() -> None:
    waits: list[float] = []
    backoff = Backoff(initial_s=0.001, max_s=0.001, jitter_s=0.0, attempts=3)

    retry_transient_interruptibly(
        Flaky(TransientError("busy", retry_after_s=7.0)), backoff=backoff, sleep=waits.append
    )

    assert waits == [7.0]


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("5", 5.0),
        (" 120 ", 120.0),
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past: come back now
        (None, None),
        ("", None),
        ("soon", None),
        ("-3", None),
    ],
)
def test_retry_after_is_read_as_seconds_or_as_an_http_date(
    header: str | None, seconds: float | None
) -> None:
    now = dt.datetime(2015, 10, 21, 7, 28, 0, tzinfo=dt.UTC)
    assert retry_after_seconds(header, now=now) == seconds


def test_each_blocking_retry_is_logged_with_its_failure_and_its_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="hub_core.retries"):
        retry_transient(Flaky(KafkaUnavailable("Kafka is away")), backoff=QUICK)

    (record,) = caplog.records
    assert "Kafka is away" in record.getMessage()
    assert "retrying in 0.0s" in record.getMessage()
