"""The Helm chart lints, renders and validates, with the default values and a production file.

What Kubernetes would refuse at install time fails here: `helm lint --strict`; every rendered
object against the JSON schemas of a pinned Kubernetes version (kubeconform, strict: an unknown
field is an error, where the API server would drop it); kube-score's best practices, with each
exception justified where the chart declares it (`kube-score/ignore` annotations). And what the
hub would refuse at start: each connector's rendered file, read by the hub's own loader.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from connectors.config import load
from tests.conftest import REPO

pytestmark = pytest.mark.deploy

CHART = REPO / "helm" / "integration-hub"
PRODUCTION = CHART / "ci" / "production-values.yaml"
HUB_HOME = Path(os.environ.get("HUB_HOME", REPO / ".hub"))
TOOLS = HUB_HOME / "bin"
SCHEMAS = HUB_HOME / "k8s-schemas"
sys.path.insert(0, str(REPO / "tools"))
from k8s_schemas import VERSION as KUBERNETES  # noqa: E402

VALUES = {"default": [], "production": ["--values", str(PRODUCTION)]}
# Tables on the chart's volume, which the loader and the Thrift server both mount.
_SHARED_VOLUME = ["--set", "storage.volume.accessMode=ReadWriteMany"]


def _tool(name: str) -> str:
    path = TOOLS / name
    if not path.is_file():
        pytest.fail(f"no {path}: `make chart-tools` builds helm, kubeconform and kube-score")
    return str(path)


def _render(values: list[str]) -> str:
    rendered = subprocess.run(
        [_tool("helm"), "template", "hub", str(CHART), "--namespace", "data", *values],
        capture_output=True,
        text=True,
    )
    assert rendered.returncode == 0, rendered.stderr
    return rendered.stdout


def _objects(manifest: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(manifest) if o]


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_the_chart_lints_strictly(values: list[str]) -> None:
    linted = subprocess.run(
        [_tool("helm"), "lint", "--strict", str(CHART), *values], capture_output=True, text=True
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_every_rendered_object_is_valid_for_the_pinned_kubernetes(
    values: list[str], tmp_path: Path
) -> None:
    if not (SCHEMAS / f"v{KUBERNETES}-standalone-strict" / ".complete").is_file():
        pytest.fail(f"no schemas under {SCHEMAS}: `make chart-tools` writes them")
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(_render(values))
    validated = subprocess.run(
        [
            _tool("kubeconform"), "-strict", "-summary", "-output", "text",
            "-kubernetes-version", KUBERNETES, "-schema-location", str(SCHEMAS), str(manifest),
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert validated.returncode == 0, validated.stdout + validated.stderr
    # Every object was checked against a schema: none skipped for want of one.
    assert re.search(r"Invalid: 0, Errors: 0, Skipped: 0", validated.stdout), validated.stdout


def test_the_schemas_refuse_what_the_api_server_would_drop(tmp_path: Path) -> None:
    # The validation has teeth: a misspelt field of a container fails it.
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(_render([]).replace("readinessProbe:", "readynessProbe:", 1))
    validated = subprocess.run(
        [
            _tool("kubeconform"), "-strict", "-kubernetes-version", KUBERNETES,
            "-schema-location", str(SCHEMAS), str(manifest),
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert validated.returncode == 1
    assert "additional properties 'readynessProbe' not allowed" in validated.stdout


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_the_chart_follows_kube_scores_practices(values: list[str], tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(_render(values))
    scored = subprocess.run(
        [
            _tool("kube-score"), "score", "--output-format", "ci",
            "--kubernetes-version", f"v{KUBERNETES.rsplit('.', 1)[0]}",
            "--enable-optional-test", "container-seccomp-profile",
            # No CPU limits: a limit throttles Spark and the API below what the node has idle;
            # requests reserve what they need (memory and ephemeral storage keep their limits).
            "--ignore-container-cpu-limit",
            "--exit-one-on-warning",
            str(manifest),
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    findings = [
        line for line in scored.stdout.splitlines() if not line.startswith(("[OK]", "[SKIPPED]"))
    ]
    assert scored.returncode == 0 and not findings, "\n".join(findings) or scored.stderr


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_every_pod_is_hardened_and_sized(values: list[str]) -> None:
    pods = [
        (o["metadata"]["name"], o["spec"]["template"]["spec"])
        for o in _objects(_render(values))
        if o["kind"] in ("Deployment", "Job")
    ]
    assert len(pods) >= (6 if values else 3)
    for name, pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            assert {"cpu", "memory"} <= container["resources"]["requests"].keys(), name
            assert "memory" in container["resources"]["limits"], name
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert {"/tmp", "/var/lib/hub"} <= mounts, f"{name}: nowhere writable"
            if name.endswith(("-loader", "-api")) or "-connector-" in name:
                assert "livenessProbe" in container and "readinessProbe" in container, name


@pytest.mark.parametrize("values", VALUES.values(), ids=VALUES.keys())
def test_probes_and_prometheus_find_the_endpoints_each_process_serves(values: list[str]) -> None:
    """The loader and connectors answer /healthz, /readyz and /metrics on their health port,
    the API all of its endpoints on its one port: probes and scrape annotations name them."""
    deployments = [
        o for o in _objects(_render(values))
        if o["kind"] == "Deployment" and not o["metadata"]["name"].endswith("-analyst")
    ]  # fmt: skip
    assert len(deployments) == (4 if values else 2)
    for deployment in deployments:
        name = deployment["metadata"]["name"]
        template = deployment["spec"]["template"]
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        served = "http" if name.endswith("-api") else "health"
        live = "/livez" if name.endswith("-api") else "/healthz"
        assert container["livenessProbe"]["httpGet"] == {"path": live, "port": served}, name
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": served}
        annotations = template["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true", name
        assert annotations["prometheus.io/port"] == str(ports[served]), name
        assert annotations["prometheus.io/path"] == "/metrics", name


def test_the_dashboard_is_a_configmap_for_grafanas_sidecar_when_asked_for() -> None:
    def dashboards(values: list[str]) -> list[dict[str, Any]]:
        return [
            o for o in _objects(_render(values))
            if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith("-dashboard")
        ]  # fmt: skip

    assert dashboards(VALUES["default"]) == []
    (configmap,) = dashboards(VALUES["production"])
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["annotations"] == {"grafana_folder": "Integration Hub"}
    shipped = json.loads((CHART / "dashboards" / "hub.json").read_text())
    assert json.loads(configmap["data"]["integration-hub.json"]) == shipped


def test_pods_outlast_the_publish_delivery_timeout() -> None:
    production = yaml.safe_load(PRODUCTION.read_text())
    for values, timeout_ms in (
        ([], 30_000),
        (VALUES["production"], production["kafka"]["deliveryTimeoutMs"]),
    ):
        for o in _objects(_render(values)):
            if o["kind"] == "Deployment" and not o["metadata"]["name"].endswith("-analyst"):
                grace = o["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
                assert grace * 1000 > timeout_ms, o["metadata"]["name"]
                env = {
                    e["name"]: e.get("value")
                    for e in o["spec"]["template"]["spec"]["containers"][0]["env"]
                }
                assert env["HUB_KAFKA_DELIVERY_TIMEOUT_MS"] == str(timeout_ms)


def test_secrets_reach_pods_only_from_secrets() -> None:
    """No password, key or credential-bearing URL appears as a literal in any rendered object;
    the production file's secrets arrive as files or secretKeyRefs."""
    secret_names = re.compile(r"PASSWORD|SECRET|_KEY$|TOKEN|DATABASE_URL|DSN")
    objects = _objects(_render(VALUES["production"]))
    assert not [o for o in objects if o["kind"] == "Secret"], "the chart writes no Secret itself"
    for o in objects:
        if o["kind"] != "Deployment":
            continue
        for container in o["spec"]["template"]["spec"]["containers"]:
            for variable in container["env"]:
                if secret_names.search(variable["name"]) and not variable["name"].endswith("_FILE"):
                    assert "value" not in variable, f"{o['metadata']['name']}: {variable['name']}"
    loader = _container_env(objects, "hub-integration-hub-loader")
    assert loader["HUB_KAFKA_SASL_PASSWORD_FILE"] == "/etc/hub/kafka/sasl/password"
    assert loader["HUB_LOADER_S3_SECRET_KEY_FILE"] == "/etc/hub/s3/secret-key"
    assert "secretKeyRef" in loader["HUB_LOADER_METASTORE_PASSWORD"]
    api = _container_env(objects, "hub-integration-hub-api")
    for env, variable in ((loader, "HUB_LOADER_CONTROL_TOKEN"), (api, "HUB_API_LOADER_TOKEN")):
        assert env[variable]["secretKeyRef"] == {"name": "hub-loader-control", "key": "token"}
    assert api["HUB_API_LOADER_URL"] == "http://hub-integration-hub-loader:8081"
    assert api["HUB_API_LINEAGE_SOURCE"] == "loader"  # the tables are in the bucket
    services = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Service"}
    assert services["hub-integration-hub-loader"]["ports"] == [
        {"name": "health", "port": 8081, "targetPort": "health"}
    ]


