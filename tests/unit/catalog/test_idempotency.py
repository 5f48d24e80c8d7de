"""Stored answers of publish requests: one per (scope, key), replayed to the same request only."""

from datetime import timedelta

import pytest
from sqlalchemy import Engine

from catalog.errors import IdempotencyKeyInUse, IdempotencyKeyReused
from catalog.idempotency import IdempotencyStore, StoredAnswer
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
