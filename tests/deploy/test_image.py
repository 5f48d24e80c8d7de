"""The image `make image` builds runs the hub as its pods will: a non-root user, `hub` as the
entrypoint, Java and PySpark inside, the locked environment and nothing more, and an API that
serves and publishes to a real Kafka.

Containers cannot be started here (`podman run` is refused), so commands run inside the image
with `buildah run --isolation chroot`: the image's own files, user and environment, on the
host's network.
"""

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import httpx
import pytest

from hub_core.naming import TopicName, table_suffix
from tests.conftest import REPO
from tests.support.delta_log import LiveFiles
from tests.support.hub_client import bearer, create_feed, publish, unique_topic
from tests.support.kafka import read_avro
from tests.support.ports import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.deploy

IMAGE = os.environ.get("HUB_IMAGE", f"localhost/integration-hub:{version('integration-hub')}")
BUILDAH = ["buildah", "--storage-driver", "vfs"]
USER = "10001:10001"
# Tools that build or test software: an image that holds one of them carries its build.
NOT_SHIPPED = ["pytest", "ruff", "mypy", "hypothesis", "schemathesis", "uv", "pip"]
COMPILERS = ["gcc", "cc", "c++", "make", "javac"]
PING = {
    "type": "record",
    "name": "Ping",
    "namespace": "smoke",
    "fields": [{"name": "n", "type": "long"}],
}


def _buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BUILDAH, *args], capture_output=True, text=True, check=check)


def _in_image(container: str, *command: str, env: dict[str, str] | None = None) -> list[str]:
    """The command line that runs `command` inside the image's working container."""
    options = [f"--env={name}={value}" for name, value in (env or {}).items()]
    return [*BUILDAH, "run", "--isolation", "chroot", *options, container, "--", *command]


