"""`hub schema check --against GIT_REF`: pull-request checks with no registry server."""

import json
import subprocess
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

from tests.support.cli import hub

pytestmark = pytest.mark.unit

V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "string"},
        {"name": "quantity", "type": "int"},
    ],
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "config", "user.email", "ci@example.com")
    _git(tmp_path, "config", "user.name", "CI")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    (schemas / "sales.orders.avsc").write_text(json.dumps(V1, indent=2))
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "v1")
    return tmp_path


def _change(repo: Path, **fields: object) -> None:
    schema = {**V1, "fields": [*V1["fields"], *fields.values()]}
    (repo / "schemas" / "sales.orders.avsc").write_text(json.dumps(schema))


def test_an_incompatible_change_fails_with_the_reason(repo: Path) -> None:
    schema = {
        **V1,
        "fields": [{"name": "id", "type": "string"}, {"name": "quantity", "type": "string"}],
    }
    (repo / "schemas" / "sales.orders.avsc").write_text(json.dumps(schema))

    result = hub("schema", "check", "--against", "HEAD", "schemas", cwd=repo)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL schemas/sales.orders.avsc (sales.orders-value, BACKWARD)" in result.stdout
    assert "quantity" in result.stdout
    assert "0 passed, 1 failed" in result.stdout


def test_a_compatible_change_passes(repo: Path) -> None:
    _change(repo, note={"name": "note", "type": ["null", "string"], "default": None})

    result = hub("schema", "check", "--against", "HEAD", "schemas", cwd=repo)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 0 failed" in result.stdout


def test_the_mapping_file_names_the_subject_and_level(repo: Path) -> None:
    # Adding a field without a default breaks BACKWARD but is fine under FORWARD.
    _change(repo, note={"name": "note", "type": "string"})
    (repo / "subjects.yaml").write_text(
        "files:\n  schemas/sales.orders.avsc:\n    subject: orders-v1\n    compatibility: FORWARD\n"
    )
    forward = hub(
        "schema", "check", "--against", "HEAD", "--subjects", "subjects.yaml", "schemas", cwd=repo
    )
    assert forward.returncode == 0, forward.stdout + forward.stderr
    assert "(orders-v1, FORWARD)" in forward.stdout

    backward = hub("schema", "check", "--against", "HEAD", "schemas", cwd=repo)
    assert backward.returncode == 1


def test_junit_and_json_reports(repo: Path) -> None:
    _change(repo, note={"name": "note", "type": "string"})
    (repo / "schemas" / "sales.refunds.avsc").write_text(json.dumps({**V1, "name": "Refund"}))

    junit = hub("schema", "check", "--against", "HEAD", "--format", "junit",
                "--output", "report.xml", "schemas", cwd=repo)  # fmt: skip
    assert junit.returncode == 1
    suite = ET.parse(repo / "report.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    failure = suite.find("testcase[@classname='sales.orders-value']/failure")
    assert failure is not None and "note" in (failure.text or "")

    as_json = hub("schema", "check", "--against", "HEAD", "--format", "json", "schemas", cwd=repo)
    verdicts = {r["subject"]: r["verdict"] for r in json.loads(as_json.stdout)}
    assert verdicts == {"sales.orders-value": "incompatible", "sales.refunds-value": "new subject"}


def test_an_invalid_schema_file_is_an_error_not_a_pass(repo: Path) -> None:
    (repo / "schemas" / "sales.orders.avsc").write_text('{"type": "record", "name": "Order"}')

    result = hub("schema", "check", "--against", "HEAD", "schemas", cwd=repo)

    assert result.returncode == 1
    assert "error" in result.stdout and "Invalid schema" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--against", "no-such-ref", "schemas"], "Unknown git revision 'no-such-ref'"),
        (["schemas"], "Give --registry URL, or --against GIT_REF"),
        (["--against", "HEAD", "missing.avsc"], "No such schema file"),
    ],
)
def test_usage_problems_exit_2_with_the_fix(repo: Path, args: list[str], message: str) -> None:
    result = hub("schema", "check", *args, cwd=repo)
    assert result.returncode == 2
    assert message in result.stderr


def test_a_schema_the_registry_would_refuse_fails_with_the_path_and_rule(repo: Path) -> None:
    _change(repo, bad={"name": "a b", "type": ["null", "string"], "default": None})

    result = hub("schema", "check", "--against", "HEAD", "schemas", cwd=repo)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "$.fields[2].name" in result.stdout and "Avro naming rule" in result.stdout
