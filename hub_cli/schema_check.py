"""`hub schema check` and `hub schema register`: schema files against a registry or a git revision.

Teams keep their `.avsc` files in their repositories; CI runs `hub schema check` on every pull
request so an incompatible change fails the build with the reasons, before it reaches the
registry.
"""

import json
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum, unique
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import httpx
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hub_cli.errors import SchemaCheckError
from hub_core.errors import HubError
from registry.avro import parse
from registry.compatibility import check
from registry.schema_rules import SchemaLimits, check_subject
from registry.types import CompatibilityMode

REGISTRY_MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


@unique
class Verdict(StrEnum):
    COMPATIBLE = "compatible"
    NEW_SUBJECT = "new subject"
    INCOMPATIBLE = "incompatible"
    ERROR = "error"


@unique
class OutputFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    JUNIT = "junit"


class SubjectRule(BaseModel):
    """One entry of the mapping file: which subject a file is, and (offline) its level."""

    model_config = ConfigDict(extra="forbid")

    subject: str = Field(description="The registry subject, e.g. `sales.orders-value`.")
    compatibility: CompatibilityMode | None = Field(
        default=None, description="Level for offline checks (`--against`); default BACKWARD."
    )


class SubjectMapping(BaseModel):
    """The mapping file: `files: {path: {subject, compatibility}}` (paths relative to it)."""

    model_config = ConfigDict(extra="forbid")

    default_compatibility: CompatibilityMode = CompatibilityMode.BACKWARD
    files: dict[str, SubjectRule] = Field(default_factory=dict)

    @classmethod
    def load(cls, path: Path | None) -> tuple["SubjectMapping", Path]:
        if path is None:
            return cls(), Path.cwd()
        try:
            document = yaml.safe_load(path.read_text()) or {}
            return cls.model_validate(document), path.parent
        except (OSError, yaml.YAMLError) as exc:
            raise SchemaCheckError(f"Cannot read the subject mapping {path}: {exc}") from exc
        except ValidationError as exc:
            raise SchemaCheckError(f"Invalid subject mapping {path}: {exc}") from exc

    def rule(self, schema_file: Path, base: Path) -> SubjectRule:
        """The file's rule; unmapped files are `<name>-value` unless named `...-key`/`...-value`."""
        for key, rule in self.files.items():
            if (base / key).resolve() == schema_file.resolve():
                return rule
        stem = schema_file.name.removesuffix(".avsc")
        subject = stem if stem.endswith(("-key", "-value")) else f"{stem}-value"
        return SubjectRule(subject=subject)


@dataclass(frozen=True, slots=True)
class FileResult:
    path: Path
    subject: str
    verdict: Verdict
    compatibility: str = ""
    reasons: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.verdict in (Verdict.INCOMPATIBLE, Verdict.ERROR)


def _client(registry_url: str, api_key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=registry_url.rstrip("/"), timeout=30, headers=headers)


def check_with_registry(
    files: Sequence[Path],
    *,
    registry_url: str,
    mapping: SubjectMapping,
    base: Path,
    api_key: str | None = None,
) -> list[FileResult]:
    """Ask the registry whether each file is compatible with its subject's versions."""
    results = []
    with _client(registry_url, api_key) as http:
        for path in files:
            subject = mapping.rule(path, base).subject
            try:
                text = _read_schema(path)
                level = _registry_call(
                    http, "GET", f"/config/{subject}", params={"defaultToGlobal": "true"}
                )["compatibilityLevel"]
                versions = _registry_call(http, "GET", f"/subjects/{subject}/versions", missing=[])
                if not versions:
                    results.append(FileResult(path, subject, Verdict.NEW_SUBJECT, level))
                    continue
                answer = _registry_call(
                    http,
                    "POST",
                    f"/compatibility/subjects/{subject}/versions",
                    params={"verbose": "true"},
                    json={"schema": text},
                )
            except HubError as exc:
                results.append(FileResult(path, subject, Verdict.ERROR, reasons=[exc.message]))
                continue
            verdict = Verdict.COMPATIBLE if answer["is_compatible"] else Verdict.INCOMPATIBLE
            results.append(FileResult(path, subject, verdict, level, answer.get("messages") or []))
    return results


def check_against_revision(
    files: Sequence[Path], *, revision: str, mapping: SubjectMapping, base: Path
) -> list[FileResult]:
    """Compare each file with its own content at a git revision; no server involved."""
    if files:
        _verify_revision(revision, files[0].parent)
    results = []
    for path in files:
        rule = mapping.rule(path, base)
        level = rule.compatibility or mapping.default_compatibility
        try:
            # Offline, the registry's rules with their default limits: what it would refuse.
            candidate = parse(_read_schema(path), limits=SchemaLimits())
            check_subject(candidate.resolved, rule.subject)
            previous = _git_show(revision, path)
            if previous is None:
                results.append(FileResult(path, rule.subject, Verdict.NEW_SUBJECT, level))
                continue
            report = check([parse(previous).resolved], candidate.resolved, level)
        except HubError as exc:
            results.append(FileResult(path, rule.subject, Verdict.ERROR, reasons=[exc.message]))
            continue
        verdict = Verdict.COMPATIBLE if report.compatible else Verdict.INCOMPATIBLE
        results.append(FileResult(path, rule.subject, verdict, level, report.messages()))
    return results


