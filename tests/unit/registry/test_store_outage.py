"""Every read of the schema store turns a database outage into 503 (50303), never a 500."""

from collections.abc import Callable

import pytest

from hub_core.database import create_database_engine
from hub_core.errors import DatabaseUnavailable, ErrorCode
from registry.avro import parse
from registry.store import SchemaStore
from registry.types import SchemaId, Subject
from tests.support.ports import free_port

pytestmark = pytest.mark.unit


def _unreachable_store() -> SchemaStore:
    # Nothing listens on the port: every connection is refused.
    return SchemaStore(
        create_database_engine(f"postgresql+psycopg://hub@127.0.0.1:{free_port()}/x")
    )


READS: dict[str, Callable[[SchemaStore], object]] = {
    "is_used": lambda store: store.is_used(schema_id=SchemaId(1)),
    "subject_exists": lambda store: store.subject_exists(subject=Subject("sales.a-value")),
    "find": lambda store: store.find(
        subject=Subject("sales.a-value"),
        fingerprint=parse('"string"').fingerprint,
        references=(),
        include_deleted=False,
    ),
    "versions": lambda store: store.versions(subject=Subject("sales.a-value")),
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_a_store_read_during_a_database_outage_raises_the_coded_unavailable_error(
    read: Callable[[SchemaStore], object],
) -> None:
    with pytest.raises(DatabaseUnavailable) as raised:
        read(_unreachable_store())
    assert raised.value.code is ErrorCode.DATABASE_UNAVAILABLE
