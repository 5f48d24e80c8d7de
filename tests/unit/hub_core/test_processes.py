"""Background services found by their pid file: started, checked, stopped, and cleaned up."""

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hub_core.processes import BackgroundProcess, port_open, process_alive, start_ticks

pytestmark = pytest.mark.unit


class StartFailed(Exception):
    pass


def _wait(
    service: BackgroundProcess,
    ready: Callable[[], bool],
    *,
    process: subprocess.Popen[bytes] | None = None,
    timeout_s: float = 30,
) -> None:
    service.wait_ready(
        ready,
        address="127.0.0.1:1",
        logs="out.log",
        error=StartFailed,
        timeout_s=timeout_s,
        interval_s=0.05,
        process=process,
    )


def test_a_started_service_is_found_by_its_pid_file_and_stopped(tmp_path: Path) -> None:
    service = BackgroundProcess("sleeper", tmp_path / "sleeper.pid")
    process = service.start(["sleep", "60"], output=tmp_path / "out.log")

    assert service.pid() == process.pid
    assert service.stop(timeout_s=10)
    assert not process_alive(process.pid)
    assert not (tmp_path / "sleeper.pid").exists()
    assert not service.stop(timeout_s=10)  # stopping a stopped service is a no-op


def test_a_service_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    service = BackgroundProcess("stubborn", tmp_path / "stubborn.pid")
    ignores_term = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('up', flush=True); time.sleep(60)"
    )
    process = service.start([sys.executable, "-c", ignores_term], output=tmp_path / "out.log")
    _wait(service, lambda: "up" in (tmp_path / "out.log").read_text(), process=process)

    assert service.stop(timeout_s=0.5)
    assert not process_alive(process.pid)


def test_a_stale_pid_file_means_not_running(tmp_path: Path) -> None:
    finished = BackgroundProcess("done", tmp_path / "done.pid")
    process = finished.start(["true"], output=tmp_path / "out.log")
    process.wait()

    assert finished.pid() is None
    assert not (tmp_path / "done.pid").exists()


def test_a_pid_now_given_to_another_process_means_not_running(tmp_path: Path) -> None:
    # The service died and the system, gone round its pid space, gave its pid to another
    # process: here the test's own, which runs but did not start when the file says.
    pid_file = tmp_path / "broker.pid"
    pid_file.write_text(f"{os.getpid()} 1")
    service = BackgroundProcess("broker", pid_file)

    assert service.pid() is None
    assert not pid_file.exists()


def test_the_pid_file_names_the_process_by_pid_and_start_time(tmp_path: Path) -> None:
    service = BackgroundProcess("sleeper", tmp_path / "sleeper.pid")
    process = service.start(["sleep", "60"], output=tmp_path / "out.log")
    try:
        assert (tmp_path / "sleeper.pid").read_text() == f"{process.pid} {start_ticks(process.pid)}"
        # A file written before start times were kept still names a running process.
        (tmp_path / "sleeper.pid").write_text(str(process.pid))
        assert service.pid() == process.pid
    finally:
        service.stop(timeout_s=10)


def test_a_service_that_exits_during_start_up_names_its_code_and_logs(tmp_path: Path) -> None:
    service = BackgroundProcess("broken server", tmp_path / "broken.pid")
    process = service.start(["sh", "-c", "exit 3"], output=tmp_path / "out.log")

    with pytest.raises(StartFailed, match=r"The broken server exited with code 3 .*see out\.log"):
        _wait(service, lambda: False, process=process)


def test_a_service_that_never_gets_ready_times_out(tmp_path: Path) -> None:
    service = BackgroundProcess("slow server", tmp_path / "slow.pid")

    with pytest.raises(StartFailed, match=r"slow server did not become ready on 127\.0\.0\.1:1"):
        _wait(service, lambda: port_open(1), timeout_s=0.3)
