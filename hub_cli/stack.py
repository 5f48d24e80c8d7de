"""`hub up`: the whole local stack (Kafka, metastore, API, loader) on one machine, until Ctrl-C.

A part that exits is restarted (`hub_cli.supervisor`); only Ctrl-C or SIGTERM stops the hub.
"""

import contextlib
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from catalog.errors import TeamExists
from catalog.teams import TeamStore
from catalog.types import KeyRole, TeamName
from hub_api.settings import ApiSettings
from hub_cli import demo
from hub_cli.errors import StackError
from hub_cli.local_keys import key_file, local_key, private_home
from hub_cli.settings import StackSettings
from hub_cli.supervisor import ChildExit, ChildSpec, RestartPolicy, Supervisor, exit_status
from hub_cli.warehouse_commands import demo_model
from hub_core.database import create_database_engine
from hub_core.environment import child_environment
from hub_core.naming import TopicName, bronze_table
from hub_core.settings import default_home
from hub_kafka.local_broker import LocalBroker
from hub_kafka.security import client_environment
from hub_kafka.settings import KafkaSettings
from migrations import migrate
from registry.settings import RegistrySettings
from spark_loaders.services import metastore
from spark_loaders.services.analyst_settings import AnalystSettings
from spark_loaders.services.metastore import MetastoreKind, MetastoreServer, metastore_kind
from spark_loaders.settings import LoaderSettings

log = logging.getLogger(__name__)


# The Kafka login of every child that talks to Kafka (SASL password, client key password).
KAFKA_SECRETS = frozenset({"HUB_KAFKA_SASL_PASSWORD", "HUB_KAFKA_SSL_KEY_PASSWORD"})

# The hub secrets each child of `hub up` needs; it gets no other (see hub_core.environment).
# The metastore server and the Kafka broker are JVMs that need none (`BackgroundProcess`).
# The loader's registry key is its own (`KeyRole.LOADER`): it reads, and changes nothing.
# The object storage keys of `s3a://` tables and checkpoints (docs/production.md).
S3_SECRETS = frozenset({"HUB_LOADER_S3_ACCESS_KEY", "HUB_LOADER_S3_SECRET_KEY"})
CHILD_SECRETS: dict[str, frozenset[str]] = {
    # The registry and catalog database.
    "API server": frozenset({"HUB_REGISTRY_DATABASE_URL", *KAFKA_SECRETS}),
    # Schemas by id from the API, and the metastore database.
    "loader": frozenset(
        {
            "HUB_LOADER_REGISTRY_KEY",
            "HUB_LOADER_METASTORE_URL",
            "HUB_LOADER_METASTORE_PASSWORD",
            *KAFKA_SECRETS,
            *S3_SECRETS,
        }
    ),
    # The metastore database and the tables' storage: it reads tables, never the registry.
    "analyst server": frozenset(
        {"HUB_LOADER_METASTORE_URL", "HUB_LOADER_METASTORE_PASSWORD", *S3_SECRETS}
    ),
}


@dataclass(frozen=True, slots=True)
class LoaderControl:
    """Where `hub up`'s loader serves /status, /plan and /replay, and the run's token for them:
    made anew by each run (`new`), given to the loader and the API only, never logged."""

    host: str
    port: int
    token: str = field(repr=False)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @classmethod
    def new(cls, settings: LoaderSettings) -> "LoaderControl":
        """The loader's health port (a free one when HUB_LOADER_HEALTH_PORT is unset) and a
        fresh token."""
        host = settings.health_host if settings.health_host not in ("", "0.0.0.0") else "127.0.0.1"
        return cls(host, settings.health_port or _free_port(host), secrets.token_urlsafe(32))


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def child_env(
    name: str,
    *,
    parent: Mapping[str, str],
    bootstrap_servers: str,
    api_url: str,
    loader_key: str,
    kafka: Mapping[str, str] | None = None,
    loader_control: "LoaderControl | None" = None,
) -> dict[str, str]:
    """The environment of the `hub up` child `name`: `parent`'s without the secrets it does not
    need, with the local broker's address (and, in `kafka`, how to log in to it), for the
    loader the API's address and its key (`loader_key`, unless the environment names one),
    and for the analyst server the API's address (it
    checks the keys of logins there). With `loader_control`, the loader serves its control
    routes on its health port and the API is told where, both with the run's token."""
    extra = {**(kafka or {}), "HUB_KAFKA_BOOTSTRAP_SERVERS": bootstrap_servers}
    if name == "loader":
        extra["HUB_LOADER_REGISTRY_URL"] = api_url
        extra["HUB_LOADER_REGISTRY_KEY"] = parent.get("HUB_LOADER_REGISTRY_KEY", loader_key)
        if loader_control is not None:
            extra["HUB_LOADER_HEALTH_PORT"] = str(loader_control.port)
            extra["HUB_LOADER_CONTROL_TOKEN"] = loader_control.token
    if name == "API server" and loader_control is not None:
        extra["HUB_API_LOADER_URL"] = loader_control.url
        extra["HUB_API_LOADER_TOKEN"] = loader_control.token
    if name == "analyst server":
        # The API that checks the keys analysts log in with (HUB_ANALYST_AUTH=hub-keys).
        extra["HUB_ANALYST_API_URL"] = parent.get("HUB_ANALYST_API_URL", api_url)
    return child_environment(needs=CHILD_SECRETS[name], extra=extra, parent=parent)


