"""Connection failures of the CDC source, by kind: which ones its task retries."""

import psycopg
import psycopg2
import pytest

from connectors.postgres.errors import (
    CONNECTION_ERRORS,
    CdcSetupError,
    CdcSourceUnavailable,
    connection_failure,
)
from hub_core.errors import ErrorCode
from hub_core.retries import is_transient

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("connection to server failed: Connection refused"),
        psycopg.errors.CannotConnectNow("the database system is starting up"),
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg2.OperationalError("server closed the connection unexpectedly"),
        psycopg2.InterfaceError("connection already closed"),
    ],
)
def test_a_refused_or_lost_connection_is_retried(error: Exception) -> None:
    assert isinstance(error, CONNECTION_ERRORS)

    failure = connection_failure(error, "PostgreSQL connection lost")

    assert isinstance(failure, CdcSourceUnavailable)
    assert is_transient(failure)
    assert failure.code is ErrorCode.CDC_SOURCE_UNAVAILABLE
    assert failure.message.startswith("PostgreSQL connection lost: ")


def test_a_role_the_server_refuses_is_a_setup_error_no_retry_fixes() -> None:
    error = psycopg.errors.InvalidPassword('password authentication failed for user "hub"')

    failure = connection_failure(error, "cannot connect to PostgreSQL")

    assert isinstance(failure, CdcSetupError)
    assert not is_transient(failure)
    assert "source.dsn" in failure.message
