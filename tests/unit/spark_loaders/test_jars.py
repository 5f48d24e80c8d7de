"""A jar `make jars` should have put in place: the newest found, or an error saying what to do."""

from pathlib import Path

import pytest

from hub_core.errors import ErrorCode
from spark_loaders.errors import LoaderError, MetastoreError
from spark_loaders.runtime.jars import required_jar

pytestmark = pytest.mark.unit


def test_the_newest_version_of_a_jar_is_the_one_used(tmp_path: Path) -> None:
    for name in ("hub-thrift-auth-0.1.0.jar", "hub-thrift-auth-0.2.0.jar", "other-9.jar"):
        (tmp_path / name).touch()

    found = required_jar(tmp_path, "hub-thrift-auth-*.jar", what="authenticator", setting="X")

    assert found == tmp_path / "hub-thrift-auth-0.2.0.jar"


def test_a_missing_jar_says_what_where_and_the_two_ways_out(tmp_path: Path) -> None:
    with pytest.raises(LoaderError) as raised:
        required_jar(tmp_path, "delta-spark*.jar", what="Delta jar", setting="HUB_LOADER_JARS_DIR")

    assert raised.value.code == ErrorCode.LOCAL_SERVICE_FAILED
    assert raised.value.message == (
        f"No Delta jar (delta-spark*.jar) in {tmp_path}. Run `make jars`, or set "
        "HUB_LOADER_JARS_DIR to the folder holding it."
    )


def test_a_caller_chooses_the_error_it_raises(tmp_path: Path) -> None:
    with pytest.raises(MetastoreError):
        required_jar(
            tmp_path, "derbynet-*.jar", what="Derby server jar", setting="Y", error=MetastoreError
        )
