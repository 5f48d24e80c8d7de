"""Stopping the API ends its Kafka clients with it. A client left for the garbage collector keeps
reconnecting to a cluster that may be gone, and is destroyed later on whatever thread collects
it, where destroying it can crash the process (`hub_kafka.handles`)."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.integration

# Run in an interpreter of its own, so that no other test's clients are counted, with the
# garbage collector off, so that only closing can end the clients.
SCRIPT = textwrap.dedent(
    """
    import gc
    import sys

    import httpx

    from tests.support.api_server import serve_api
    from tests.support.threads import librdkafka_threads

    gc.disable()

    with serve_api(database_url=sys.argv[1], bootstrap_servers=sys.argv[2]) as url:
        ready = httpx.get(f"{url}/readyz", timeout=30)
        print("ready", ready.status_code, flush=True)
        print("serving", librdkafka_threads(), flush=True)
    print("stopped", librdkafka_threads(), flush=True)
    """
)


def test_stopping_the_api_ends_the_threads_of_its_kafka_clients(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, f"sqlite:///{tmp_path / 'hub.db'}", kafka_bootstrap],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines() if " " in line)
    assert said["ready"] == "200"
    assert int(said["serving"]) > 0  # a producer, the topic admin, the reader, the state cache
    assert said["stopped"] == "0", done.stderr[-3000:]
