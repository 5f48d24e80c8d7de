"""Idempotent publish requests: a retry with the same `Idempotency-Key` is answered, not
published again.

The cycle per request: claim the key (or find the answer a previous request got), publish, then
store the answer, or release the key when nothing reached Kafka so that a retry runs again.
"""

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from anyio import to_thread

from catalog.idempotency import IdempotencyStore


@dataclass(frozen=True, slots=True)
class Answer:
    """A publish request's answer: its HTTP status and JSON body, and whether it is a stored
    answer given again."""

    status_code: int
    body: bytes
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Attempt:
    """What running a request gave: its answer, and whether any record reached Kafka."""

    answer: Answer
    reached_kafka: bool


class IdempotentRequests:
    """Runs publish requests under their idempotency keys, over the catalog's stored answers."""

    def __init__(self, store: IdempotencyStore) -> None:
        self._store = store

    async def answer(
        self,
        *,
        scope: str,
        key: str | None,
        request: bytes,
        attempt: Callable[[], Awaitable[Attempt]],
    ) -> Answer:
        """Run `attempt` once per (`scope`, `key`); a request without a key just runs.

        `request` is everything that makes two requests the same one (body and options): a
        key sent again with another request is refused (42223), and while the first holder
        runs, a retry is refused (40922). Store calls run in a worker thread: they may wait on
        the database.
        """
        if key is None:
            return (await attempt()).answer
        fingerprint = hashlib.sha256(request).hexdigest()
        stored = await to_thread.run_sync(
            lambda: self._store.begin(scope=scope, key=key, request_sha256=fingerprint)
        )
        if stored is not None:
            return Answer(stored.status_code, stored.body.encode(), replayed=True)
        try:
            result = await attempt()
        except BaseException:
            await to_thread.run_sync(lambda: self._store.abandon(scope=scope, key=key))
            raise
        answer = result.answer
        if result.reached_kafka or answer.status_code < 500:
            text = answer.body.decode()
            await to_thread.run_sync(
                lambda: self._store.complete(
                    scope=scope, key=key, status_code=answer.status_code, body=text
                )
            )
        else:  # nothing reached Kafka: let a retry publish
            await to_thread.run_sync(lambda: self._store.abandon(scope=scope, key=key))
        return answer
