"""The `hub` command line."""

import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import ValidationError

from hub_cli import analyst_commands
from hub_cli.config_commands import config_app
from hub_cli.connect_commands import connect_app
from hub_cli.feed_commands import feed_app
from hub_cli.lineage_commands import lineage_app
from hub_cli.load_commands import load_app
from hub_cli.logs import configure_logging
from hub_cli.service_commands import add_service_commands
from hub_cli.spark_commands import spark_app
from hub_cli.warehouse_commands import warehouse_app
from hub_core.config_file import CONFIG_FILE_VARIABLE, apply_config_file
from hub_core.errors import ErrorCode, HubError
from hub_core.settings import invalid_settings_message

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from catalog import types as catalog_types
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.local_cluster import LocalCluster

log = logging.getLogger("hub")

app = typer.Typer(
    help="Integration Hub: schema registry, publish gateway, Kafka and Spark loaders.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
kafka_app = typer.Typer(
    help="The local Kafka broker (KRaft), or a local cluster of several.", no_args_is_help=True
)
db_app = typer.Typer(help="The registry database.", no_args_is_help=True)
api_app = typer.Typer(help="The API server (registry + publish gateway).", no_args_is_help=True)
team_app = typer.Typer(help="Teams, which own feeds.", no_args_is_help=True)
key_app = typer.Typer(help="API keys of teams (and admin keys).", no_args_is_help=True)
schema_app = typer.Typer(
    help="Schema files against a registry or a git revision (for CI).", no_args_is_help=True
)
app.add_typer(kafka_app, name="kafka")
app.add_typer(db_app, name="db")
app.add_typer(api_app, name="api")
app.add_typer(load_app, name="load")
app.add_typer(schema_app, name="schema")
app.add_typer(team_app, name="team")
app.add_typer(key_app, name="key")
analyst_commands.register(app)  # sql, metastore, analyst
app.add_typer(connect_app, name="connect")
app.add_typer(warehouse_app, name="warehouse")
app.add_typer(spark_app, name="spark")
app.add_typer(config_app, name="config")
app.add_typer(lineage_app, name="lineage")
app.add_typer(feed_app, name="feed")


@app.callback()
def _main(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            envvar=CONFIG_FILE_VARIABLE,
            help="A file of HUB_*=value settings describing the deployment; variables set in "
            "the environment win over it (see docs/production.md).",
        ),
    ] = None,
) -> None:
    try:
        if config is not None:
            os.environ[CONFIG_FILE_VARIABLE] = str(config)  # for the processes hub starts
            apply_config_file()
    finally:
        configure_logging()  # after the file: it may set HUB_LOG_LEVEL


@app.command()
def up(
    demo: Annotated[
        bool, typer.Option(help="Create demo feeds and keep publishing to them.")
    ] = False,
    analyst: Annotated[
        bool, typer.Option(help="Also serve the tables over JDBC/ODBC (`hub analyst serve`).")
    ] = False,
) -> None:
    """Run the whole local stack: Kafka, the metastore, the API server and the loader.

    A part that exits is restarted (HUB_UP_* settings); Ctrl-C or SIGTERM stops everything.
    """
    from hub_cli.stack import LocalStack

    LocalStack(demo_feeds=demo, analyst_server=analyst).run()


def _local_broker() -> "LocalBroker | LocalCluster":
    """The local cluster when one was started under the broker home and runs, else the single
    broker: `stop` and `status` then cover every node without being told the size."""
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.local_cluster import LocalCluster
    from hub_kafka.settings import KafkaSettings

    settings = KafkaSettings()
    cluster = LocalCluster.found(settings)
    if cluster is not None and cluster.status().running:
        return cluster
    return LocalBroker(settings)


def _kafka_start(
    sasl_ssl: Annotated[
        bool,
        typer.Option(
            "--sasl-ssl",
            help="Serve clients over SASL_SSL (SCRAM, a CA made under the broker's home) "
            "instead of PLAINTEXT; the same as HUB_KAFKA_BROKER_SECURITY=sasl_ssl.",
        ),
    ] = False,
    brokers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Run a cluster of this many nodes (each a broker and a controller, in a JVM of "
            "its own, ports counting up from HUB_KAFKA_BROKER_PORT and "
            "HUB_KAFKA_CONTROLLER_PORT in steps of 2). 3 keeps serving with one node down.",
        ),
    ] = 1,
) -> None:
    """Start the local broker (or cluster) and print the settings clients connect with."""
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.local_cluster import LocalCluster
    from hub_kafka.security import client_environment
    from hub_kafka.settings import BrokerSecurity, KafkaSettings

    settings = KafkaSettings()
    if sasl_ssl:
        settings = settings.model_copy(update={"broker_security": BrokerSecurity.SASL_SSL})
    broker = LocalBroker(settings) if brokers == 1 else LocalCluster(settings, brokers=brokers)
    status = broker.start()
    typer.echo(f"Kafka is running (pid {status.pid}) on {broker.bootstrap_servers}")
    if broker.secured:
        typer.echo("Clients connect with (the password is in the file named):")
        for name, value in client_environment(broker.client_settings()).items():
            typer.echo(f"  {name}={value}")