def ensure_team(teams: TeamStore, team: TeamName) -> None:
    """Create `team` unless it exists."""
    with contextlib.suppress(TeamExists):
        teams.register(name=team)


class LocalStack:
    """Starts the parts in dependency order and stops them in reverse."""

    def __init__(self, *, demo_feeds: bool, analyst_server: bool = False) -> None:
        self._demo = demo_feeds
        self._analyst_server = analyst_server
        self._kafka = KafkaSettings()
        self._api = ApiSettings()
        self._registry = RegistrySettings()
        self._loader = LoaderSettings()
        self._broker = LocalBroker(self._kafka)
        self._metastore = MetastoreServer(self._loader)
        self._analyst = AnalystSettings()
        self._stack = StackSettings()
        self._supervisor = Supervisor(
            RestartPolicy(
                initial_s=self._stack.restart_initial_seconds,
                max_s=self._stack.restart_max_seconds,
                jitter_s=self._stack.restart_jitter_seconds,
                healthy_s=self._stack.healthy_seconds,
            ),
            on_exit=self._announce_exit,
            on_restart=self._announce_restart,
        )
        self._stop = threading.Event()
        self._started_broker = False
        self._started_metastore = False
        self._admin_key = ""
        self._loader_key = ""
        self._loader_control = LoaderControl.new(self._loader)

    @property
    def api_url(self) -> str:
        return f"http://{self._api.host}:{self._api.port}"

    @property
    def admin_key_file(self) -> Path:
        return key_file(default_home(), KeyRole.ADMIN)

    @property
    def loader_key_file(self) -> Path:
        return key_file(default_home(), KeyRole.LOADER)

    def run(self) -> None:
        """Run until Ctrl-C (SIGINT) or SIGTERM, restarting any part that exits; then stop
        everything, each part's own processes included."""
        # Ctrl-C and SIGTERM only ask for a stop; the main thread then stops the parts in
        # order, and a second Ctrl-C (make forwards one too) cannot cut that short.
        for stop_signal in (signal.SIGINT, signal.SIGTERM):
            signal.signal(stop_signal, lambda *_: self._stop.set())
        private_home(default_home())
        try:
            self._start()
            while not self._stop.wait(1.0):
                self._supervisor.check()
        finally:
            log.info("stopping the hub")
            self._stop.set()
            self._shutdown()

    def _start(self) -> None:
        if not self._broker.status().running:
            self._started_broker = True
        self._broker.start()
        # The broker's address, and with a secured broker its CA and login.
        self._kafka = self._broker.client_settings()
        self._prepare_catalog()
        self._spawn("API server", ["api", "serve"])
        self._wait_for_api()
        self._start_metastore()
        # With the demo, the loader also keeps the demo star schema (gold) built.
        loader_args = ["--warehouse", str(demo_model())] if self._demo else []
        self._spawn("loader", ["load", "run", *loader_args])
        if self._analyst_server:
            self._spawn("analyst server", ["analyst", "serve"])
        if self._demo:
            demo.create_feeds(self.api_url, self._admin_key)
            threading.Thread(
                target=demo.publish_forever,
                args=(self.api_url, self._admin_key, self._stop),
                daemon=True,
            ).start()
        self._print_welcome()

    def _prepare_catalog(self) -> None:
        """Migrate the hub's database and issue the local keys: the admin's, and the loader's."""
        log.info("migrating the hub's database")
        migrate.upgrade(self._registry.database_url)
        engine = create_database_engine(self._registry.database_url)
        try:
            teams = TeamStore(engine)
            self._admin_key = local_key(teams, self.admin_key_file, role=KeyRole.ADMIN)
            self._loader_key = local_key(teams, self.loader_key_file, role=KeyRole.LOADER)
            if self._demo:
                ensure_team(teams, TeamName(demo.TEAM))
        finally:
            engine.dispose()

    def _start_metastore(self) -> None:
        """The local metastore server, unless the settings point at another metastore."""
        if metastore_kind(self._loader) is not MetastoreKind.LOCAL_SERVER:
            return
        if not self._metastore.status().running:
            self._started_metastore = True
        self._metastore.start()

    def _spawn(self, name: str, args: list[str]) -> None:
        command = [sys.executable, "-m", "hub_cli.main", *args]
        self._supervisor.start(
            ChildSpec(name, command, self._child_env(name), self._log_path(name))
        )

    def _child_env(self, name: str) -> dict[str, str]:
        return child_env(
            name,
            parent=os.environ,
            bootstrap_servers=self._kafka.bootstrap_servers,
            api_url=self.api_url,
            loader_key=self._loader_key,
            kafka=client_environment(self._kafka),
            loader_control=self._loader_control,
        )

    def _announce_exit(self, exit: ChildExit) -> None:
        """Say on the terminal what died and what happens next (the supervisor logs it too)."""
        if exit.name == "API server":
            rest = "Kafka, the metastore and the loader keep running."
        else:
            rest = "The API and Kafka keep running."
        print(f"{exit.describe()} {rest}", flush=True)

    def _announce_restart(self, name: str, pid: int) -> None:
        print(f"Restarted the {name} (pid {pid}).", flush=True)

    def _log_path(self, name: str) -> Path:
        logs = default_home() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return logs / f"{name.replace(' ', '-').lower()}.log"

    def _wait_for_api(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.api_url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            api = self._supervisor.process("API server")
            if api is None or exit_status(api) is not None:
                break
            time.sleep(0.5)
        raise StackError(
            f"The API server did not answer on {self.api_url}; see {self._log_path('API server')}."
        )

    def _print_welcome(self) -> None:
        tables = ", ".join(bronze_table(TopicName(t)) for t in demo.FEEDS)
        lines = [
            "",
            "The hub is up.",
            f"  API (registry + publish gateway): {self.api_url}  (docs: {self.api_url}/docs)",
            f"  Kafka: {self._broker.bootstrap_servers}",
            f"  Admin API key: in {self.admin_key_file}; send it as",
            f'    -H "Authorization: Bearer $(cat {self.admin_key_file})"',
            f"  The loader's key (reads only): in {self.loader_key_file}",
            f"  Tables: {self._loader.warehouse_dir}",
            f"  Hive metastore: {metastore.describe(self._loader)}",
            f"  Logs: {default_home() / 'logs'}",
        ]
        if self._demo:
            lines += [
                f"  Demo feeds are publishing into {tables};",
                "  the loader log shows rows landing every second:",
                f"    tail -f {self._log_path('loader')}",
                "  Query the tables while the loader writes:",
                '    hub sql "SELECT device, count(*) FROM bronze.demo_page_views GROUP BY device"',
                "  Silver and gold follow (silver.demo_customers_history, gold.fact_orders):",
                '    hub sql "SELECT c.country, sum(f.amount) FROM gold.fact_orders f JOIN '
                'gold.dim_customer c USING (customer_key) GROUP BY c.country"',
            ]
        if self._analyst_server:
            lines += [
                f"  JDBC/ODBC (Spark Thrift Server): {self._analyst.jdbc_url}",
                f"    beeline -u {self._analyst.jdbc_url} -n admin "
                f'-p "$(cat {self.admin_key_file})"',
                "    (the password is a hub API key: this admin key, or a team's key)",
                f"    log: {self._log_path('analyst server')}",
            ]
        lines.append("Press Ctrl-C to stop.")
        print("\n".join(lines), flush=True)

    def _shutdown(self) -> None:
        self._supervisor.stop_all(grace_s=self._stack.stop_grace_seconds)
        if self._started_metastore:
            self._metastore.stop()
        if self._started_broker:
            self._broker.stop()
        log.info("the hub is stopped")
