"""Background JVM services the hub runs on this machine: the Kafka broker, the metastore server.

Each runs in a session of its own, so that it outlives the command that started it, with its
pid in a file under its state directory, so that any later `hub` command can find, check and
stop it.
"""

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hub_core.environment import child_environment

log = logging.getLogger(__name__)


def java_command(
    *, heap: str, classpath: str, options: list[str], fixed_heap: bool = False
) -> list[str]:
    """`java` (from `JAVA_HOME` when set) with a heap limit, `-D` options and a class path."""
    java_home = os.environ.get("JAVA_HOME")
    heap_options = [f"-Xmx{heap}", f"-Xms{heap}"] if fixed_heap else [f"-Xmx{heap}"]
    return [
        str(Path(java_home) / "bin" / "java") if java_home else "java",
        *heap_options,
        "-Djava.awt.headless=true",
        *options,
        "-cp",
        classpath,
    ]


class BackgroundProcess:
    """One background service known by its pid file: start it, find it, stop it."""

    def __init__(self, name: str, pid_file: Path) -> None:
        self.name = name
        self.pid_file = pid_file

    def pid(self) -> int | None:
        """The pid of the running service, or None (a stale pid file is removed).

        The file holds the pid and the process' start time: a pid alone is given to another
        process (or thread) once the system has gone round its pid space, 32768 on many
        machines, which a busy machine does in minutes; the service would then seem to run."""
        try:
            pid_text, *started = self.pid_file.read_text().split()
            pid = int(pid_text)
        except (FileNotFoundError, ValueError):
            return None
        if not process_alive(pid) or (started and start_ticks(pid) != started[0]):
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def start(
        self,
        command: list[str],
        *,
        output: Path,
        cwd: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Run `command` in a session of its own, its output appended to `output`.

        The service gets no hub secrets: none of the JVM services the hub runs needs one.
        `extra_env` adds variables of the service's own (Spark's daemons read theirs so)."""
        with output.open("ab") as sink:
            process = subprocess.Popen(
                command,
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                env=child_environment(extra=extra_env),
                # A terminal's Ctrl-C reaches the hub, which stops the service itself.
                start_new_session=True,
            )
        self.pid_file.write_text(f"{process.pid} {start_ticks(process.pid) or ''}".strip())
        return process

    def wait_ready(
        self,
        ready: Callable[[], bool],
        *,
        address: str,
        logs: str,
        error: Callable[[str], Exception],
        timeout_s: float,
        interval_s: float,
        process: subprocess.Popen[bytes] | None = None,
    ) -> None:
        """Poll `ready` until it holds. Raise `error(message)` if the just-started `process`
        ends first, or once `timeout_s` has passed; the message points to `logs`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise error(
                    f"The {self.name} exited with code {process.returncode} during start-up; "
                    f"see {logs}."
                )
            if ready():
                return
            time.sleep(interval_s)
        raise error(
            f"The {self.name} did not become ready on {address} within {timeout_s:.0f}s; "
            f"see {logs}."
        )

    def stop(self, *, timeout_s: float) -> bool:
        """SIGTERM, then SIGKILL if it still runs after `timeout_s`. True if it ran."""
        pid = self.pid()
        if pid is None:
            return False
        log.info("stopping the %s (pid %s)", self.name, pid)
        _signal(pid, signal.SIGTERM)
        if not _gone_within(pid, timeout_s):
            log.warning("the %s did not stop in %.0fs; killing it", self.name, timeout_s)
            _signal(pid, signal.SIGKILL)
            _gone_within(pid, 30.0)
        self.pid_file.unlink(missing_ok=True)
        return True


def process_alive(pid: int) -> bool:
    """Whether `pid` runs; a child of ours that exited is reaped and counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: a zombie still "exists" until its parent reaps it
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return done == 0


def start_ticks(pid: int) -> str | None:
    """When `pid` started, in clock ticks after boot (field 22 of /proc/<pid>/stat); None when
    no such process runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which may hold spaces, start with field 3 (the state).
    return stat.rsplit(")", 1)[1].split()[19]


def port_open(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _gone_within(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while process_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
