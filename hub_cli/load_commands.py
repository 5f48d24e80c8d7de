"""`hub load ...`: run the loader, show its feeds' states, plan a schema change, replay quarantine,
reprocess a table."""

import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

log = logging.getLogger("hub")

load_app = typer.Typer(help="The Spark loaders.", no_args_is_help=True)


@load_app.command("run")
def load_run(
    once: Annotated[
        bool, typer.Option("--once", help="Land what Kafka holds now, then exit.")
    ] = False,
    warehouse: Annotated[
        list[Path] | None,
        typer.Option(
            envvar="HUB_WAREHOUSE_MODEL",
            help="Also keep this warehouse model's star schemas built (see docs/warehouse.md); "
            "repeat it for several models (in HUB_WAREHOUSE_MODEL: paths separated by `:`).",
        ),
    ] = None,
    master: Annotated[
        str | None,
        typer.Option(
            "--master",
            help="Spark master, e.g. spark://127.0.0.1:7077 for `hub spark start`'s cluster "
            "(default HUB_LOADER_MASTER, local[*]).",
        ),
    ] = None,
) -> None:
    """Land every hub topic continuously in bronze Delta tables, until SIGTERM or Ctrl-C.

    Changelog topics are also kept in silver tables; with --warehouse, gold tables too.
    On a cluster (--master spark://...) this process is the driver; executors run the tasks.
    """
    from hub_core.health import HealthServer
    from hub_kafka.settings import KafkaSettings
    from spark_loaders.control.status import serve_status
    from spark_loaders.runner.downstream import Downstream
    from spark_loaders.runner.streams import run_streams
    from spark_loaders.runtime.metrics import LOADER_METRICS
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LoaderSettings

    # Built with the option, not copied: the master is validated like HUB_LOADER_MASTER.
    settings = LoaderSettings(master=master) if master else LoaderSettings()
    health = HealthServer(
        settings.health_host, settings.health_port, name="loader", metrics=LOADER_METRICS.registry
    )
    with health, spark_session(settings) as spark:
        status = serve_status(health, settings, spark)
        downstream = Downstream(spark, settings, warehouse=_model_paths(warehouse or []))
        if not once:
            downstream.start()
        queries = run_streams(
            spark,
            settings,
            KafkaSettings(),
            available_now=once,
            on_stop=downstream.request_stop,
            health=health,
        )
        downstream.stop()
        status.stop()
        if once:
            downstream.catch_up()
        failures = [(q.name, q.exception()) for q in queries if q.exception() is not None]
    for name, error in failures:
        log.error("the loader's query %s stopped on an error: %s", name, error)
    if failures:
        raise typer.Exit(1)


@load_app.command("maintain")
def load_maintain(
    layer: Annotated[
        list[str] | None,
        typer.Option(help="A layer to maintain: bronze, silver or gold (repeat it); default all."),
    ] = None,
    table: Annotated[
        list[str] | None, typer.Option(help="Only this table, e.g. bronze.shop_orders (repeat it).")
    ] = None,
    no_vacuum: Annotated[
        bool, typer.Option("--no-vacuum", help="Compact only; delete no old files.")
    ] = False,
) -> None:
    """Compact the tables' small files (OPTIMIZE) and delete the files older versions no longer
    need (VACUUM, keeping HUB_LOADER_VACUUM_RETENTION_HOURS of history).

    The running loader does this on its own for HUB_LOADER_MAINTENANCE_LAYERS; silver and gold
    change by MERGE, which a concurrent OPTIMIZE can fail, so run this for them while their
    loader is stopped. Exits 1 when a table could not be maintained.
    """
    from hub_cli.progress import progress_bar
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LAYERS, LoaderSettings, check_layers
    from spark_loaders.tables.maintenance import TableMaintenance

    try:
        check_layers(layer or [])
    except ValueError as error:
        raise typer.BadParameter(str(error), param_hint="--layer") from error
    settings = LoaderSettings()
    with spark_session(settings, app_name="hub-maintain") as spark, progress_bar() as progress:
        maintenance = TableMaintenance(spark, settings)
        tables = table or maintenance.tables(layer or LAYERS)
        results = []
        for done, name in enumerate(tables):
            progress.echo(f"{name}: maintaining ...")
            # The bar counts tables; the table's OPTIMIZE and VACUUM name what runs now.
            steps = progress.within(done, len(tables))
            results.append(maintenance.maintain(name, vacuum=not no_vacuum, progress=steps))
        if tables:
            maintained = sum(1 for r in results if not r.error)
            progress(f"maintained {maintained} of {len(tables)} tables", len(tables), len(tables))
    for result in results:
        outcome = (
            f"failed: {result.error}"
            if result.error
            else f"{result.files_before} files -> {result.files_after} "
            f"({result.bytes_after / 1e6:.1f} MB)"
        )
        typer.echo(f"{result.table}: {outcome} in {result.seconds:.1f} s")
    if not results:
        typer.echo("no tables to maintain")
    if any(r.error for r in results):
        raise typer.Exit(1)


def _model_paths(given: list[Path]) -> list[Path]:
    """The model files given, with a `:`-separated list (as `HUB_WAREHOUSE_MODEL` holds one,
    like `PATH`) split into its paths: Typer hands an environment variable over whole."""
    return [Path(part) for path in given for part in str(path).split(os.pathsep) if part]


