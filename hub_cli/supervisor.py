"""Keeping the children of `hub up` running: a part that exits is restarted, never the end.

`hub up` runs the API server, the loader and the analyst server as child processes next to the
Kafka broker and the metastore. One of them failing (a loader that dies on a batch, an API
server that crashes) must not take the others down: the supervisor reports what died, its exit
code and its log, and starts it again after a jittered exponential wait (tenacity's
`wait_exponential_jitter`), counted in failures since the child last ran healthily. Only a stop
request (Ctrl-C, SIGTERM) ends anything.

Why hand-written, not a process manager (supervisord, circus): those are daemons with a
configuration language of their own, for a handful of children that live exactly as long as
one `hub up` command. The supervisor is a few functions over `subprocess.Popen` that the
stack's main loop calls once a second; a restart is a due time, not a sleep, so a stop request
ends every wait at once.

Every child runs in a process group of its own (`start_new_session=True`): a terminal's Ctrl-C
reaches only `hub up`, which stops the children in order, and each child's own processes (the
Spark JVM PySpark starts inside the loader, the API's worker processes) can be found and killed
with it. A child that exited is reaped only after its group was killed: until then its pid
stays taken, so the group id cannot have been handed to an unrelated process.
"""

import contextlib
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import tenacity

log = logging.getLogger(__name__)

# How often a stopping child is checked for having exited.
_STOP_POLL_S = 0.1


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """What to run for one part of the stack, and where its output goes."""

    name: str  # as the user reads it: "loader", "API server"
    command: Sequence[str]
    env: Mapping[str, str]
    log_path: Path


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """Waits before restarts: `initial_s` doubling per failure in a row up to `max_s`, plus up to
    `jitter_s` at random; a child that ran `healthy_s` or longer starts again from `initial_s`."""

    initial_s: float = 1.0
    max_s: float = 60.0
    jitter_s: float = 1.0
    healthy_s: float = 60.0


class RestartBackoff:
    """The wait before each restart of one child, from tenacity's jittered exponential wait."""

    def __init__(self, policy: RestartPolicy) -> None:
        self._healthy_s = policy.healthy_s
        self._wait = tenacity.wait_exponential_jitter(
            multiplier=policy.initial_s, max=policy.max_s, jitter=policy.jitter_s
        )
        self.failures = 0  # in a row, since the child last ran healthily

    def next_wait_s(self, *, ran_s: float) -> float:
        """The wait before restarting a child that exited after running `ran_s` seconds."""
        if ran_s >= self._healthy_s:
            self.failures = 0
        self.failures += 1
        # tenacity's wait strategies read only the attempt number of a retry's state.
        state = tenacity.RetryCallState(tenacity.Retrying(), fn=None, args=(), kwargs={})
        state.attempt_number = self.failures
        return float(self._wait(state))


@dataclass(frozen=True, slots=True)
class ChildExit:
    """A supervised child that ended, and when it will be started again."""

    name: str
    pid: int
    returncode: int
    ran_s: float
    log_path: Path
    restart_in_s: float
    failures: int  # in a row, this one included

    def describe(self) -> str:
        """One sentence for the terminal and the log: what died, how, where to look, what next."""
        return (
            f"The {self.name} (pid {self.pid}) {exit_reason(self.returncode)} after "
            f"{self.ran_s:.0f}s; its log: {self.log_path}. Restarting it in "
            f"{self.restart_in_s:.1f}s (failure {self.failures} in a row)."
        )


