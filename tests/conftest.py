"""Session-wide real services: a Kafka broker, a PostgreSQL cluster, a Spark session, the API.

Each starts once per test session, on free loopback ports, with its state in a temporary
directory. Options point tests at services that already run instead. A service that cannot
start fails the tests that need it, loudly: nothing here skips.
"""

import faulthandler
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from hub_kafka.settings import KafkaSettings
    from spark_loaders.settings import LoaderSettings
    from tests.support.connect import ConnectHub
    from tests.support.loader import LoaderTopic

REPO = Path(__file__).resolve().parents[1]
JARS = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "jars"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hub services")
    group.addoption("--kafka-bootstrap", help="Use this Kafka instead of starting a broker.")
    group.addoption("--postgres-url", help="Use this PostgreSQL server URL (SQLAlchemy form).")


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """A crash in native code (a segmentation fault) prints the Python stack of the thread that
    crashed, and only that one. pytest's own handler prints every thread: dozens in a session
    with Spark, Kafka clients and servers in threads, and a log shortened to its head and tail
    then loses the one that matters."""
    faulthandler.enable(file=os.dup(2), all_threads=False)


@pytest.fixture(scope="session")
def kafka_bootstrap(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Bootstrap servers of a real single-node KRaft broker."""
    given = request.config.getoption("--kafka-bootstrap")
    if given:
        yield given
        return
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.settings import KafkaSettings
    from tests.support.ports import free_port

    settings = KafkaSettings(
        broker_home=tmp_path_factory.mktemp("kafka"),
        broker_jars_dir=JARS / "kafka",
        broker_port=free_port(),
        controller_port=free_port(),
    )
    broker = LocalBroker(settings)
    broker.start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> "Iterator[KafkaSettings]":
    """Client settings of a second local broker whose only client listener is SASL_SSL
    (SCRAM-SHA-512, a CA made at start); started once, only for the tests that ask for it."""
    from hub_kafka.local_broker import LocalBroker
    from hub_kafka.settings import BrokerSecurity, KafkaSettings
    from tests.support.ports import free_port

    broker = LocalBroker(
        KafkaSettings(
            broker_home=tmp_path_factory.mktemp("kafka-sasl-ssl"),
            broker_jars_dir=JARS / "kafka",
            broker_port=free_port(),
            controller_port=free_port(),
            broker_security=BrokerSecurity.SASL_SSL,
        )
    )
    broker.start()
    try:
        yield broker.client_settings()
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def postgres_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """URL of a real PostgreSQL server (a temporary cluster unless --postgres-url is given)."""
    given = request.config.getoption("--postgres-url")
    if given:
        yield given
        return
    from tests.support.postgres import TempPostgres

    # Not under pytest's temporary root: that is private to the current user, and the server
    # runs as `postgres` when the tests run as root.
    root = Path(tempfile.mkdtemp(prefix="hub-postgres-"))
    root.chmod(0o755)
    cluster = TempPostgres(root=root / "cluster")
    try:
        cluster.start()
        yield cluster.url
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_database(request: pytest.FixtureRequest, postgres_server: str) -> str:
    """A fresh, empty PostgreSQL database for one test."""
    from sqlalchemy import create_engine, text

    name = "t_" + request.node.name.lower().translate(str.maketrans("[]-.", "____"))[:50]
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return postgres_server.rsplit("/", 1)[0] + f"/{name}"


@pytest.fixture
def sqlite_database(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest) -> str:
    """Each registry contract test runs once per supported database."""
    fixture = "sqlite_database" if request.param == "sqlite" else "postgres_database"
    url: str = request.getfixturevalue(fixture)
    return url


@pytest.fixture(scope="session")
def api_database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The SQLite database of the session's API server."""
    return f"sqlite:///{tmp_path_factory.mktemp('api') / 'hub.db'}"


@pytest.fixture(scope="session")
def api_url(kafka_bootstrap: str, api_database: str) -> Iterator[str]:
    """Base URL of the hub's API (registry, feeds, gateway) on SQLite and the session's Kafka."""
    from tests.support.api_server import serve_api

    with serve_api(database_url=api_database, bootstrap_servers=kafka_bootstrap) as url:
        yield url


@pytest.fixture(scope="session")
def admin_key(api_url: str, api_database: str) -> str:
    """An admin API key of the session's API server."""
    from tests.support.hub_client import create_key

    return create_key(api_database, team=None)


@pytest.fixture(scope="session")
def team_key(api_url: str, api_database: str) -> Callable[[str], str]:
    """Creates a team (once) and returns a new API key of it."""
    from tests.support.hub_client import create_key

    return lambda team: create_key(api_database, team=team)


@pytest.fixture(scope="session")
def connect_hub(
    api_url: str, api_database: str, kafka_bootstrap: str, team_key: Callable[[str], str]
) -> "ConnectHub":
    """The session's hub as connectors use it (see tests/support/connect.py)."""
    from tests.support.connect import ConnectHub

    return ConnectHub(api_url, api_database, kafka_bootstrap, team_key)


@pytest.fixture(scope="session")
def metastore_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The session's local metastore server (Derby), shared by every Spark process."""
    from spark_loaders.services.metastore import MetastoreServer
    from spark_loaders.settings import LoaderSettings
    from tests.support.ports import free_port

    server = MetastoreServer(
        LoaderSettings(
            metastore_dir=tmp_path_factory.mktemp("metastore"),
            metastore_port=free_port(),
            metastore_jars_dir=JARS / "metastore",
        )
    )
    server.start()  # raises, naming the log, when it cannot start
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def loader_settings(  # type: ignore[no-untyped-def]
    api_url: str, metastore_server, tmp_path_factory: pytest.TempPathFactory
):
    from spark_loaders.settings import LoaderSettings

    home = tmp_path_factory.mktemp("spark")
    return LoaderSettings(
        master="local[2]",
        driver_memory="1g",
        shuffle_partitions=2,
        warehouse_dir=home / "warehouse",
        metastore_dir=metastore_server.home,
        metastore_port=metastore_server.port,
        metastore_jars_dir=JARS / "metastore",
        checkpoint_dir=home / "checkpoints",
        jars_dir=JARS / "spark",
        registry_url=api_url,
        trigger_seconds=0.5,
    )


@pytest.fixture(scope="session")
def spark(loader_settings):  # type: ignore[no-untyped-def]
    """One Spark session for the whole test run: Delta, Hive metastore, local jars."""
    from spark_loaders.services.session import spark_session

    with spark_session(loader_settings, app_name="hub-tests") as session:
        yield session


@pytest.fixture
def loader_topic(
    api_url: str,
    admin_key: str,
    kafka_bootstrap: str,
    loader_settings: "LoaderSettings",
    tmp_path: Path,
) -> Callable[..., "LoaderTopic"]:
    """Makes a new topic `<domain>.t<random>` with a loader of its own (`LoaderTopic`)."""
    from tests.support.loader import LoaderTopic

    def new(domain: str, *, partitions: int = 2) -> LoaderTopic:
        return LoaderTopic.create(
            domain,
            partitions=partitions,
            base=loader_settings,
            home=tmp_path,
            api_url=api_url,
            admin_key=admin_key,
            bootstrap=kafka_bootstrap,
        )

    return new


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A local Spark standalone cluster (a master and two workers, each its own JVM), started
    only when a test asks for it. A test that kills a worker starts it again when done."""
    from spark_loaders.services.cluster import LocalCluster
    from spark_loaders.services.cluster_settings import ClusterSettings
    from tests.support.ports import free_port, free_ports_in_a_row

    cluster = LocalCluster(
        ClusterSettings(
            home=tmp_path_factory.mktemp("spark-cluster"),
            master_port=free_port(),
            master_webui_port=free_port(),
            worker_webui_port=free_ports_in_a_row(2),  # worker N listens on this + N
            workers=2,
        )
    )
    cluster.start()  # raises, naming the log, when a JVM cannot start
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A local 3-node KRaft cluster (each node a broker and a controller in a JVM of its own),
    started only when a test asks for it. A test that kills a node starts it again when done."""
    from hub_kafka.local_cluster import LocalCluster
    from hub_kafka.settings import KafkaSettings
    from tests.support.ports import free_port

    cluster = LocalCluster(
        KafkaSettings(
            broker_home=tmp_path_factory.mktemp("kafka-cluster"),
            broker_jars_dir=JARS / "kafka",
            broker_heap="384m",
        ),
        brokers=3,
        ports=[(free_port(), free_port()) for _ in range(3)],
    )
    cluster.start()  # raises, naming the log, when a node cannot start
    try:
        yield cluster
    finally:
        cluster.stop()
