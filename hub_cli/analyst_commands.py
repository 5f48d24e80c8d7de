"""Commands for querying the hub's tables: `hub sql`, `hub analyst serve`, `hub metastore ...`."""

import logging
import signal
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from hub_cli.service_commands import add_service_commands

if TYPE_CHECKING:
    from spark_loaders.services.metastore import MetastoreServer

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
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            envvar="HUB_API_KEY",
            help="Run the statement through the analysts' server with this API key: only "
            "allowed SQL, over the tables the key's team may read.",
        ),
    ] = None,
) -> None:
    """Run one Spark SQL statement on the hub's tables and print the result.

    With a key (`--key` or HUB_API_KEY), the statement goes through the analysts' server
    (HUB_ANALYST_HOST, HUB_ANALYST_PORT), which checks it and the key's read grants. Without
    one, it runs in a Spark session of this machine's operator, on the shared metastore
    (started here if needed), reading the warehouse's files directly; it works while the
    loader runs.
    """
    if key:
        _sql_through_the_analysts_server(query, key=key, limit=limit)
        return
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LoaderSettings

    with spark_session(LoaderSettings(), app_name="hub-sql") as spark:
        spark.sql(query).show(limit, truncate=False)


def _sql_through_the_analysts_server(query: str, *, key: str, limit: int) -> None:
    """Run `query` on the analysts' server, logged in with `key`, and print up to `limit` rows."""
    from impala.dbapi import connect
    from impala.error import Error as ImpalaError
    from thrift.transport.TTransport import TTransportException

    from hub_cli.errors import AnalystServerUnavailable, SqlRefused
    from spark_loaders.services.analyst_settings import AnalystSettings

    settings = AnalystSettings()
    where = f"{settings.host}:{settings.port}"
    try:
        connection = connect(
            host=settings.host,
            port=settings.port,
            auth_mechanism="PLAIN",
            user="hub-sql",
            password=key,
            timeout=60,
        )
    except (TTransportException, OSError) as error:
        raise AnalystServerUnavailable(
            f"Cannot log in to the analysts' server at {where}: {error}. Start it (`hub up "
            "--analyst` or `hub analyst serve`), or check the key."
        ) from error
    try:
        cursor = connection.cursor()
        try:
            cursor.execute(query)
            columns = [column[0] for column in cursor.description or []]
            rows = cursor.fetchmany(limit) if columns else []
        except ImpalaError as error:
            raise SqlRefused(_server_message(error)) from error
        finally:
            cursor.close()
    except (TTransportException, OSError) as error:
        raise AnalystServerUnavailable(
            f"The analysts' server at {where} stopped answering: {error}"
        ) from error
    finally:
        connection.close()
    _print_rows(columns, rows)


def _server_message(error: Exception) -> str:
    """The analysts' server's reason, without the driver's wrapping of it."""
    text = str(error)
    marker = "errorMessage="
    if marker in text:
        text = text.split(marker, 1)[1].strip().strip("')\"")
    return text.splitlines()[0] if text else type(error).__name__


def _print_rows(columns: list[str], rows: list[tuple[object, ...]]) -> None:
    """Print `rows` under their `columns`, one `|`-separated line each, as `hub sql` does."""
    if not columns:
        typer.echo("(no result)")
        return
    cells = [["NULL" if value is None else str(value) for value in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(values: list[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    typer.echo("\n".join([rule, line(columns), rule, *map(line, cells), rule]))


def _metastore_server() -> "MetastoreServer":
    from spark_loaders.services.metastore import MetastoreServer
    from spark_loaders.settings import LoaderSettings

    return MetastoreServer(LoaderSettings())


def _local_metastore_configured() -> bool:
    """Print which metastore the settings select; True when it is the local server."""
    from spark_loaders.services import metastore
    from spark_loaders.settings import LoaderSettings

    settings = LoaderSettings()
    typer.echo(f"Configured: {metastore.describe(settings)}")
    if metastore.metastore_kind(settings) is not metastore.MetastoreKind.LOCAL_SERVER:
        typer.echo("The local server is not used (HUB_LOADER_METASTORE_URIS or _URL is set)")
        return False
    return True


add_service_commands(
    metastore_app,
    name="Metastore server",
    build=_metastore_server,
    address=lambda server: server.address,
    starting="starting (not accepting connections yet)",
    help_start="Start the local metastore server and wait until it accepts connections.",
    help_stop="Shut the local metastore server down cleanly.",
    help_status="Say which metastore is configured and whether the local server runs; exit 1 "
    "if not.",
    started=lambda server: [f"  data and log: {server.home}"],
    before_status=_local_metastore_configured,
)


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
    """Serve the tables over JDBC/ODBC (Spark Thrift Server) until SIGTERM or Ctrl-C.

    Logins need a hub API key as the password unless HUB_ANALYST_AUTH=none, which is refused
    on any address but loopback.
    """
    from spark_loaders.services.analyst import ThriftServer, require_safe_exposure, thrift_conf
    from spark_loaders.services.analyst_settings import AnalystAuth, AnalystSettings
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LoaderSettings

    overrides = {k: v for k, v in {"port": port, "host": host}.items() if v is not None}
    settings = AnalystSettings(**overrides)  # type: ignore[arg-type]
    # Before Spark starts: an unsafe setting fails in a second, not after the session is up.
    require_safe_exposure(settings)
    loader = LoaderSettings()
    conf = thrift_conf(settings, loader)
    with spark_session(loader, app_name="hub-analyst", extra_conf=conf) as spark:
        server = ThriftServer(spark, settings)
        stop = threading.Event()
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, lambda *_: stop.set())
        try:
            server.start()
            password = "<a hub API key>" if settings.auth is AnalystAuth.HUB_KEYS else "-"
            log.info(
                "from Python: impala.dbapi.connect(host=%r, port=%d, auth_mechanism='PLAIN', "
                "user='<your team>', password='%s')",
                settings.host,
                settings.port,
                password,
            )
            while not stop.wait(1.0):
                pass
        finally:
            log.info("stopping the analyst server")
            server.stop()
