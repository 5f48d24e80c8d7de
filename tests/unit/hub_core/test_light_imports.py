"""Every package can stand on the base without loading another package's libraries."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

# What the base may load besides the standard library: settings helpers use pydantic.
_ALLOWED = {"pydantic", "pydantic_core", "pydantic_settings", "typing_extensions",
            "typing_inspection", "annotated_types", "dotenv"}  # fmt: skip


def _third_party_modules_loaded_by(module: str) -> set[str]:
    """Top-level third-party packages that importing `module` loads, in a fresh interpreter."""
    script = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout)  # fmt: skip
    tops = {name.split(".", 1)[0] for name in loaded}
    return {t for t in tops if t not in sys.stdlib_module_names and not t.startswith("_")} - {
        "hub_core"
    }


@pytest.mark.parametrize("module", ["hub_core.errors", "hub_core.naming", "hub_core.ledger"])
def test_the_error_catalogue_and_naming_load_nothing_beyond_the_standard_library(
    module: str,
) -> None:
    assert _third_party_modules_loaded_by(module) == set()


@pytest.mark.parametrize("module", ["hub_core.errors", "hub_core.naming", "hub_core.settings"])
def test_the_base_loads_no_third_party_package_beyond_pydantic(module: str) -> None:
    assert _third_party_modules_loaded_by(module) <= _ALLOWED


def test_importing_a_registry_error_does_not_load_the_database_or_avro_libraries() -> None:
    loaded = _third_party_modules_loaded_by("registry.errors")
    assert not loaded & {"sqlalchemy", "fastavro", "confluent_kafka", "pyspark"}