def exit_reason(returncode: int) -> str:
    """`exited with code 1`, or `was killed by SIGKILL` for a negative (signal) return code."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


@dataclass
class _Child:
    spec: ChildSpec
    backoff: RestartBackoff
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    last_exit: ChildExit | None = None


class Supervisor:
    """Starts children, restarts those that exit, and stops them all, process groups included.

    Not thread-safe: one thread (the stack's main loop) calls `check` and `stop_all`.
    """

    def __init__(
        self,
        policy: RestartPolicy,
        *,
        on_exit: Callable[[ChildExit], None] = lambda _: None,
        on_restart: Callable[[str, int], None] = lambda _name, _pid: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._policy = policy
        self._on_exit = on_exit
        self._on_restart = on_restart
        self._clock = clock
        self._children: dict[str, _Child] = {}

    def start(self, spec: ChildSpec) -> subprocess.Popen[bytes]:
        """Start `spec` now and keep it running until `stop_all`."""
        if spec.name in self._children:
            raise ValueError(f"a child named {spec.name!r} is already supervised")
        child = _Child(spec, RestartBackoff(self._policy))
        self._children[spec.name] = child
        return self._launch(child)

    def process(self, name: str) -> subprocess.Popen[bytes] | None:
        """The running process of child `name`, or None while it waits for a restart."""
        return self._children[name].process

    def last_exit(self, name: str) -> ChildExit | None:
        """The latest exit of child `name`, or None if it never exited."""
        return self._children[name].last_exit

    def check(self) -> None:
        """Report and schedule a restart for each child that exited; restart those now due."""
        now = self._clock()
        for child in self._children.values():
            if child.process is not None:
                returncode = _reap_with_group(child.process)
                if returncode is not None:
                    self._exited(child, returncode, now)
            if child.restart_at is not None and now >= child.restart_at:
                child.restart_at = None
                process = self._launch(child)
                self._on_restart(child.spec.name, process.pid)

    def stop_all(self, *, grace_s: float) -> None:
        """Stop every child, the last started first: SIGTERM, then after `grace_s` SIGKILL to
        the child's whole process group. Pending restarts are dropped."""
        for child in reversed(list(self._children.values())):
            child.restart_at = None
            if child.process is not None:
                stop_process_group(child.process, name=child.spec.name, grace_s=grace_s)
                child.process = None

    def _exited(self, child: _Child, returncode: int, now: float) -> None:
        assert child.process is not None
        ran_s = now - child.started_at
        wait_s = child.backoff.next_wait_s(ran_s=ran_s)
        report = ChildExit(
            name=child.spec.name,
            pid=child.process.pid,
            returncode=returncode,
            ran_s=ran_s,
            log_path=child.spec.log_path,
            restart_in_s=wait_s,
            failures=child.backoff.failures,
        )
        child.last_exit = report
        child.process = None
        child.restart_at = now + wait_s
        log.warning("%s", report.describe())
        self._on_exit(report)

    def _launch(self, child: _Child) -> subprocess.Popen[bytes]:
        spec = child.spec
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_path.open("ab") as output:
            process = subprocess.Popen(
                list(spec.command),
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(spec.env),
                start_new_session=True,  # Ctrl-C reaches only us; we stop children in order
            )
        log.info("started the %s (pid %s, log: %s)", spec.name, process.pid, spec.log_path)
        child.process = process
        child.started_at = self._clock()
        return process


def stop_process_group(process: subprocess.Popen[bytes], *, name: str, grace_s: float) -> None:
    """Ask `process` to stop (SIGTERM), then kill its process group: at once if it stopped,
    after `grace_s` if not. Whatever it started in its group goes with it."""
    if exit_status(process) is None:
        log.info("stopping the %s (pid %s)", name, process.pid)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while exit_status(process) is None and time.monotonic() < deadline:
            time.sleep(_STOP_POLL_S)
        if exit_status(process) is None:
            log.warning("the %s did not stop in %.0fs; killing it", name, grace_s)
    _reap_with_group(process, block=True)


def _reap_with_group(process: subprocess.Popen[bytes], *, block: bool = False) -> int | None:
    """If `process` has exited (or, with `block`, once it is killed): SIGKILL what is left of
    its process group, reap it, and return its return code; else None."""
    if process.returncode is not None:
        return process.returncode
    if not block and exit_status(process) is None:
        return None
    # The leader is a zombie or still runs (block): its pid, and so its group id, is still ours.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def exit_status(process: subprocess.Popen[bytes]) -> int | None:
    """Whether `process` ended, without reaping it (WNOWAIT): None while it runs."""
    if process.returncode is not None:
        return process.returncode
    try:
        result = os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:  # reaped elsewhere
        return process.poll()
    if result is None or result.si_pid == 0:
        return None
    if result.si_code == os.CLD_EXITED:
        return result.si_status
    return -result.si_status
