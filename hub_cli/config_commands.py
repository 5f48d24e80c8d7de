"""`hub config check`: what the settings describe, checked before anything starts.

The deployment's settings come from the environment and the config file `HUB_CONFIG_FILE` names
(`hub_core.config_file`). This command reads every component's settings class, as the processes
will, and prints the deployment they describe: Kafka and its security, the registry database,
the tables' storage, the Spark master and the metastore. Secrets show as `(set)`, never their
value. It exits 2 when a value is invalid or a `HUB_*` name is read by no component (a typo).
"""

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from pydantic import SecretStr
from pydantic_settings import BaseSettings
from typer.core import TyperGroup

from hub_core.config_file import CONFIG_FILE_VARIABLE
from hub_core.environment import is_secret
from hub_core.errors import ErrorCode, TerminalError

config_app = typer.Typer(
    help="The hub's settings: environment and config file.", no_args_is_help=True
)

# Variables read straight from the environment, by no settings class and no command option.
DIRECT_VARIABLES = frozenset({"HUB_HOME", "HUB_LOG_LEVEL", "HUB_LOG_FORMAT"})


class UnknownSettings(TerminalError):
    code = ErrorCode.INVALID_SETTING


@dataclass(frozen=True)
class Component:
    """One component's settings, as its processes will read them."""

    title: str
    settings: BaseSettings

    @property
    def prefix(self) -> str:
        return str(self.settings.model_config.get("env_prefix", "")).upper()

    def names(self) -> set[str]:
        return {self.prefix + name.upper() for name in type(self.settings).model_fields}

    def shown(self, name: str) -> str:
        value = getattr(self.settings, name)
        if value is None:
            return "(not set)"
        if isinstance(value, SecretStr) or is_secret(self.prefix + name.upper()):
            return "(set)"
        return str(getattr(value, "value", value))


def components() -> list[Component]:
    """Every component's settings, read now from the environment."""
    from connectors.settings import ConnectSettings
    from hub_api.settings import ApiSettings
    from hub_cli.settings import StackSettings
    from hub_kafka.settings import KafkaSettings
    from registry.settings import RegistrySettings
    from spark_loaders.services.analyst_settings import AnalystSettings
    from spark_loaders.services.cluster_settings import ClusterSettings
    from spark_loaders.settings import LoaderSettings

    classes: list[tuple[str, type[BaseSettings]]] = [
        ("Kafka", KafkaSettings),
        ("Registry", RegistrySettings),
        ("API", ApiSettings),
        ("Connectors", ConnectSettings),
        ("Loader", LoaderSettings),
        ("Spark cluster", ClusterSettings),
        ("Analyst server", AnalystSettings),
        ("hub up", StackSettings),
    ]
    return [Component(title, cls()) for title, cls in classes]


def describe(found: list[Component]) -> list[str]:
    """The deployment in a few lines: where each engine is and how the hub reaches it."""
    by_title = {component.title: component for component in found}
    kafka, registry = by_title["Kafka"], by_title["Registry"]
    loader, api = by_title["Loader"], by_title["API"]
    protocol = kafka.shown("security_protocol")
    security = protocol
    if protocol.startswith("SASL"):
        security += f" ({kafka.shown('sasl_mechanism')} as {kafka.shown('sasl_username')})"
    replication = kafka.shown("replication_factor")
    insync = kafka.shown("min_insync_replicas")
    metastore = loader.shown("metastore_uris")
    if metastore == "(not set)":
        metastore = (
            "local Derby server"
            if loader.shown("metastore_url") == "(not set)"
            else f"JDBC {loader.shown('metastore_url')}"
        )
    s3 = loader.shown("s3_endpoint")
    checkpoints = loader.shown("checkpoint_dir")
    lines = [
        ("Kafka", f"{kafka.shown('bootstrap_servers')} over {security}"),
        ("", f"new feeds: replication {_or_cluster(replication)}, "
             f"min.insync.replicas {_or_cluster(insync)}; producers use acks=all"),
        ("Registry", _database(registry.settings)),
        ("API", f"{api.shown('host')}:{api.shown('port')}, {api.shown('workers')} worker(s)"),
        ("Tables", loader.shown("warehouse_dir")),
        ("Checkpoints", checkpoints + ("" if s3 == "(not set)" else f" (S3 endpoint {s3})")),
        ("Spark", loader.shown("master")),
        ("Metastore", metastore),
    ]  # fmt: skip
    return [f"{label + ':' if label else '':<13}{text}" for label, text in lines]


def _or_cluster(shown: str) -> str:
    return "from the cluster's size" if shown == "(not set)" else shown


def _database(settings: Any) -> str:
    """The registry database URL without its password."""
    from sqlalchemy.engine import make_url

    return make_url(settings.database_url).render_as_string(hide_password=True)


def cli_variables(command: Any) -> set[str]:
    """The environment variables the options and arguments of `command` and its subcommands
    fall back to (`HUB_CONFIG_FILE`, `HUB_API_KEY`, ...)."""
    found: set[str] = set()
    for param in command.get_params(typer.Context(command)):
        envvar = param.envvar
        found.update([envvar] if isinstance(envvar, str) else envvar or [])
    if isinstance(command, TyperGroup):
        context = typer.Context(command)
        for name in command.list_commands(context):
            found |= cli_variables(command.get_command(context, name))
    return found


def unknown_names(names: Iterable[str], found: list[Component], cli: Any) -> list[str]:
    """`HUB_*` names no component reads and no option or argument of the command line `cli`
    falls back to."""
    known = set(DIRECT_VARIABLES) | cli_variables(cli)
    known = known.union(*(component.names() for component in found))
    return sorted(name for name in names if name.startswith("HUB_") and name not in known)


@config_app.command("check")
def config_check(
    ctx: typer.Context,
    all_settings: Annotated[
        bool,
        typer.Option(
            "--all", help="Also list every setting of every component; * marks those set."
        ),
    ] = False,
) -> None:
    """Read every component's settings as its processes will, and print what they describe.

    Exits 2 when a value is invalid, or a HUB_* variable (in the environment or the config
    file) is read by no component.
    """
    found = components()
    from_file = os.environ.get(CONFIG_FILE_VARIABLE)
    if from_file:
        typer.echo(f"Config file: {from_file} (the environment overrides it)")
    for line in describe(found):
        typer.echo(line)
    if all_settings:
        for component in found:
            typer.echo(f"\n{component.title}:")
            for name in type(component.settings).model_fields:
                mark = "*" if name in component.settings.model_fields_set else " "
                typer.echo(f"{mark} {component.prefix}{name.upper()}={component.shown(name)}")
    # The whole `hub` command line, this command's root: the options it reads count as known.
    unknown = unknown_names(os.environ, found, ctx.find_root().command)
    if unknown:
        raise UnknownSettings(
            f"no component reads {', '.join(unknown)}: a misspelt setting? "
            "`hub config check --all` lists what each component reads"
        )
