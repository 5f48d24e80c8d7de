"""What `hub api serve` does to its own process before serving: garbage collection tuned, and
listening sockets that several workers can share."""

import json
import socket
import subprocess
import sys

import pytest

from hub_api.server import listening_socket
from hub_api.settings import ApiSettings
from tests.conftest import REPO
from tests.support.ports import free_port

pytestmark = pytest.mark.unit

# In a process of its own: the settings change the interpreter they run in.
_BUILD_APP = """
import gc, json, sys
from hub_api.server import create_server_app
from hub_api.settings import ApiSettings
before = gc.get_threshold()
create_server_app(ApiSettings(gc_threshold=int(sys.argv[1])))
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def _server_interpreter(threshold: int) -> dict[str, list[int] | int]:
    result = subprocess.run(
        [sys.executable, "-c", _BUILD_APP, str(threshold)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    answer: dict[str, list[int] | int] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def test_a_server_process_collects_garbage_less_often_and_freezes_its_start_up() -> None:
    seen = _server_interpreter(50_000)
    assert seen["after"] == [50_000, *seen["before"][1:]]  # type: ignore[index]
    assert seen["frozen"] > 10_000  # modules, routes and settings, out of every collection


def test_a_threshold_of_zero_keeps_the_interpreter_default() -> None:
    seen = _server_interpreter(0)
    assert seen["after"] == seen["before"]


def test_workers_can_listen_on_one_port() -> None:
    settings = ApiSettings(host="127.0.0.1", port=free_port())
    first = listening_socket(settings, reuse_port=True)
    second = listening_socket(settings, reuse_port=True)
    try:
        first.listen()
        second.listen()
        with socket.create_connection(("127.0.0.1", settings.port), timeout=5):
            pass
    finally:
        first.close()
        second.close()


def test_a_port_taken_by_another_program_is_refused_by_name() -> None:
    settings = ApiSettings(host="127.0.0.1", port=free_port())
    taken = listening_socket(settings, reuse_port=False)
    taken.listen()
    try:
        with pytest.raises(SystemExit, match=f"cannot listen on 127.0.0.1:{settings.port}"):
            listening_socket(settings, reuse_port=True)
    finally:
        taken.close()