def test_the_thrift_server_reads_the_loaders_tables_and_is_reachable_only_as_configured() -> None:
    objects = _objects(_render(VALUES["production"]))
    loader = _container_env(objects, "hub-integration-hub-loader")
    analyst = _container_env(objects, "hub-integration-hub-analyst")
    for shared in (
        "HUB_LOADER_WAREHOUSE_DIR", "HUB_LOADER_S3_ENDPOINT", "HUB_LOADER_METASTORE_URL",
        "HUB_LOADER_MASTER",
    ):  # fmt: skip
        assert analyst[shared] == loader[shared], shared
    assert loader["HUB_LOADER_WAREHOUSE_DIR"] == "s3a://hub-tables/warehouse"

    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}
    thrift = policies["hub-integration-hub-analyst"]
    assert thrift["ingress"] == [
        {
            "ports": [{"port": "hiveserver2"}],
            "from": [
                {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "analytics"}}}
            ],
        }
    ]
    metastore = policies["hub-integration-hub-metastore"]
    assert metastore["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "metastore-db"}}
    allowed = [
        peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
        for peer in metastore["ingress"][0]["from"]
    ]
    assert allowed == ["loader", "analyst"]
    assert "ingress" not in policies["hub-integration-hub-migrations"]
    monitoring = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    }
    assert policies["hub-integration-hub-connectors"]["ingress"] == [
        {"ports": [{"port": "health"}], "from": [monitoring]}
    ]  # only Prometheus, only on the health port
    api_pods = {"app.kubernetes.io/name": "integration-hub", "app.kubernetes.io/instance": "hub",
                "app.kubernetes.io/component": "api"}  # fmt: skip
    assert policies["hub-integration-hub-loader"]["ingress"] == [
        {"ports": [{"port": "health"}], "from": [monitoring]},
        {"ports": [{"port": "health"}], "from": [{"podSelector": {"matchLabels": api_pods}}]},
    ]  # Prometheus, and the API for /status, /plan and /replay
    assert monitoring in policies["hub-integration-hub-api"]["ingress"][0]["from"]


