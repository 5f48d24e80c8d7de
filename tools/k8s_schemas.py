"""JSON schemas of a pinned Kubernetes version's objects, for validating the chart offline.

kubeconform validates manifests against one JSON schema per kind. This script writes them from
the OpenAPI (Swagger 2.0) document that ships in the `k8s.io/kubernetes` Go module, fetched from
the Go module proxy and checked against the module's pinned `h1:` hash:

    python3 tools/k8s_schemas.py DEST    # prints the directory to pass as -schema-location

The files follow kubeconform's layout, `DEST/v<version>-standalone-strict/<kind><suffix>.json`
(`deployment-apps-v1.json`, `service-v1.json`), so `kubeconform -strict -kubernetes-version
<version> -schema-location DEST` finds them. Each schema is standalone (every `$ref` inlined) and
strict, as `kubectl --validate=strict` is: a field the API does not know is an error, where the
API server would drop it silently. Two OpenAPI formats become JSON-schema types: `int-or-string`
(ports, percentages) and `Quantity` (`cpu: 1` or `"500m"`).

Standard library only, like tools/fetch_go.py, whose hash function it shares.
"""

import io
import json
import shutil
import sys
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch_go import PROXY, module_hash

VERSION = "1.34.4"
# The go.sum hash of k8s.io/kubernetes@v<VERSION> (`go mod download -json` prints it as Sum).
PINNED = "h1:Yy6R4QB8C9kJPp25GFqEvX5XQwY5qzKeqD0Xx6oAcmk="
_GVK = "x-kubernetes-group-version-kind"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def swagger(version: str = VERSION, pinned: str = PINNED) -> dict[str, Any]:
    """The OpenAPI document of Kubernetes `version`, from its Go module on the proxy."""
    url = f"{PROXY}/k8s.io/kubernetes/@v/v{version}.zip"
    print(f"==> Kubernetes {version} OpenAPI from {url}", file=sys.stderr, flush=True)
    with urllib.request.urlopen(url, timeout=300) as response:
        archive = zipfile.ZipFile(io.BytesIO(response.read()))
    found = module_hash(archive)
    if found != pinned:
        raise SystemExit(f"{url}: hash {found} is not the pinned {pinned}")
    document: dict[str, Any] = json.loads(
        archive.read(f"k8s.io/kubernetes@v{version}/api/openapi-spec/swagger.json")
    )
    return document


def file_name(group: str, version: str, kind: str) -> str:
    """kubeconform's name for a kind's schema: the kind, the group's first label, the version."""
    suffix = f"-{group.split('.')[0]}-{version}" if group else f"-{version}"
    return f"{kind.lower()}{suffix.lower()}.json"


class Inliner:
    """Turns OpenAPI definitions into standalone, strict JSON schemas."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        self._definitions = definitions

    def schema(self, name: str) -> dict[str, Any]:
        return self._convert(self._definitions[name], trail=(name,))

    def _convert(self, node: Any, trail: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [self._convert(item, trail) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/definitions/")
            if name == _QUANTITY:
                return {"oneOf": [{"type": "string"}, {"type": "number"}]}
            if name in trail:
                # A recursive type (only CustomResourceDefinition's JSONSchemaProps): any value.
                return {}
            return self._convert(self._definitions[name], (*trail, name))
        if node.get("format") == "int-or-string":
            return {"oneOf": [{"type": "string"}, {"type": "integer"}]}
        converted = {
            key: value if key == "properties" else self._convert(value, trail)
            for key, value in node.items()
            if key not in ("description", _GVK) and not key.startswith("x-kubernetes-")
        }
        if "properties" in node:
            converted["properties"] = {
                field: self._convert(value, trail) for field, value in node["properties"].items()
            }
            converted.setdefault("additionalProperties", False)
        return converted


def write(dest: Path, version: str = VERSION) -> Path:
    """Write every kind's schema under `dest` (unless there already) and return `dest`."""
    out = dest / f"v{version}-standalone-strict"
    if (out / ".complete").is_file():
        return dest
    definitions = swagger(version)["definitions"]
    inliner = Inliner(definitions)
    partial = out.with_name(out.name + ".partial")
    for stale in (out, partial):
        shutil.rmtree(stale, ignore_errors=True)
    partial.mkdir(parents=True)
    written = 0
    for name, definition in definitions.items():
        kinds = definition.get(_GVK, [])
        # DeleteOptions, WatchEvent and the like carry one entry per group: not objects.
        if len(kinds) != 1:
            continue
        gvk = kinds[0]
        target = partial / file_name(gvk["group"], gvk["version"], gvk["kind"])
        target.write_text(json.dumps(inliner.schema(name), separators=(",", ":")))
        written += 1
    (partial / ".complete").write_text(f"{written} schemas of Kubernetes {version}\n")
    partial.rename(out)
    print(f"==> {written} schemas in {out}", file=sys.stderr)
    return dest


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    print(write(Path(sys.argv[1]).resolve()))
