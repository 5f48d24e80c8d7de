"""`hub connect`: validate connector files, and run connectors until Ctrl-C or SIGTERM."""

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

log = logging.getLogger("hub.connect")

connect_app = typer.Typer(
    help="Connectors: JDBC polling, log files and PostgreSQL CDC into feeds.",
    no_args_is_help=True,
)

ConnectorFiles = Annotated[list[Path], typer.Argument(help="Connector YAML files.")]


@connect_app.command("validate")
def validate(files: ConnectorFiles) -> None:
    """Check connector files; print every problem of each, exit 1 if any file has one."""
    from connectors.config import load
    from connectors.errors import ConnectorConfigError

    failed = 0
    for path in files:
        try:
            loaded = load(path)
        except ConnectorConfigError as exc:
            failed += 1
            typer.echo(exc.message)
            continue
        typer.echo(f"{path}: ok ({loaded.config.type} connector '{loaded.name}')")
    if failed:
        typer.echo(f"{failed} of {len(files)} file(s) have problems")
        raise typer.Exit(1)


@connect_app.command("run")
def run(files: ConnectorFiles) -> None:
    """Run connectors (each file one connector) until Ctrl-C or SIGTERM.

    Settings: HUB_REGISTRY_DATABASE_URL (feeds and schemas), HUB_KAFKA_BOOTSTRAP_SERVERS,
    HUB_CONNECT_* (state topics, worker id, heartbeat).
    """
    from connectors.config import load
    from connectors.errors import ConnectorConfigError
    from connectors.garbage_collection import settle_garbage_collector
    from connectors.metrics import ConnectorMetrics
    from connectors.settings import ConnectSettings
    from connectors.worker import Worker, connect_services
    from hub_core.health import HealthServer
    from hub_kafka.settings import KafkaSettings
    from registry.settings import RegistrySettings

    try:
        loaded = [load(path) for path in files]
    except ConnectorConfigError as exc:
        typer.echo(exc.message, err=True)
        raise typer.Exit(1) from None
    settings = ConnectSettings()
    stop = threading.Event()
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: stop.set())
    metrics = ConnectorMetrics()
    # The health port answers from the start (not ready: "starting"), so that probes do not
    # restart a worker still reaching its database and Kafka; /healthz fails once that takes
    # longer than the stall limit.
    with HealthServer(
        settings.health_host, settings.health_port, name="connectors", metrics=metrics.registry
    ) as health:
        services = connect_services(RegistrySettings(), KafkaSettings(), settings)
        log.info(
            "worker %s running %d connector(s): %s",
            settings.worker_id, len(loaded), ", ".join(c.name for c in loaded),
        )  # fmt: skip
        settle_garbage_collector(settings)
        try:
            worker = Worker(loaded, services=services, settings=settings, metrics=metrics)
            worker.run(stop, health=health)
        finally:
            services.close()
    log.info("worker %s stopped", settings.worker_id)
