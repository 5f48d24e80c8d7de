"""Delta transaction logs written by hand, for tests of the lineage index without Spark."""

import json
from pathlib import Path

from hub_core.ledger import LedgerEntry


def write_commit(
    table_dir: Path,
    version: int,
    entry: LedgerEntry | None,
    *,
    operation: str = "WRITE",
    timestamp_ms: int = 1_790_000_000_000,
    table_id: str | None = None,
) -> None:
    """A commit file as Delta writes it: commitInfo first, then the actions; with `table_id`,
    a `metaData` action setting the table's id, as a table's first commit has."""
    log = table_dir / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info: dict[str, object] = {"timestamp": timestamp_ms, "operation": operation}
    if entry is not None:
        info["userMetadata"] = entry.encode()
    lines = [json.dumps({"commitInfo": info}, separators=(",", ":"))]
    if table_id is not None:
        metadata = {"id": table_id, "format": {"provider": "parquet"}, "partitionColumns": []}
        lines.append(json.dumps({"metaData": metadata}, separators=(",", ":")))
    add = {"path": f"part-{version}.parquet", "size": 1, "dataChange": True}
    lines.append(json.dumps({"add": add}, separators=(",", ":")))
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