def register_files(
    files: Sequence[Path],
    *,
    registry_url: str,
    mapping: SubjectMapping,
    base: Path,
    api_key: str | None = None,
) -> list[tuple[Path, str, int]]:
    """Register each file under its subject; stops at the first refusal."""
    registered = []
    with _client(registry_url, api_key) as http:
        for path in files:
            subject = mapping.rule(path, base).subject
            answer = _registry_call(
                http, "POST", f"/subjects/{subject}/versions", json={"schema": _read_schema(path)}
            )
            registered.append((path, subject, int(answer["id"])))
    return registered


def render(results: Sequence[FileResult], output: OutputFormat) -> str:
    """The results as text for people, JSON for scripts, or JUnit XML for CI dashboards."""
    if output is OutputFormat.JSON:
        return json.dumps(
            [
                {
                    "file": str(r.path),
                    "subject": r.subject,
                    "verdict": r.verdict.value,
                    "compatibility": r.compatibility,
                    "reasons": r.reasons,
                }
                for r in results
            ],
            indent=2,
        )
    if output is OutputFormat.JUNIT:
        return _junit(results)
    lines = []
    for r in results:
        mark = "FAIL" if r.failed else "ok  "
        level = f", {r.compatibility}" if r.compatibility else ""
        lines.append(f"{mark} {r.path} ({r.subject}{level}): {r.verdict.value}")
        lines.extend(f"       - {reason}" for reason in r.reasons)
    failed = sum(r.failed for r in results)
    lines.append(f"{len(results) - failed} passed, {failed} failed")
    return "\n".join(lines)


def _junit(results: Sequence[FileResult]) -> str:
    suite = ET.Element(
        "testsuite",
        name="hub schema check",
        tests=str(len(results)),
        failures=str(sum(r.verdict is Verdict.INCOMPATIBLE for r in results)),
        errors=str(sum(r.verdict is Verdict.ERROR for r in results)),
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=r.subject, name=str(r.path))
        if r.failed:
            tag = "failure" if r.verdict is Verdict.INCOMPATIBLE else "error"
            problem = ET.SubElement(case, tag, message=f"{r.verdict.value} ({r.compatibility})")
            problem.text = "\n".join(r.reasons)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)


def expand(paths: Iterable[Path]) -> list[Path]:
    """Files as given, and every `.avsc` below directories, sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(path.rglob("*.avsc")))
        elif path.exists():
            found.append(path)
        else:
            raise SchemaCheckError(f"No such schema file or directory: {path}")
    if not found:
        raise SchemaCheckError("No .avsc files found in the given paths.")
    return found


def _read_schema(path: Path) -> str:
    text = path.read_text()
    parse(text)  # a file that is not a valid schema is an error, with the parser's reason
    return text


def _verify_revision(revision: str, cwd: Path) -> None:
    verify = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        cwd=cwd, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if verify.returncode != 0:
        raise SchemaCheckError(
            f"Unknown git revision '{revision}'. In CI, fetch it first "
            "(e.g. `git fetch origin main` and use `origin/main`)."
        )


def _git_show(revision: str, path: Path) -> str | None:
    """The file's content at `revision`, or None when it did not exist there."""
    top = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"],
        cwd=path.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if top.returncode != 0:
        raise SchemaCheckError(f"{path} is not inside a git repository: {top.stderr.strip()}")
    relative = path.resolve().relative_to(Path(top.stdout.strip()).resolve())
    shown = subprocess.run(
        ["git", "show", f"{revision}:{relative.as_posix()}"],
        cwd=path.parent, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return shown.stdout if shown.returncode == 0 else None


def _registry_call(
    http: httpx.Client, method: str, path: str, *, missing: Any = None, **kwargs: Any
) -> Any:
    try:
        response = http.request(
            method, path, headers={"Content-Type": REGISTRY_MEDIA_TYPE}, **kwargs
        )
    except httpx.HTTPError as exc:
        raise SchemaCheckError(
            f"Registry at {http.base_url} is unreachable: {exc}. Check --registry."
        ) from exc
    if response.status_code == 404 and missing is not None:
        return missing
    if response.status_code >= 400:
        try:
            body = response.json()
            detail = f"{body['message']} (error {body['error_code']})"
        except (ValueError, KeyError):
            detail = response.text[:300]
        raise SchemaCheckError(
            f"Registry answered {response.status_code} to {method} {path}: {detail}"
        )
    return response.json()
