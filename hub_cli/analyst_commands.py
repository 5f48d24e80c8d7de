"""Commands for querying the hub's tables: `hub sql`, `hub analyst serve`, `hub metastore ...`."""

import logging
import signal
import threading
from typing import Annotated

import typer

log = logging.getLogger("hub")

metastore_app = typer.Typer(
    help="The local Hive metastore server (Derby), shared by the loader and analysts.",
    no_args_is_help=True,
)
analyst_app = typer.Typer(
    help="Analyst access to the tables over JDBC/ODBC (Spark Thrift Server).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add `sql`, `metastore` and `analyst` to the `hub` command."""
    app.command("sql")(sql)
    app.add_typer(metastore_app, name="metastore")
    app.add_typer(analyst_app, name="analyst")


def sql(
    query: Annotated[str, typer.Argument(help="A Spark SQL statement.")],
    limit: Annotated[int, typer.Option(help="Rows to show at most.")] = 50,
) -> None:
    """Run one Spark SQL statement on the hub's metastore and print the result.

    Works while the loader runs: both use the shared metastore (started here if needed).
    """
    from spark_loaders import LoaderSettings, build_session

    spark = build_session(LoaderSettings(), app_name="hub-sql")
    try:
        spark.sql(query).show(limit, truncate=False)
    finally:
        spark.stop()


@metastore_app.command("start")
def metastore_start() -> None:
    """Start the local metastore server and wait until it accepts connections."""
    from spark_loaders.metastore import MetastoreServer
    from spark_loaders.settings import LoaderSettings

    server = MetastoreServer(LoaderSettings())
    status = server.start()
    typer.echo(f"Metastore server is running (pid {status.pid}) on {status.address}")
    typer.echo(f"  data and log: {server.home}")


@metastore_app.command("stop")
def metastore_stop() -> None:
    """Shut the local metastore server down cleanly."""
    from spark_loaders.metastore import MetastoreServer
    from spark_loaders.settings import LoaderSettings

    stopped = MetastoreServer(LoaderSettings()).stop()
    typer.echo("Metastore server stopped" if stopped else "Metastore server was not running")


@metastore_app.command("status")
def metastore_status() -> None:
    """Say which metastore is configured and whether the local server runs; exit 1 if not."""
    from spark_loaders import metastore
    from spark_loaders.settings import LoaderSettings

    settings = LoaderSettings()
    typer.echo(f"Configured: {metastore.describe(settings)}")
    if metastore.metastore_kind(settings) is not metastore.MetastoreKind.LOCAL_SERVER:
        typer.echo("The local server is not used (HUB_LOADER_METASTORE_URIS or _URL is set)")
        return
    status = metastore.MetastoreServer(settings).status()
    if not status.running:
        typer.echo("Metastore server is not running")
        raise typer.Exit(1)
    state = "ready" if status.ready else "starting (not accepting connections yet)"
    typer.echo(f"Metastore server is running (pid {status.pid}) on {status.address}: {state}")


@analyst_app.command("serve")
def analyst_serve(
    port: Annotated[
        int | None, typer.Option(help="HiveServer2 port (default HUB_ANALYST_PORT, 10000).")
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(help="Address to bind (default HUB_ANALYST_HOST, 127.0.0.1)."),
    ] = None,
) -> None:
    """Serve the tables over JDBC/ODBC (Spark Thrift Server) until SIGTERM or Ctrl-C."""
    from spark_loaders import LoaderSettings, build_session
    from spark_loaders.analyst import ThriftServer, thrift_conf
    from spark_loaders.analyst_settings import AnalystSettings

    overrides = {k: v for k, v in {"port": port, "host": host}.items() if v is not None}
    settings = AnalystSettings(**overrides)  # type: ignore[arg-type]
    spark = build_session(
        LoaderSettings(), app_name="hub-analyst", extra_conf=thrift_conf(settings)
    )
    server = ThriftServer(spark, settings)
    stop = threading.Event()
    for stop_signal in (signal.SIGINT, signal.SIGTERM):
        signal.signal(stop_signal, lambda *_: stop.set())
    try:
        server.start()
        log.info(
            "from Python: impala.dbapi.connect(host=%r, port=%d, auth_mechanism='PLAIN', "
            "user='<you>', password='<anything>')",
            settings.host,
            settings.port,
        )
        while not stop.wait(1.0):
            pass
    finally:
        log.info("stopping the analyst server")
        server.stop()
        spark.stop()
