"""tools/k8s_schemas.py: OpenAPI definitions become the standalone, strict schemas kubeconform
reads, named as kubeconform looks them up."""

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tools"))

from k8s_schemas import Inliner, file_name  # noqa: E402 (tools/ is not a package)

pytestmark = pytest.mark.unit

QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
DEFINITIONS = {
    "io.k8s.api.apps.v1.Deployment": {
        "description": "Deployment enables declarative updates.",
        "type": "object",
        "properties": {
            "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"},
            "description": {"type": "string"},
        },
        "x-kubernetes-group-version-kind": [
            {"group": "apps", "kind": "Deployment", "version": "v1"}
        ],
    },
    "io.k8s.api.apps.v1.DeploymentSpec": {
        "type": "object",
        "required": ["selector"],
        "properties": {
            "maxUnavailable": {"format": "int-or-string", "type": "string"},
            "memory": {"$ref": f"#/definitions/{QUANTITY}"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "nested": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"},
        },
    },
    QUANTITY: {"type": "string"},
}


def test_references_are_inlined_and_every_object_refuses_unknown_fields() -> None:
    schema = Inliner(DEFINITIONS).schema("io.k8s.api.apps.v1.Deployment")

    assert schema["additionalProperties"] is False
    # A field named `description` is kept; the definitions' own descriptions are dropped.
    assert set(schema["properties"]) == {"spec", "description"}
    assert "description" not in schema
    spec = schema["properties"]["spec"]
    assert spec["additionalProperties"] is False
    assert spec["required"] == ["selector"]
    assert spec["properties"]["maxUnavailable"] == {
        "oneOf": [{"type": "string"}, {"type": "integer"}]
    }
    assert spec["properties"]["memory"] == {"oneOf": [{"type": "string"}, {"type": "number"}]}
    # A map keeps its value schema; a type that contains itself accepts anything below.
    assert spec["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    assert spec["properties"]["nested"] == {}


@pytest.mark.parametrize(
    ("group", "version", "kind", "name"),
    [
        ("apps", "v1", "Deployment", "deployment-apps-v1.json"),
        ("", "v1", "Service", "service-v1.json"),
        ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicy-networking-v1.json"),
        ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudget-policy-v1.json"),
    ],
)
def test_file_names_are_the_ones_kubeconform_looks_up(
    group: str, version: str, kind: str, name: str
) -> None:
    assert file_name(group, version, kind) == name
