"""`hub load run --master` and `hub spark ...` without a cluster: what an operator sees when
the master is mistyped or the local cluster is not running."""

import os
from pathlib import Path

import pytest

from spark_loaders.settings import LoaderSettings
from tests.support.cli import hub

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "master",
    ["local", "local[*]", "local[2]", "local[*,3]", "spark://127.0.0.1:7077",
     "spark://a:7077,b:7077", "k8s://https://kubernetes.default.svc:443", "yarn"],
)  # fmt: skip
def test_the_masters_spark_knows_are_accepted(master: str) -> None:
    assert LoaderSettings(master=master).master == master


def test_a_mistyped_master_is_refused_before_spark_starts(tmp_path: Path) -> None:
    env = {**os.environ, "HUB_HOME": str(tmp_path)}

    result = hub("load", "run", "--master", "spark//127.0.0.1:7077", env=env)

    assert result.returncode == 2
    assert "HUB_LOADER_MASTER: not a Spark master URL" in result.stderr
    assert "spark://host:port" in result.stderr and "(error 42270)" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_of_a_cluster_that_does_not_run_says_so_and_exits_1(tmp_path: Path) -> None:
    env = {**os.environ, "HUB_SPARK_HOME": str(tmp_path / "cluster")}

    result = hub("spark", "status", env=env)

    assert result.returncode == 1
    assert result.stdout.splitlines()[0] == "Spark master is not running"


def test_stopping_a_cluster_that_does_not_run_is_not_an_error(tmp_path: Path) -> None:
    env = {**os.environ, "HUB_SPARK_HOME": str(tmp_path / "cluster")}

    result = hub("spark", "stop", env=env)

    assert result.returncode == 0
    assert result.stdout.strip() == "Spark cluster was not running"