add_service_commands(
    kafka_app,
    name="Kafka",
    build=_local_broker,
    address=lambda broker: broker.bootstrap_servers,
    starting="starting (not answering yet)",
    help_start="Start the local broker, or with --brokers N a cluster (formats storage on first "
    "start), and wait until it is ready.",
    help_stop="Stop the local broker, or every node of the local cluster, cleanly.",
    help_status="Say whether the local broker (or every cluster node) runs and answers; exit 1 "
    "when none runs.",
    start_command=_kafka_start,
)


@db_app.command("upgrade")
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Apply the registry's Alembic migrations (HUB_REGISTRY_DATABASE_URL)."""
    from migrations import migrate
    from registry.settings import RegistrySettings

    migrate.upgrade(RegistrySettings().database_url, revision=revision)
    typer.echo(f"registry database at revision {revision}")


@api_app.command("serve")
def api_serve() -> None:
    """Serve the API (HUB_API_HOST, HUB_API_PORT) until SIGTERM or Ctrl-C."""
    from hub_api import ApiSettings
    from hub_api.server import serve

    serve(ApiSettings(), setup_worker=configure_logging)


SchemaPaths = Annotated[
    list[Path], typer.Argument(help=".avsc files, or directories searched for them.")
]
RegistryUrl = Annotated[
    str | None,
    typer.Option("--registry", envvar="HUB_REGISTRY_URL", help="Base URL of the registry."),
]
ApiKey = Annotated[
    str | None,
    typer.Option("--key", envvar="HUB_API_KEY", help="API key (registering needs one)."),
]
MappingFile = Annotated[
    Path | None,
    typer.Option(
        "--subjects", help="YAML mapping of files to subjects (default: file name + '-value')."
    ),
]


@schema_app.command("check")
def schema_check(
    paths: SchemaPaths,
    registry: RegistryUrl = None,
    against: Annotated[
        str | None,
        typer.Option("--against", help="Check offline against this git revision instead."),
    ] = None,
    subjects: MappingFile = None,
    key: ApiKey = None,
    output_format: Annotated[str, typer.Option("--format", help="text, json or junit.")] = "text",
    output: Annotated[
        Path | None, typer.Option("--output", help="Write the report here instead of stdout.")
    ] = None,
) -> None:
    """Exit 1 if any schema change would be rejected by its subject's compatibility level."""
    from hub_cli import schema_check as sc

    fmt = sc.OutputFormat(output_format)
    mapping, base = sc.SubjectMapping.load(subjects)
    files = sc.expand(paths)
    if against is not None:
        results = sc.check_against_revision(files, revision=against, mapping=mapping, base=base)
    elif registry is not None:
        results = sc.check_with_registry(
            files, registry_url=registry, mapping=mapping, base=base, api_key=key
        )
    else:
        raise sc.SchemaCheckError("Give --registry URL, or --against GIT_REF to check offline.")
    report = sc.render(results, fmt)
    if output is not None:
        output.write_text(report + "\n")
        typer.echo(sc.render(results, sc.OutputFormat.TEXT).splitlines()[-1])
    else:
        typer.echo(report)
    if any(r.failed for r in results):
        raise typer.Exit(1)


@schema_app.command("register")
def schema_register(
    paths: SchemaPaths,
    registry: RegistryUrl = None,
    subjects: MappingFile = None,
    key: ApiKey = None,
) -> None:
    """Register schema files under their subjects (stops at the first refusal)."""
    from hub_cli import schema_check as sc

    if registry is None:
        raise sc.SchemaCheckError("Give --registry URL (or set HUB_REGISTRY_URL).")
    mapping, base = sc.SubjectMapping.load(subjects)
    for path, subject, schema_id in sc.register_files(
        sc.expand(paths), registry_url=registry, mapping=mapping, base=base, api_key=key
    ):
        typer.echo(f"{path}: registered under {subject} as schema id {schema_id}")


