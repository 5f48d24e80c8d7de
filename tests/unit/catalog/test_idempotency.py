"""Stored answers of publish requests: one per (scope, key), replayed to the same request only."""

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, func, select, update
from sqlalchemy.orm import Session

from catalog.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from catalog.idempotency import DEFAULT_TTL, IdempotencyStore, StoredAnswer
from catalog.tables import IdempotencyRow
from hub_core.errors import ErrorCode

pytestmark = pytest.mark.unit

SCOPE = "sales.orders|key-1"
BODY = "a" * 64  # the request's SHA-256, as hex


@pytest.fixture
def store(hub_engine: Engine) -> IdempotencyStore:
    return IdempotencyStore(hub_engine)


def test_the_first_request_claims_the_key_and_its_answer_is_given_to_retries(
    store: IdempotencyStore,
) -> None:
    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) is None
    store.complete(scope=SCOPE, key="k1", status_code=207, body='{"accepted": 1}')

    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) == StoredAnswer(
        status_code=207, body='{"accepted": 1}'
    )


def test_a_key_sent_again_with_another_request_is_refused(store: IdempotencyStore) -> None:
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.complete(scope=SCOPE, key="k1", status_code=200, body="{}")

    with pytest.raises(IdempotencyKeyReused) as reused:
        store.begin(scope=SCOPE, key="k1", request_sha256="b" * 64)

    assert reused.value.code is ErrorCode.IDEMPOTENCY_KEY_REUSED
    assert "'k1'" in reused.value.message
    assert "new key" in reused.value.message


def test_a_retry_while_the_first_request_still_runs_is_told_to_wait(
    store: IdempotencyStore,
) -> None:
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)

    with pytest.raises(IdempotencyKeyInUse) as busy:
        store.begin(scope=SCOPE, key="k1", request_sha256=BODY)

    assert busy.value.code is ErrorCode.IDEMPOTENCY_KEY_IN_USE
    assert busy.value.code.http_status == 409


def test_a_key_left_in_progress_by_a_crashed_request_is_taken_over_once_stale(
    hub_engine: Engine,
) -> None:
    store = IdempotencyStore(hub_engine, stale_after=timedelta(0))
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)

    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) is None


def test_an_abandoned_key_lets_a_retry_run_again(store: IdempotencyStore) -> None:
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.abandon(scope=SCOPE, key="k1")

    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) is None


def test_abandoning_never_forgets_an_answer_already_given(store: IdempotencyStore) -> None:
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.complete(scope=SCOPE, key="k1", status_code=200, body="{}")
    store.abandon(scope=SCOPE, key="k1")

    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) == StoredAnswer(200, "{}")


def test_the_same_key_in_two_scopes_is_two_requests(store: IdempotencyStore) -> None:
    store.begin(scope="sales.orders|key-1", key="k1", request_sha256=BODY)
    store.complete(scope="sales.orders|key-1", key="k1", status_code=200, body="{}")

    assert store.begin(scope="sales.orders|key-2", key="k1", request_sha256="c" * 64) is None


def _claimed_ago(engine: Engine, age: timedelta, *, key: str | None = None) -> None:
    """Backdate the claims (of one key, or all) as if they were made `age` ago."""
    statement = update(IdempotencyRow).values(created_at=datetime.now(UTC) - age)
    if key is not None:
        statement = statement.where(IdempotencyRow.idempotency_key == key)
    with Session(engine) as session, session.begin():
        session.execute(statement)


def _rows(engine: Engine) -> int:
    with Session(engine) as session:
        return int(session.scalar(select(func.count()).select_from(IdempotencyRow)) or 0)


def test_stored_answers_are_kept_a_day_by_default(hub_engine: Engine) -> None:
    store = IdempotencyStore(hub_engine)
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.complete(scope=SCOPE, key="k1", status_code=200, body="{}")
    _claimed_ago(hub_engine, timedelta(hours=23))

    assert DEFAULT_TTL.total_seconds() == 24 * 3600
    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) == StoredAnswer(200, "{}")


def test_a_retry_after_the_answer_expired_runs_again(hub_engine: Engine) -> None:
    store = IdempotencyStore(hub_engine, ttl=timedelta(hours=1))
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.complete(scope=SCOPE, key="k1", status_code=200, body="{}")
    _claimed_ago(hub_engine, timedelta(hours=1, seconds=1))

    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) is None
    # The retry holds the key now: its own retries wait for it, then get its answer.
    with pytest.raises(IdempotencyKeyInUse):
        store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.complete(scope=SCOPE, key="k1", status_code=207, body='{"again": true}')
    assert store.begin(scope=SCOPE, key="k1", request_sha256=BODY) == StoredAnswer(
        207, '{"again": true}'
    )


def test_an_expired_key_may_be_used_for_another_request(hub_engine: Engine) -> None:
    store = IdempotencyStore(hub_engine, ttl=timedelta(hours=1))
    store.begin(scope=SCOPE, key="k1", request_sha256=BODY)
    store.complete(scope=SCOPE, key="k1", status_code=200, body="{}")
    _claimed_ago(hub_engine, timedelta(hours=2))

    assert store.begin(scope=SCOPE, key="k1", request_sha256="b" * 64) is None


def test_each_new_claim_purges_a_bounded_batch_of_expired_answers(hub_engine: Engine) -> None:
    store = IdempotencyStore(hub_engine, ttl=timedelta(hours=1), purge_batch=3)
    for number in range(5):
        store.begin(scope=SCOPE, key=f"old-{number}", request_sha256=BODY)
        store.complete(scope=SCOPE, key=f"old-{number}", status_code=200, body="{}")
    store.begin(scope=SCOPE, key="recent", request_sha256=BODY)
    store.complete(scope=SCOPE, key="recent", status_code=200, body='{"recent": 1}')
    _claimed_ago(hub_engine, timedelta(hours=2))
    _claimed_ago(hub_engine, timedelta(minutes=30), key="recent")

    store.begin(scope=SCOPE, key="new-1", request_sha256=BODY)
    assert _rows(hub_engine) == 6 + 1 - 3  # at most one batch per request
    store.begin(scope=SCOPE, key="new-2", request_sha256=BODY)

    # Only the expired rows went; the recent answer is still given to its retries.
    assert _rows(hub_engine) == 3
    assert store.begin(scope=SCOPE, key="recent", request_sha256=BODY) == StoredAnswer(
        200, '{"recent": 1}'
    )
    assert store.purge() == 0
