"""Whose failure an exception is decides whether a feed is set aside, and what users read."""

import pytest

from spark_loaders.errors import LoaderError, MetastoreUnavailable, RegistryUnavailable
from spark_loaders.runtime.isolation import (
    FailureKind,
    as_transient,
    classify,
    describe,
    stopped_on_dependency,
)

pytestmark = pytest.mark.unit


class Py4JJavaError(Exception):
    """Stands for py4j's class of that name: only its text matters here."""


def java(line: str) -> Py4JJavaError:
    return Py4JJavaError(f"An error occurred while calling o42.save.\n: {line}\n\tat org.x.y(Z)")


def test_a_schema_spark_refuses_is_the_feeds_own_failure_and_names_the_java_class() -> None:
    error = java(
        "org.apache.spark.sql.avro.IncompatibleSchemaException: Found recursive reference in Avro"
    )
    assert classify(error) is FailureKind.FEED
    assert describe(error) == ("IncompatibleSchemaException: Found recursive reference in Avro")


def test_registry_and_metastore_outages_are_dependency_failures_not_the_feeds() -> None:
    assert classify(RegistryUnavailable("registry answered 503")) is FailureKind.DEPENDENCY
    refused = java("MetaException(message:Could not connect to meta store using any of the URIs)")
    assert classify(refused) is FailureKind.DEPENDENCY
    assert isinstance(as_transient(refused), MetastoreUnavailable)
    derby = java("java.sql.SQLNonTransientConnectionException: Error connecting to server")
    assert classify(derby) is FailureKind.DEPENDENCY


def test_a_stopping_or_misconfigured_loader_fails_the_batch_instead_of_quarantining() -> None:
    assert classify(java("java.lang.InterruptedException")) is FailureKind.LOADER
    assert classify(LoaderError("set HUB_LOADER_REGISTRY_KEY")) is FailureKind.LOADER
    assert classify(KeyboardInterrupt()) is FailureKind.LOADER
    # A warehouse pass's jobs cancelled at shutdown: no gold table is marked failed for it.
    cancelled = "[SPARK_JOB_CANCELLED] Job 7 cancelled part of cancelled job group hub-downstream"
    assert classify(java(f"org.apache.spark.SparkException: {cancelled}")) is FailureKind.LOADER


def test_messages_shown_to_users_mask_credentials_and_stay_one_line() -> None:
    error = java(
        "java.sql.SQLException: no table at jdbc:postgresql://hub:s3cret@db/meta?password=s3cret"
        " (Authorization: Bearer abc.def)"
    )
    text = describe(error)
    assert "s3cret" not in text and "abc.def" not in text
    assert "\n" not in text and text.startswith("SQLException: ")
    assert len(describe(ValueError("x" * 5000))) < 400


def test_a_query_stopped_by_a_registry_outage_is_recognised_for_a_restart() -> None:
    stopped = Exception(
        "[FOREACH_BATCH_USER_FUNCTION_ERROR] ...\nTraceback (most recent call last):\n"
        '  File "bronze.py", line 1\nspark_loaders.errors.RegistryUnavailable: Schema registry '
        "at http://127.0.0.1:8080 answered 503"
    )
    assert stopped_on_dependency(stopped)
    assert not stopped_on_dependency(Exception("AnalysisException: cannot resolve column"))