@app.command("publish")
def publish(
    feed: Annotated[str, typer.Argument(help="The feed (topic) to publish to.")],
    path: Annotated[Path, typer.Argument(help="A JSON-lines file, one record per line.")],
    api: Annotated[
        str, typer.Option("--api", envvar="HUB_API_URL", help="Base URL of the hub's API.")
    ] = "http://127.0.0.1:8080",
    key: Annotated[
        str | None, typer.Option("--key", envvar="HUB_API_KEY", help="API key of the feed's team.")
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1, help="Records per request.")] = 500,
    values: Annotated[
        bool, typer.Option("--values", help='Each line is a value, not {"value": ..., "key": ...}.')
    ] = False,
    on_error: Annotated[
        str, typer.Option(help="reject, or dlq: invalid records to <feed>.dlq.")
    ] = ("reject"),
    rejects: Annotated[
        Path | None, typer.Option(help="Write each failed line and its error here (JSON lines).")
    ] = None,
) -> None:
    """Publish a JSON-lines file through the API in batches; exit 1 if any record failed.

    Re-running the same command publishes nothing twice: each batch carries an
    Idempotency-Key made from the file's content and the batch's place in it.
    """
    from hub_cli.publish_file import publish_file

    if not path.is_file():
        raise typer.BadParameter(f"no such file: {path}")
    summary = publish_file(
        api_url=api, api_key=key, feed=feed, path=path, batch_size=batch_size,
        values=values, on_error=on_error,
    )  # fmt: skip
    typer.echo(summary.describe())
    if rejects is not None and summary.failures:
        rejects.write_text("".join(json.dumps(f) + "\n" for f in summary.failures))
        typer.echo(f"failed lines and their errors: {rejects}")
    if summary.failed:
        raise typer.Exit(1)


def _catalog_engine() -> "Engine":
    """The hub's database, migrated to the newest revision."""
    from hub_core.database import create_database_engine
    from migrations import migrate
    from registry.settings import RegistrySettings

    url = RegistrySettings().database_url
    migrate.upgrade(url)
    return create_database_engine(url)


@team_app.command("create")
def team_create(name: Annotated[str, typer.Argument(help="Team name, e.g. `payments`.")]) -> None:
    """Create a team (in HUB_REGISTRY_DATABASE_URL)."""
    from catalog.teams import TeamStore
    from catalog.types import TeamName

    TeamStore(_catalog_engine()).register(name=TeamName(name))
    typer.echo(f"team {name} created")


@team_app.command("list")
def team_list() -> None:
    """List the teams."""
    from catalog.teams import TeamStore

    for team in TeamStore(_catalog_engine()).list():
        typer.echo(team.name)


@key_app.command("create")
def key_create(
    team: Annotated[str | None, typer.Option(help="The team the key acts for.")] = None,
    admin: Annotated[bool, typer.Option(help="An admin key (all feeds and settings).")] = False,
    loader: Annotated[
        bool,
        typer.Option(help="A key for the loader: it reads schemas and feeds, and changes nothing."),
    ] = False,
) -> None:
    """Create an API key; the key is printed once, only its hash is stored."""
    from catalog.teams import TeamStore
    from catalog.types import TeamName

    if (team is not None) + admin + loader != 1:
        raise typer.BadParameter("give one of --team TEAM, --admin or --loader")
    key, token = TeamStore(_catalog_engine()).create_key(
        team=TeamName(team) if team else None, admin=admin, loader=loader
    )
    typer.echo(f"key id {key.key_id} for {_holder(key)}")
    typer.echo(token)


def _holder(key: "catalog_types.ApiKey") -> str:
    """Whom a key acts for, as `hub key` prints it: `team sales`, `admin` or `loader`."""
    return f"team {key.team}" if key.team is not None else str(key.role)


@key_app.command("revoke")
def key_revoke(key_id: Annotated[str, typer.Argument(help="The key id (not the key).")]) -> None:
    """Revoke an API key; it stops working within HUB_API_KEY_CACHE_SECONDS."""
    from catalog.teams import TeamStore

    TeamStore(_catalog_engine()).revoke(key_id=key_id)
    typer.echo(f"key {key_id} revoked")


@key_app.command("list")
def key_list(
    team: Annotated[str | None, typer.Option(help="Only this team's keys.")] = None,
) -> None:
    """List API keys (ids, owners, state), never their secrets."""
    from catalog.teams import TeamStore
    from catalog.types import TeamName

    for key in TeamStore(_catalog_engine()).keys(team=TeamName(team) if team else None):
        state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
        created = f"created {key.created_at:%Y-%m-%d %H:%M}"
        typer.echo(f"{key.key_id}  {_holder(key)}  {created}  {state}")


def run() -> None:
    """Entry point: domain errors and invalid settings become one line and exit code 2."""
    try:
        app()
    except HubError as exc:
        log.error("%s (error %d)", exc.message, int(exc.code))
        sys.exit(2)
    except ValidationError as exc:
        message = invalid_settings_message(exc)
        if message is None:
            raise
        log.error("%s (error %d)", message, int(ErrorCode.INVALID_SETTING))
        sys.exit(2)


if __name__ == "__main__":
    run()
