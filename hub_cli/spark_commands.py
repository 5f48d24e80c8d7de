"""`hub spark start|stop|status`: the local Spark standalone cluster the loader can run on.

Shaped like `hub kafka ...` and `hub metastore ...`, with one addition: `start --workers N`.
"""

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from spark_loaders.services.cluster import ClusterStatus, LocalCluster

spark_app = typer.Typer(
    help="The local Spark standalone cluster: a master and workers, each a JVM of its own.",
    no_args_is_help=True,
)


def _cluster() -> "LocalCluster":
    # Built inside each command, so that `hub --help` reads no settings.
    from spark_loaders.services.cluster import LocalCluster
    from spark_loaders.services.cluster_settings import ClusterSettings

    return LocalCluster(ClusterSettings())


def _echo(status: "ClusterStatus") -> None:
    typer.echo(status.master.describe())
    for worker in status.workers:
        typer.echo(f"  {worker.describe()}")


@spark_app.command("start")
def spark_start(
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=1, help="Workers to run (default HUB_SPARK_WORKERS, 2)."),
    ] = None,
) -> None:
    """Start the master and the workers not running yet; wait until each worker registered."""
    cluster = _cluster()
    _echo(cluster.start(workers=workers))
    typer.echo(f"  state and logs: {cluster.home}")
    typer.echo(f"  run the loader on it: hub load run --master {cluster.master_url}")


@spark_app.command("stop")
def spark_stop() -> None:
    """Stop the workers (and their executors), then the master."""
    stopped = _cluster().stop()
    typer.echo("Spark cluster stopped" if stopped else "Spark cluster was not running")


@spark_app.command("status")
def spark_status() -> None:
    """Say whether the master and each worker run and serve; exit 1 when the master does not."""
    status = _cluster().status()
    _echo(status)
    if not status.running:
        raise typer.Exit(1)
