"""`hub <service> start|stop|status` for the background services the hub runs on this machine.

The local Kafka broker and the metastore server share one life cycle (`BackgroundProcess`), so
their commands share one shape: what differs is the service's name, how to build it, where it
listens and what its commands say besides.
"""

from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

import typer


class ServiceStatus(Protocol):
    """What `status()` and `start()` of a background service report."""

    @property
    def running(self) -> bool: ...

    @property
    def pid(self) -> int | None: ...

    @property
    def ready(self) -> bool: ...


class Service(Protocol):
    """A background service: `LocalBroker`, `MetastoreServer`."""

    def start(self) -> ServiceStatus: ...

    def stop(self) -> bool: ...

    def status(self) -> ServiceStatus: ...


S = TypeVar("S", bound=Service)


def add_service_commands(
    app: typer.Typer,
    *,
    name: str,
    build: Callable[[], S],
    address: Callable[[S], str],
    starting: str,
    help_start: str,
    help_stop: str,
    help_status: str,
    started: Callable[[S], Iterable[str]] = lambda _: (),
    before_status: Callable[[], bool] = lambda: True,
    start_command: Callable[..., None] | None = None,
) -> None:
    """Add `start`, `stop` and `status` of the service that `build` makes to `app`.

    `name` begins every line the commands print; `starting` is the state of a service that runs
    but does not serve yet; `started` gives the lines `start` prints after its first.
    `before_status` runs first in `status` and prints what it must; when it returns False (the
    settings select no local service), `status` ends there with exit status 0.
    `start_command` replaces the plain `start` (for a service whose start takes options).
    """

    # `build` runs inside each command, never at registration, so that `hub --help` reads no
    # settings and imports no service (the metastore's package imports PySpark).
    def start() -> None:
        service = build()
        status = service.start()
        typer.echo(f"{name} is running (pid {status.pid}) on {address(service)}")
        for line in started(service):
            typer.echo(line)

    def stop() -> None:
        stopped = build().stop()
        typer.echo(f"{name} stopped" if stopped else f"{name} was not running")

    def status() -> None:
        if not before_status():
            return
        service = build()
        status = service.status()
        if not status.running:
            typer.echo(f"{name} is not running")
            raise typer.Exit(1)
        state = "ready" if status.ready else starting
        typer.echo(f"{name} is running (pid {status.pid}) on {address(service)}: {state}")

    app.command("start", help=help_start)(start_command or start)
    app.command("stop", help=help_stop)(stop)
    app.command("status", help=help_status)(status)
