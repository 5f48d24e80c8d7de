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

import httpx
import pytest

from tests.conftest import REPO
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


def _buildah(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*BUILDAH, *args], capture_output=True, text=True, check=check)


def _run(container: str, *command: str, env: dict[str, str] | None = None) -> str:
    """Run `command` inside the image; its standard output, or a failure naming its errors."""
    options = [f"--env={name}={value}" for name, value in (env or {}).items()]
    result = subprocess.run(
        [*BUILDAH, "run", "--isolation", "chroot", *options, container, "--", *command],
        capture_output=True,
        text=True,
        timeout=120,
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
def container(
    image_config: dict[str, object], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A working container of the image whose HUB_HOME is a host folder the image's user owns."""
    home = tmp_path_factory.mktemp("image-home")
    os.chown(home, 10001, 10001)
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
        [*BUILDAH, "run", "--isolation", "chroot", container, "--", "touch", "/opt/hub/written"],
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


def test_the_images_api_serves_and_publishes_to_kafka(container: str, kafka_bootstrap: str) -> None:
    env = {"HUB_KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    _run(container, "hub", "db", "upgrade", env=env)
    _run(container, "hub", "team", "create", "smoke", env=env)
    key = _run(container, "hub", "key", "create", "--team", "smoke", env=env).split()[-1]
    port = free_port()
    env |= {"HUB_API_HOST": "127.0.0.1", "HUB_API_PORT": str(port)}
    options = [f"--env={name}={value}" for name, value in env.items()]
    server = subprocess.Popen(
        [
            *BUILDAH,
            "run",
            "--isolation",
            "chroot",
            *options,
            container,
            "--",
            "hub",
            "api",
            "serve",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{url}/readyz"), timeout_s=60, what="the image's API /readyz")
        assert httpx.get(f"{url}/healthz").json() == {"status": "ok"}

        topic = unique_topic("smoke")
        schema = {
            "type": "record",
            "name": "Ping",
            "namespace": "smoke",
            "fields": [{"name": "n", "type": "long"}],
        }
        create_feed(url, key, topic=topic, schema=schema, owner="smoke")
        answer = publish(url, key, topic, [{"key": "k", "value": {"n": 7}}])
        assert answer.status_code == 200, answer.text
        assert answer.json()["accepted"] == 1
        assert httpx.get(f"{url}/v1/feeds/{topic}", headers=bearer(key)).status_code == 200

        assert read_avro(url, kafka_bootstrap, topic, expected=1) == [("k", {"n": 7})]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
