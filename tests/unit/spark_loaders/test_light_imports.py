"""The loader's settings load without PySpark: the `hub` command reads them (`hub config check`,
`hub up`) in processes that never start Spark."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit


def _modules_loaded_by(module: str) -> set[str]:
    """Top-level packages that importing `module` loads, in a fresh interpreter."""
    script = (
        "import json, sys\n"
        "before = set(sys.modules)\n"
        f"import {module}\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout)  # fmt: skip
    return {name.split(".", 1)[0] for name in loaded}


@pytest.mark.parametrize(
    "module",
    [
        "spark_loaders.settings",
        "spark_loaders.errors",
        "spark_loaders.types",
        "spark_loaders.services.analyst_settings",
        "spark_loaders.services.cluster_settings",
    ],
)
def test_importing_the_loaders_settings_does_not_load_pyspark(module: str) -> None:
    loaded = _modules_loaded_by(module)
    assert "spark_loaders" in loaded
    assert not loaded & {"pyspark", "py4j", "delta"}
