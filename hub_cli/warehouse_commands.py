"""`hub warehouse build`: the star schemas of a declarative model, from silver and bronze."""

from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

warehouse_app = typer.Typer(help="Star schemas from a warehouse model.", no_args_is_help=True)


def demo_model() -> Path:
    """The demo model shipped with the hub (customers, products, orders)."""
    return Path(str(resources.files("hub_cli") / "demo" / "warehouse.yaml"))


@warehouse_app.command("build")
def warehouse_build(
    model: Annotated[
        Path | None,
        typer.Argument(
            envvar="HUB_WAREHOUSE_MODEL", help="The model YAML file (default: the demo model)."
        ),
    ] = None,
) -> None:
    """Catch silver up with bronze, then build or refresh `gold.dim_*` and `gold.fact_*`."""
    from hub_cli.progress import progress_bar
    from spark_loaders.runner.downstream import build_model
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LoaderSettings
    from spark_loaders.warehouse.model import load_model

    path = model or demo_model()
    load_model(path)  # a bad model fails before Spark starts
    settings = LoaderSettings()
    with spark_session(settings, app_name="hub-warehouse") as spark, progress_bar() as progress:
        report = build_model(spark, settings, path, progress=progress)
    typer.echo(report.describe())