def _run(
    container: str, *command: str, env: dict[str, str] | None = None, timeout_s: float = 120
) -> str:
    """Run `command` inside the image; its standard output, or a failure naming its errors."""
    result = subprocess.run(
        _in_image(container, *command, env=env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    assert result.returncode == 0, f"{command}: exit {result.returncode}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def image_config() -> dict[str, object]:
    if shutil.which("buildah") is None:
        pytest.fail("buildah is not installed: `make image` installs it and builds the image")
    inspected = _buildah("inspect", "--type", "image", IMAGE, check=False)
    if inspected.returncode != 0:
        pytest.fail(f"no image {IMAGE}: build it with `make image`\n{inspected.stderr}")
    config: dict[str, object] = json.loads(inspected.stdout)["OCIv1"]["config"]
    return config


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The container's HUB_HOME: a host folder the image's user owns."""
    folder = tmp_path_factory.mktemp("image-home")
    os.chown(folder, 10001, 10001)
    return folder


@pytest.fixture(scope="module")
def container(image_config: dict[str, object], home: Path) -> Iterator[str]:
    """A working container of the image, with `home` as its HUB_HOME."""
    name = f"hub-smoke-{os.getpid()}"
    _buildah("rm", name, check=False)
    _buildah("from", "--name", name, "--volume", f"{home}:/var/lib/hub", IMAGE)
    try:
        yield name
    finally:
        _buildah("rm", name, check=False)


def test_the_image_runs_hub_as_a_non_root_user(
    image_config: dict[str, object], container: str
) -> None:
    assert image_config["User"] == USER
    assert image_config["Entrypoint"] == ["/usr/bin/tini", "--", "hub"]
    assert _run(container, "id", "-u").strip() == "10001"
    # The user writes only where pods mount volumes: HUB_HOME and /tmp.
    _run(container, "touch", "/var/lib/hub/written", "/tmp/written")
    denied = subprocess.run(
        _in_image(container, "touch", "/opt/hub/written"),
        capture_output=True,
        text=True,
    )
    assert denied.returncode != 0

    usage = _run(container, "hub", "--help")
    for command in ("api", "load", "connect", "analyst", "db"):
        assert re.search(rf"^│ {command} ", usage, re.MULTILINE), usage


def test_java_17_and_the_pinned_pyspark_and_jars_are_inside(container: str) -> None:
    assert 'version "17.' in _run(container, "sh", "-c", "java -version 2>&1")
    imported = _run(
        container,
        "python",
        "-c",
        "import delta, pyspark, confluent_kafka; print(pyspark.__version__)",
    )
    assert imported.strip() == version("pyspark")
    # The jars Spark and the metastore need, where the image's settings say they are.
    jars = _run(
        container,
        "sh",
        "-c",
        "ls $HUB_LOADER_JARS_DIR $HUB_LOADER_S3A_JARS_DIR $HUB_LOADER_METASTORE_JARS_DIR",
    )
    for jar in (
        "delta-spark_",
        "spark-sql-kafka-",
        "hub-thrift-auth-",
        "hub-delta-log-store-",
        "hadoop-aws-",
        "postgresql-",
    ):
        assert jar in jars, f"no {jar}*.jar in the image"


def test_the_environment_is_the_locked_one_and_nothing_more(container: str) -> None:
    locked = dict(
        re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", (REPO / "requirements.lock").read_text(), re.M)
    )
    locked = {_normal(name): pinned for name, pinned in locked.items()}
    listed = _run(
        container,
        "python",
        "-c",
        "import importlib.metadata as m; "
        "print('\\n'.join(f'{d.metadata[\"Name\"]}=={d.version}' for d in m.distributions()))",
    )
    installed = dict(line.split("==", 1) for line in listed.split())
    installed.pop("integration-hub")
    for name, found in installed.items():
        assert locked.get(_normal(name)) == found, f"{name} {found} is not pinned by the lock"
    for tool in NOT_SHIPPED:
        assert _normal(tool) not in {_normal(n) for n in installed}, f"{tool} is in the image"

    leftovers = _run(
        container,
        "sh",
        "-c",
        f"for c in {' '.join(COMPILERS + NOT_SHIPPED)}; do command -v $c; done; "
        "find /root/.cache /var/lib/apt/lists /var/cache/apt -type f -not -name lock 2>/dev/null; "
        "true",
    )
    assert leftovers.strip() == "", f"build tools or caches in the image:\n{leftovers}"


@pytest.fixture(scope="module")
def image_api(container: str, kafka_bootstrap: str) -> Iterator[tuple[str, str]]:
    """The image's own `hub api serve` on the session's Kafka, after the image's `hub db upgrade`
    (the chart's migrations Job); yields its URL and a key of team `smoke`."""
    env = {"HUB_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    _run(container, "hub", "db", "upgrade", env=env)
    _run(container, "hub", "team", "create", "smoke", env=env)
    key = _run(container, "hub", "key", "create", "--team", "smoke", env=env).split()[-1]
    port = free_port()
    env |= {"HUB_API_HOST": "127.0.0.1", "HUB_API_PORT": str(port)}
    server = subprocess.Popen(
        _in_image(container, "hub", "api", "serve", env=env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/readyz"), timeout_s=60, what="the image's API /readyz")
        yield url, key
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@pytest.fixture(scope="module")
def smoke_feed(image_api: tuple[str, str]) -> tuple[str, httpx.Response]:
    """A feed created through the image's API, and the answer to publishing one record to it."""
    url, key = image_api
    topic = unique_topic("smoke")
    create_feed(url, key, topic=topic, schema=PING, owner="smoke")
    return topic, publish(url, key, topic, [{"key": "k", "value": {"n": 7}}])


def test_the_images_api_serves_and_publishes_to_kafka(
    image_api: tuple[str, str], smoke_feed: tuple[str, httpx.Response], kafka_bootstrap: str
) -> None:
    url, key = image_api
    topic, answer = smoke_feed
    assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == 1
    assert httpx.get(f"{url}/v1/feeds/{topic}", headers=bearer(key)).status_code == 200

    assert read_avro(url, kafka_bootstrap, topic, expected=1) == [("k", {"n": 7})]


def test_the_images_loader_lands_the_feed_with_its_own_spark(
    container: str,
    home: Path,
    image_api: tuple[str, str],
    smoke_feed: tuple[str, httpx.Response],
    kafka_bootstrap: str,
) -> None:
    """Java, PySpark, the Delta and Kafka jars and the registry client work together in the
    image: `hub load run --once` lands the published record in bronze."""
    url, _key = image_api
    topic, _answer = smoke_feed
    env = {
        "HUB_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap,
        "HUB_LOADER_REGISTRY_URL": url,
        "HUB_LOADER_TOPIC_PATTERN": topic.replace(".", "\\."),
        "HUB_LOADER_MASTER": "local[1]",
        "HUB_LOADER_DRIVER_MEMORY": "1g",
        "HUB_LOADER_SHUFFLE_PARTITIONS": "1",
        "HUB_LOADER_METASTORE_URL": (
            "jdbc:derby:;databaseName=/var/lib/hub/metastore/metastore_db;create=true"
        ),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    _run(container, "hub", "load", "run", "--once", env=env, timeout_s=300)

    landed = LiveFiles.of(home / "warehouse" / "bronze.db" / table_suffix(TopicName(topic)))
    assert landed.rows() == 1


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
