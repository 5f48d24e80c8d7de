"""The `hub` command line."""

import logging
import signal
import sys
import threading
from typing import Annotated

import typer

from hub_cli.logs import configure_logging
from registry.errors import HubError

log = logging.getLogger("hub")

app = typer.Typer(
    help="Integration Hub: schema registry, publish gateway, Kafka and Spark loaders.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
kafka_app = typer.Typer(help="The local single-node Kafka broker (KRaft).", no_args_is_help=True)
db_app = typer.Typer(help="The registry database.", no_args_is_help=True)
api_app = typer.Typer(help="The API server (registry + publish gateway).", no_args_is_help=True)
load_app = typer.Typer(help="The Spark loaders.", no_args_is_help=True)
app.add_typer(kafka_app, name="kafka")
app.add_typer(db_app, name="db")
app.add_typer(api_app, name="api")
app.add_typer(load_app, name="load")


@app.callback()
def _main() -> None:
    configure_logging()


@app.command()
def up(
    demo: Annotated[
        bool, typer.Option(help="Create demo feeds and keep publishing to them.")
    ] = False,
) -> None:
    """Run the whole local stack: Kafka, the API server and the loader, until Ctrl-C."""
    from hub_cli.stack import LocalStack

    LocalStack(demo_feeds=demo).run()


@kafka_app.command("start")
def kafka_start() -> None:
    """Start the local broker (formats its storage on first start) and wait until it is ready."""
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.settings import KafkaSettings

    status = LocalBroker(KafkaSettings()).start()
    typer.echo(f"Kafka is running (pid {status.pid}) on {status.bootstrap_servers}")


@kafka_app.command("stop")
def kafka_stop() -> None:
    """Stop the local broker cleanly."""
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.settings import KafkaSettings

    stopped = LocalBroker(KafkaSettings()).stop()
    typer.echo("Kafka stopped" if stopped else "Kafka was not running")


@kafka_app.command("status")
def kafka_status() -> None:
    """Say whether the local broker runs and answers; exit 1 when it does not run."""
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.settings import KafkaSettings

    status = LocalBroker(KafkaSettings()).status()
    if not status.running:
        typer.echo("Kafka is not running")
        raise typer.Exit(1)
    state = "ready" if status.ready else "starting (not answering yet)"
    typer.echo(f"Kafka is running (pid {status.pid}) on {status.bootstrap_servers}: {state}")


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Apply the registry's Alembic migrations (HUB_REGISTRY_DATABASE_URL)."""
    from registry import migrate
    from registry.settings import RegistrySettings

    migrate.upgrade(RegistrySettings().database_url, revision=revision)
    typer.echo(f"registry database at revision {revision}")


@api_app.command("serve")
def api_serve() -> None:
    """Serve the API (HUB_API_HOST, HUB_API_PORT) until SIGTERM or Ctrl-C."""
    import uvicorn

    from hub_api import ApiSettings, create_app

    settings = ApiSettings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None)


@load_app.command("run")
def load_run() -> None:
    """Land every hub topic continuously in bronze Delta tables, until SIGTERM or Ctrl-C."""
    from hub_kafka.settings import KafkaSettings
    from spark_loaders import BronzeLoader, LoaderSettings, build_session, stop_between_batches

    settings = LoaderSettings()
    spark = build_session(settings)
    query = BronzeLoader(spark, settings, KafkaSettings()).start()
    stop = threading.Event()
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: stop.set())
    try:
        while not stop.is_set() and query.isActive:
            stop.wait(1.0)
    finally:
        log.info("stopping the loader after its current batch")
        stop_between_batches(query)
        spark.stop()
    if query.exception() is not None:
        log.error("the loader stopped on an error: %s", query.exception())
        raise typer.Exit(1)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="A Spark SQL statement.")],
    limit: Annotated[int, typer.Option(help="Rows to show at most.")] = 50,
) -> None:
    """Run one Spark SQL statement on the hub's metastore and print the result."""
    from spark_loaders import LoaderSettings, build_session

    spark = build_session(LoaderSettings(), app_name="hub-sql")
    try:
        spark.sql(query).show(limit, truncate=False)
    finally:
        spark.stop()


def run() -> None:
    """Entry point: domain errors become a one-line message and exit code 2."""
    try:
        app()
    except HubError as exc:
        log.error("%s (error %d)", exc.message, int(exc.code))
        sys.exit(2)


if __name__ == "__main__":
    run()
