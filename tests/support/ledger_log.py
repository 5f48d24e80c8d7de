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
) -> None:
    """A commit file as Delta writes it: commitInfo first, then the actions."""
    log = table_dir / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info: dict[str, object] = {"timestamp": timestamp_ms, "operation": operation}
    if entry is not None:
        info["userMetadata"] = entry.encode()
    lines = [
        json.dumps({"commitInfo": info}),
        json.dumps({"add": {"path": f"part-{version}.parquet", "size": 1, "dataChange": True}}),
    ]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
