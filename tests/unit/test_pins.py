"""The JVM jars and the Python packages must be built for the same Spark and Delta."""

import re
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.unit

_POM = "{http://maven.apache.org/POM/4.0.0}"


def _pom_property(name: str) -> str:
    root = ET.parse(REPO / "jvm" / "pom.xml").getroot()
    value = root.find(f"{_POM}properties/{_POM}{name}")
    assert value is not None and value.text, f"jvm/pom.xml has no <{name}>"
    return value.text


def _python_pin(package: str) -> str:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        match = re.fullmatch(rf"{re.escape(package)}==([\w.]+)", requirement)
        if match:
            return match.group(1)
    raise AssertionError(f"pyproject.toml does not pin {package}")


def test_spark_jars_match_the_pinned_pyspark() -> None:
    assert _pom_property("spark.version") == _python_pin("pyspark")


def test_delta_jars_match_the_pinned_delta_spark() -> None:
    assert _pom_property("delta.version") == _python_pin("delta-spark")


def test_the_s3a_connector_matches_the_hadoop_of_the_pinned_pyspark() -> None:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    (client,) = jars.glob("hadoop-client-api-*.jar")
    assert _pom_property("hadoop.version") == client.name.removeprefix(
        "hadoop-client-api-"
    ).removesuffix(".jar")


def test_the_lock_file_holds_the_same_pins() -> None:
    lock = (REPO / "requirements.lock").read_text()
    for package in ("pyspark", "delta-spark", "confluent-kafka", "fastavro", "sqlalchemy"):
        assert f"\n{package}=={_python_pin(package)}\n" in f"\n{lock}"