@load_app.command("plan")
def load_plan(
    subject: Annotated[str, typer.Argument(help="The subject, e.g. `sales.orders-value`.")],
    schema_file: Annotated[Path, typer.Argument(help="The candidate .avsc file.")],
    table_location: Annotated[
        Path | None,
        typer.Option(help="The bronze table's folder (default: found under the warehouse)."),
    ] = None,
) -> None:
    """Show what registering SCHEMA_FILE under SUBJECT would do to its bronze table.

    Exits 1 when records would be quarantined or the registry would refuse the schema.
    """
    from registry.avro import parse
    from spark_loaders.bronze.plan import plan, table_columns_from_log
    from spark_loaders.bronze.reprocess import current_location
    from spark_loaders.bronze.schemas import RegistryClient
    from spark_loaders.settings import LoaderSettings

    if not schema_file.is_file():
        raise typer.BadParameter(f"no such file: {schema_file}")
    if not subject.endswith("-value"):
        raise typer.BadParameter(f"{subject}: bronze tables follow value subjects `<topic>-value`")
    text = schema_file.read_text()
    parse(text)  # an invalid schema fails here with its INVALID_SCHEMA error
    candidate = json.loads(text)
    topic = subject.removesuffix("-value")
    settings = LoaderSettings()
    if table_location is None and not isinstance(settings.warehouse_dir, Path):
        raise typer.BadParameter(
            f"the warehouse is on object storage ({settings.warehouse_dir}): give the bronze "
            "table's folder (a local copy) with --table-location"
        )
    location = table_location or current_location(settings, topic)
    registry = RegistryClient(settings.registry_url, api_key=settings.registry_key)
    try:
        latest = registry.latest(subject)
        verdict = registry.check(subject, text)
    finally:
        registry.close()
    result = plan(
        candidate,
        table=f"bronze.{topic.replace('.', '_')}",
        table_columns=table_columns_from_log(location),
        latest=json.loads(latest.text) if latest else None,
        latest_version=latest.version if latest else None,
    )
    result = replace(result, registry_verdict=(verdict.compatible, verdict.messages))
    typer.echo(result.render())
    if result.refused:
        raise typer.Exit(1)


@load_app.command("status")
def load_status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the statuses as JSON.")] = False,
) -> None:
    """Show each topic's state in the bronze loader (landing, quarantining or parked), then each
    gold table's in the warehouse passes (built, waiting, failed or skipped).

    Exits 1 when a topic is quarantining or parked, or a gold table failed or was skipped, so
    that scripts and probes can alert.
    """
    from dataclasses import asdict

    from spark_loaders.bronze.feed_status import FeedStatusBook
    from spark_loaders.settings import LoaderSettings
    from spark_loaders.types import FeedState, GoldState
    from spark_loaders.warehouse.status import GoldStatusBook

    state_dir = LoaderSettings().state_dir
    statuses = FeedStatusBook.in_checkpoints(state_dir).list()
    gold = GoldStatusBook.in_checkpoints(state_dir).list()
    if as_json:
        body = {"feeds": [asdict(s) for s in statuses], "gold": [asdict(g) for g in gold]}
        typer.echo(json.dumps(body, indent=2))
    elif not statuses:
        typer.echo("the bronze loader has not landed any topic yet")
    lines = [s.describe() for s in statuses] + [g.describe() for g in gold]
    for line in [] if as_json else lines:
        typer.echo(line)
    alerting = any(s.state is not FeedState.LANDING for s in statuses) or any(
        g.state in (GoldState.FAILED, GoldState.SKIPPED) for g in gold
    )
    if alerting:
        raise typer.Exit(1)


@load_app.command("replay")
def load_replay(
    topic: Annotated[str, typer.Argument(help="The topic whose quarantine to replay.")],
) -> None:
    """Decode `quarantine.<topic>` again; land what decodes now in bronze, exactly once."""
    from hub_cli.progress import progress_bar
    from spark_loaders.bronze.replay import replay
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LoaderSettings

    settings = LoaderSettings()
    with spark_session(settings, app_name="hub-replay") as spark, progress_bar() as progress:
        result = replay(spark, settings, topic, progress=progress)
    typer.echo(result.describe())


@load_app.command("reprocess")
def load_reprocess(
    topic: Annotated[str, typer.Argument(help="The topic whose bronze table to rebuild.")],
) -> None:
    """Rebuild `bronze.<topic>` from the earliest retained offset into a new location.

    The old table keeps serving; the running loader swaps the new location in at its next
    micro-batch and lands what arrived meanwhile.
    """
    from hub_cli.progress import progress_bar
    from hub_kafka.settings import KafkaSettings
    from spark_loaders.bronze.reprocess import build
    from spark_loaders.services.session import spark_session
    from spark_loaders.settings import LoaderSettings

    settings = LoaderSettings()
    with spark_session(settings, app_name="hub-reprocess") as spark, progress_bar() as progress:
        result = build(spark, settings, KafkaSettings(), topic, progress=progress)
    request = result.request
    typer.echo(
        f"{request.table}: rebuilt {request.rows} rows into {request.location}; the loader "
        f"swaps it in at its next micro-batch (request {result.request_file})"
    )
