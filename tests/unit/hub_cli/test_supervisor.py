"""`hub up` keeps its parts running: real child processes exit, are reported and restarted, and
stopping leaves none of them, nor anything they started, behind."""

import signal
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from hub_cli.settings import StackSettings
from hub_cli.supervisor import (
    ChildExit,
    ChildSpec,
    RestartBackoff,
    RestartPolicy,
    Supervisor,
    exit_reason,
    exit_status,
)
from hub_core.processes import process_alive
from tests.support.waiting import wait_until

pytestmark = pytest.mark.unit

NO_JITTER = RestartPolicy(initial_s=1.0, max_s=8.0, jitter_s=0.0, healthy_s=60.0)

# Starts a grandchild in the child's process group (as PySpark starts its JVM), writes the
# grandchild's pid to argv[1], then does what argv[2] says.
PARENT_OF_SLEEPER = """
import signal, subprocess, sys, time
sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[1], "w").write(str(sleeper.pid))
if sys.argv[2] == "exit":
    sys.exit(3)
if sys.argv[2] == "ignore-term":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(600)
"""


class FakeClock:
    """The supervisor's sense of time, moved by the test: restarts fall due when it says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _python(name: str, code: str, tmp_path: Path, *args: str) -> ChildSpec:
    return ChildSpec(
        name,
        [sys.executable, "-c", code, *args],
        {"PATH": "/usr/bin:/bin"},
        tmp_path / f"{name}.log",
    )


def _wait_exited(supervisor: Supervisor, name: str) -> None:
    process = supervisor.process(name)
    assert process is not None
    wait_until(lambda: exit_status(process) is not None, timeout_s=30, what=f"{name} to exit")


def _pid_in(path: Path) -> int:
    wait_until(lambda: path.exists() and path.read_text() != "", timeout_s=30, what=str(path))
    return int(path.read_text())


def test_a_child_that_exits_is_reported_with_its_code_and_log_and_restarted_after_the_wait(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    exits: list[ChildExit] = []
    restarts: list[tuple[str, int]] = []
    supervisor = Supervisor(
        NO_JITTER,
        on_exit=exits.append,
        on_restart=lambda n, p: restarts.append((n, p)),
        clock=clock,
    )
    spec = _python("loader", "import sys; print('batch failed'); sys.exit(3)", tmp_path)
    first = supervisor.start(spec)
    _wait_exited(supervisor, "loader")
    clock.now += 5

    supervisor.check()
    assert len(exits) == 1
    report = exits[0]
    assert (report.name, report.pid, report.returncode) == ("loader", first.pid, 3)
    assert report.log_path == spec.log_path and "batch failed" in spec.log_path.read_text()
    assert report.restart_in_s == 1.0
    assert "exited with code 3" in report.describe() and str(spec.log_path) in report.describe()
    assert supervisor.process("loader") is None  # waiting for its restart

    supervisor.check()  # not due yet
    assert restarts == []
    clock.now += 1.0
    supervisor.check()
    second = supervisor.process("loader")
    assert second is not None and second.pid != first.pid
    assert restarts == [("loader", second.pid)]
    supervisor.stop_all(grace_s=5)


def test_restart_waits_double_while_a_child_keeps_failing_and_start_over_after_a_healthy_run(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    supervisor = Supervisor(NO_JITTER, clock=clock)
    supervisor.start(_python("loader", "import sys; sys.exit(1)", tmp_path))
    waits = []
    for _ in range(5):
        _wait_exited(supervisor, "loader")
        supervisor.check()
        last = supervisor.last_exit("loader")
        assert last is not None
        wait = last.restart_in_s
        waits.append(wait)
        clock.now += wait
        supervisor.check()  # restarted
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]  # capped at max_s

    _wait_exited(supervisor, "loader")
    clock.now += NO_JITTER.healthy_s  # it ran long enough to count as healthy
    supervisor.check()
    last = supervisor.last_exit("loader")
    assert last is not None and (last.restart_in_s, last.failures) == (1.0, 1)
    supervisor.stop_all(grace_s=5)


def test_restart_waits_carry_jitter_within_its_bound() -> None:
    backoff = RestartBackoff(RestartPolicy(initial_s=2.0, max_s=60.0, jitter_s=1.0))
    waits = [backoff.next_wait_s(ran_s=0.0) for _ in range(3)]
    for wait, base in zip(waits, [2.0, 4.0, 8.0], strict=True):
        assert base <= wait <= base + 1.0


def test_a_killed_child_is_reported_by_its_signal(tmp_path: Path) -> None:
    exits: list[ChildExit] = []
    supervisor = Supervisor(NO_JITTER, on_exit=exits.append, clock=FakeClock())
    process = supervisor.start(_python("API server", "import time; time.sleep(600)", tmp_path))
    process.send_signal(signal.SIGKILL)
    _wait_exited(supervisor, "API server")
    supervisor.check()
    assert exits[0].returncode == -signal.SIGKILL
    assert "was killed by SIGKILL" in exits[0].describe()
    supervisor.stop_all(grace_s=5)


def test_what_an_exited_child_started_is_killed_before_the_restart(tmp_path: Path) -> None:
    supervisor = Supervisor(NO_JITTER, clock=FakeClock())
    pid_file = tmp_path / "sleeper.pid"
    supervisor.start(_python("loader", PARENT_OF_SLEEPER, tmp_path, str(pid_file), "exit"))
    sleeper = _pid_in(pid_file)
    _wait_exited(supervisor, "loader")
    assert process_alive(sleeper)  # orphaned, still running: a JVM left by a dead loader

    supervisor.check()
    wait_until(lambda: not process_alive(sleeper), timeout_s=30, what="the orphan to be killed")
    supervisor.stop_all(grace_s=5)


@pytest.mark.parametrize("behaviour", ["stop-on-term", "ignore-term"])
def test_stopping_leaves_no_child_and_no_process_a_child_started(
    tmp_path: Path, behaviour: str
) -> None:
    supervisor = Supervisor(NO_JITTER, clock=FakeClock())
    pid_file = tmp_path / "sleeper.pid"
    child = supervisor.start(
        _python("loader", PARENT_OF_SLEEPER, tmp_path, str(pid_file), behaviour)
    )
    sleeper = _pid_in(pid_file)

    supervisor.stop_all(grace_s=0.5)
    assert child.returncode is not None  # stopped and reaped
    if behaviour == "ignore-term":
        assert child.returncode == -signal.SIGKILL  # killed after the grace period
    wait_until(lambda: not process_alive(sleeper), timeout_s=30, what="the grandchild to go")


def test_a_pending_restart_is_dropped_when_the_hub_stops(tmp_path: Path) -> None:
    clock = FakeClock()
    supervisor = Supervisor(NO_JITTER, clock=clock)
    supervisor.start(_python("loader", "import sys; sys.exit(1)", tmp_path))
    _wait_exited(supervisor, "loader")
    supervisor.check()
    supervisor.stop_all(grace_s=5)
    clock.now += 3600
    supervisor.check()
    assert supervisor.process("loader") is None


def test_exit_reasons_name_the_code_or_the_signal() -> None:
    assert exit_reason(0) == "exited with code 0"
    assert exit_reason(2) == "exited with code 2"
    assert exit_reason(-signal.SIGTERM) == "was killed by SIGTERM"


def test_a_first_restart_wait_beyond_the_longest_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HUB_UP_RESTART_INITIAL_SECONDS", "120")
    monkeypatch.setenv("HUB_UP_RESTART_MAX_SECONDS", "60")
    with pytest.raises(ValidationError, match="HUB_UP_RESTART_MAX_SECONDS"):
        StackSettings()
