"""`hub schema check --registry` and `hub schema register` against the running registry."""

import json
import uuid
from pathlib import Path

import httpx
import pytest

from tests.support.cli import hub
from tests.support.hub_client import bearer

pytestmark = pytest.mark.integration


def _record(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Payment", "fields": list(fields)})


def test_check_then_register_against_the_registry(
    api_url: str, admin_key: str, tmp_path: Path
) -> None:
    subject = f"pay.ments_{uuid.uuid4().hex[:8]}-value"
    v1 = _record({"name": "id", "type": "string"})
    httpx.post(
        f"{api_url}/subjects/{subject}/versions", json={"schema": v1}, headers=bearer(admin_key)
    ).raise_for_status()
    schema_file = tmp_path / "payment.avsc"
    (tmp_path / "subjects.yaml").write_text(f"files:\n  payment.avsc:\n    subject: {subject}\n")
    common = [
        "--registry",
        api_url,
        "--subjects",
        str(tmp_path / "subjects.yaml"),
        str(schema_file),
    ]

    schema_file.write_text(_record({"name": "id", "type": "long"}))
    incompatible = hub("schema", "check", *common)
    assert incompatible.returncode == 1, incompatible.stdout + incompatible.stderr
    assert f"({subject}, BACKWARD): incompatible" in incompatible.stdout
    assert "'id'" in incompatible.stdout

    schema_file.write_text(
        _record({"name": "id", "type": "string"}, {"name": "memo", "type": "string", "default": ""})
    )
    compatible = hub("schema", "check", *common)
    assert compatible.returncode == 0, compatible.stdout + compatible.stderr

    refused = hub("schema", "register", *common)
    assert refused.returncode == 2 and "40101" in refused.stderr  # registering needs a key
    registered = hub("schema", "register", "--key", admin_key, *common)
    assert registered.returncode == 0, registered.stderr
    versions = httpx.get(f"{api_url}/subjects/{subject}/versions").json()
    assert versions == [1, 2]


def test_an_unreachable_registry_is_reported(tmp_path: Path) -> None:
    schema_file = tmp_path / "x.y.avsc"
    schema_file.write_text(_record({"name": "id", "type": "string"}))
    result = hub("schema", "check", "--registry", "http://127.0.0.1:9", str(schema_file))
    assert result.returncode == 1
    assert "unreachable" in result.stdout