def test_the_thrift_server_holds_only_read_only_credentials_and_no_others() -> None:
    """Analysts' SQL runs in the Thrift server: whatever escapes there finds no registry
    database, no Kafka login, no write keys and no Kubernetes token."""
    objects = _objects(_render(VALUES["production"]))
    analyst = _container_env(objects, "hub-integration-hub-analyst")
    pod = _pod(objects, "hub-integration-hub-analyst")

    assert "HUB_REGISTRY_DATABASE_URL" not in analyst
    assert not [name for name in analyst if name.startswith(("HUB_KAFKA_SASL", "HUB_KAFKA_SSL"))]
    assert "HUB_LOADER_CHECKPOINT_DIR" not in analyst  # it reads tables, not the loader's state
    assert analyst["HUB_LOADER_S3_ACCESS_KEY"]["secretKeyRef"]["name"] == "hub-s3-read-only"
    for variable in ("HUB_LOADER_METASTORE_USER", "HUB_LOADER_METASTORE_PASSWORD"):
        assert analyst[variable]["secretKeyRef"]["name"] == "hub-metastore-db-read-only"
    secrets = {v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    assert secrets == {"hub-s3-read-only"}
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    for mount in container["volumeMounts"]:
        if mount["mountPath"] not in ("/tmp", "/var/lib/hub"):  # its scratch space
            assert mount.get("readOnly") is True, mount


def test_the_thrift_server_mounts_the_tables_volume_read_only() -> None:
    objects = _objects(_render(["--set", "analyst.enabled=true", *_SHARED_VOLUME]))
    pod = _pod(objects, "hub-integration-hub-analyst")
    loader = _pod(objects, "hub-integration-hub-loader")

    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "data"]
    assert mount == {"name": "data", "mountPath": "/data", "readOnly": True}
    (volume,) = [v for v in pod["volumes"] if v["name"] == "data"]
    assert volume["persistentVolumeClaim"]["readOnly"] is True
    (written,) = [m for m in loader["containers"][0]["volumeMounts"] if m["name"] == "data"]
    assert "readOnly" not in written  # the loader lands the tables there


@pytest.mark.parametrize(
    ("values", "refusal"),
    [
        (["--set", "storage.s3.readOnlySecret="], "name it in storage.s3.readOnlySecret"),
        (["--set", "storage.s3.readOnlySecret=hub-s3"], "s3.readOnlySecret names the loader"),
        (["--set", "metastore.readOnlySecret="], "name it in metastore.readOnlySecret"),
        (["--set", "metastore.readOnlySecret=hub-metastore-db"], "metastore.readOnlySecret names"),
    ],
    ids=["no-read-only-s3-keys", "s3-write-keys", "no-read-only-metastore-user", "metastore-owner"],
)
def test_the_chart_refuses_to_give_the_thrift_server_the_loaders_write_credentials(
    values: list[str], refusal: str
) -> None:
    rendered = subprocess.run(
        [_tool("helm"), "template", "hub", str(CHART), *VALUES["production"], *values],
        capture_output=True,
        text=True,
    )
    assert rendered.returncode != 0
    assert refusal in rendered.stderr


