"""Running the `hub` command line as CI would: a separate process, exit code and output."""

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def hub(
    *args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `hub ARGS...` (in `env`, default this process's) and return the finished process
    (output captured as text)."""
    return subprocess.run(
        [sys.executable, "-m", "hub_cli.main", *args],
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
