"""`hub load plan`: what registering a candidate schema would do to `bronze.<topic>`.

Pure logic over Avro schemas and the table's columns; no Spark. The table's columns are read
from its Delta log (the newest `metaData` action of the JSON commits), so a plan can be made
while the loader runs and holds the metastore.
"""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry.compatibility import reader_can_read
from spark_loaders.tables.evolution import (
    ColumnChange,
    SqlType,
    diff,
    record_columns,
    spark_columns,
)
from spark_loaders.types import QuarantineReason


@dataclass(frozen=True, slots=True)
class SchemaPlan:
    """The table changes a candidate schema causes, and what would be quarantined."""

    table: str
    baseline: str  # what the candidate was compared with
    changes: tuple[ColumnChange, ...]
    quarantined: tuple[str, ...] = ()  # reason code: why, per kind of record
    registry_verdict: tuple[bool, tuple[str, ...]] | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def refused(self) -> bool:
        """Whether some records would go to quarantine, or the registry would refuse."""
        rejected = self.registry_verdict is not None and not self.registry_verdict[0]
        return bool(self.quarantined) or rejected

    def render(self) -> str:
        """The plan as text for a terminal."""
        lines = [f"{self.table} (compared with {self.baseline}):"]
        applied = [c for c in self.changes if c.applicable]
        lines += [f"  {c.describe()}" for c in applied] or ["  no column changes"]
        lines += [f"  {q}" for q in self.quarantined]
        lines += [f"  note: {n}" for n in self.notes]
        if self.registry_verdict is not None:
            ok, messages = self.registry_verdict
            lines.append(
                "registry: compatible, registration accepted"
                if ok
                else "registry: INCOMPATIBLE, registration would be refused (409)"
            )
            lines += [f"  {m}" for m in messages if not ok]
        return "\n".join(lines)


def plan(
    candidate: Any,
    *,
    table: str,
    table_columns: Mapping[str, tuple[SqlType, bool]] | None,
    latest: Any | None,
    latest_version: int | None = None,
) -> SchemaPlan:
    """Compare `candidate` (an Avro schema as JSON) with the table, or the latest version.

    `table_columns` are the table's columns (None when it does not exist yet); `latest` is the
    subject's newest registered schema (None when the subject is new).
    """
    incoming = record_columns(candidate)
    if table_columns is not None:
        baseline = f"the columns of {table}"
        current = table_columns
    elif latest is not None:
        baseline = f"registered version {latest_version or 'latest'} (the table does not exist)"
        current = record_columns(latest)
    else:
        baseline = "nothing (new subject, no table)"
        current = {}
    changes = tuple(diff(current, incoming))
    quarantined = [
        f"{QuarantineReason.TYPE_CHANGE_UNSUPPORTED}: {c.describe()}"
        for c in changes
        if not c.applicable
    ]
    if latest is not None:
        problems = reader_can_read(candidate, latest)
        if problems:
            quarantined.append(
                f"{QuarantineReason.SCHEMA_UNRESOLVABLE}: records written with version "
                f"{latest_version or 'latest'} cannot be resolved to the candidate: "
                + "; ".join(p.message() for p in problems)
            )
    return SchemaPlan(table, baseline, changes, tuple(quarantined))


def table_columns_from_log(location: Path) -> Mapping[str, tuple[SqlType, bool]] | None:
    """The columns of the Delta table at `location`, from its newest JSON commit with metadata.

    None when there is no Delta table there.
    """
    log_dir = location / "_delta_log"
    commits = sorted(log_dir.glob("*.json"), reverse=True) if log_dir.is_dir() else []
    for commit in commits:
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "metaData" in action:
                schema = json.loads(action["metaData"]["schemaString"])
                return spark_columns(schema)
    return None