def test_an_empty_analyst_from_admits_no_one_to_the_thrift_server(tmp_path: Path) -> None:
    closed = tmp_path / "closed.yaml"
    closed.write_text("networkPolicy:\n  analystFrom: []\n")
    objects = _objects(_render([*VALUES["production"], "--values", str(closed)]))
    policies = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "NetworkPolicy"}

    thrift = policies["hub-integration-hub-analyst"]
    assert "Ingress" in thrift["policyTypes"]
    assert thrift["ingress"] == []  # no rule: no source matches, none is admitted


def test_only_the_pods_that_use_a_secret_get_it() -> None:
    objects = _objects(_render(VALUES["production"]))
    database = {"hub-integration-hub-api", "hub-integration-hub-migrate-1"} | {
        o["metadata"]["name"] for o in objects if "-connector-" in o["metadata"]["name"]
    }
    kafka = (database - {"hub-integration-hub-migrate-1"}) | {"hub-integration-hub-loader"}
    for o in objects:
        if o["kind"] not in ("Deployment", "Job"):
            continue
        name = o["metadata"]["name"]
        env = _container_env(objects, name)
        volumes = {v["name"] for v in _pod(objects, name)["volumes"]}
        assert ("HUB_REGISTRY_DATABASE_URL" in env) == (name in database), name
        assert ("HUB_KAFKA_SASL_PASSWORD_FILE" in env) == (name in kafka), name
        assert ({"kafka-sasl", "kafka-tls"} <= volumes) == (name in kafka), name


def test_only_a_loader_on_a_kubernetes_master_gets_a_service_account_token() -> None:
    on_kubernetes = ["--set", "spark.master=k8s://https://kubernetes.default.svc:443"]
    for values in (VALUES["production"], [*VALUES["production"], *on_kubernetes]):
        objects = _objects(_render([*values, "--set", "analyst.env.HUB_LOADER_MASTER=local[*]"]))
        for o in objects:
            if o["kind"] in ("Deployment", "Job"):
                name = o["metadata"]["name"]
                wanted = name.endswith("-loader") and values != VALUES["production"]
                assert _pod(objects, name)["automountServiceAccountToken"] is wanted, name

    # The Thrift server cannot follow the loader there: it holds no token to ask for executors.
    rendered = subprocess.run(
        [_tool("helm"), "template", "hub", str(CHART), *VALUES["production"], *on_kubernetes],
        capture_output=True,
        text=True,
    )
    assert rendered.returncode != 0
    assert "Set analyst.env.HUB_LOADER_MASTER to local[*] or a spark:// master" in rendered.stderr


def test_a_shared_volume_must_be_read_write_many_when_the_thrift_server_reads_it() -> None:
    rendered = subprocess.run(
        [_tool("helm"), "template", "hub", str(CHART), "--set", "analyst.enabled=true"],
        capture_output=True,
        text=True,
    )
    assert rendered.returncode != 0
    assert "set storage.volume.accessMode to ReadWriteMany" in rendered.stderr


def test_every_connector_file_the_chart_renders_is_one_the_hub_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = [
        o["data"]["connector.yaml"]
        for o in _objects(_render(VALUES["production"]))
        if o["kind"] == "ConfigMap" and "connector.yaml" in o["data"]
    ]
    assert len(files) == 2
    for n, text in enumerate(files):
        for variable in re.findall(r"\$\{([A-Z_]+)\}", text):
            monkeypatch.setenv(variable, "from-the-secret")
        path = tmp_path / f"connector-{n}.yaml"
        path.write_text(text)
        assert load(path).name in {"shop-cdc", "billing-invoices"}


def _pod(objects: list[dict[str, Any]], workload: str) -> dict[str, Any]:
    """The pod spec of the Deployment or Job named `workload`."""
    (found,) = [
        o
        for o in objects
        if o["kind"] in ("Deployment", "Job") and o["metadata"]["name"] == workload
    ]
    pod: dict[str, Any] = found["spec"]["template"]["spec"]
    return pod


def _container_env(objects: list[dict[str, Any]], deployment: str) -> dict[str, Any]:
    return {
        e["name"]: e.get("value", e.get("valueFrom"))
        for e in _pod(objects, deployment)["containers"][0]["env"]
    }
