"""Kafka clients destroyed when their owner closes, not when the garbage collector gets to them.

A librdkafka client runs threads of its own until it is destroyed, and confluent-kafka destroys
it when the Python object goes. An object in a reference cycle (an app's state, a service that
points back at its owner) goes only when the cyclic garbage collector runs: at some later time,
on whichever thread allocates then. That thread may be one of librdkafka's, running an admin
result's Python callback, and destroying a client there is not safe: librdkafka aborts when it
is the client's own, and it has crashed processes (confluent-kafka-python, issue 1761 and pull
request 2129). Until then the client keeps reconnecting to a cluster that may be gone. So
every owner of a client closes it explicitly: producers and consumers have `close()`; an
`AdminClient` has none, so `Admin` lets go of the only reference to it, which destroys it at
once, on the closing thread.
"""

from typing import Any

from confluent_kafka.admin import AdminClient

from hub_kafka.errors import KafkaUnavailable


class Admin:
    """An `AdminClient` that `close` destroys at once."""

    def __init__(self, config: dict[str, Any], *, owner: str) -> None:
        self._client: AdminClient | None = AdminClient(config)
        self._owner = owner

    @property
    def client(self) -> AdminClient:
        if self._client is None:
            raise KafkaUnavailable(f"The {self._owner} is closed: it no longer talks to Kafka.")
        return self._client

    def close(self) -> None:
        self._client = None
