"""The plugin map: a file's `type` picks one model and one source, loading nothing else."""

import subprocess
import sys
import typing

import pytest

from connectors.plugins import PLUGINS
from tests.conftest import REPO

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("kind", sorted(PLUGINS))
def test_each_type_names_the_model_that_validates_its_files(kind: str) -> None:
    model = PLUGINS[kind].model
    assert typing.get_args(model.model_fields["type"].annotation) == (kind,)
    # The model lives in the plugin's folder, beside its source.
    folder = PLUGINS[kind].source_module.rsplit(".", 1)[0]
    assert model.__module__.rsplit(".", 1)[0] == folder


def test_a_logfile_connector_runs_without_loading_database_drivers() -> None:
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from connectors.config import load\n"
        "from connectors.sources import build_source\n"
        "source = build_source(load(Path('connectors/examples/logfile-json.yaml')))\n"
        "print(type(source).__name__)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('psycopg', 'connectors.postgres.s',"
        " 'connectors.jdbc.s'))))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == ["LogfileTailer", "[]"]
