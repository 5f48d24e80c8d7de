"""Where a local Spark job's executor threads spend their CPU, from JDK Flight Recorder samples.

In `local[N]` mode the executors are threads of the driver JVM, so one recording of that JVM
(`jcmd <pid> JFR.start`, the JDK's `profile` settings: a sample of each running thread every
10 ms) holds them. Each sample of an executor thread goes to the part that names the frame
nearest the running one: Avro called by generated code is Avro decoding. Generated code is the
exception, a part only when no other part names a frame, because the other parts call it too
(Delta's statistics, the Kafka reader's row conversion and the observed counts each run a
generated projection). What no part names is "other".

Used by `bench/loader.py --profile`; it needs the JDK's `jcmd` and `jfr` on the PATH.
"""

import json
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_S = 0.010  # the `profile` settings' period for running Java threads

# (part, substrings of a frame's `package.Class.method` that put a sample in it)
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Delta statistics", ("DeltaTaskStatisticsTracker", "DeltaJobStatisticsTracker")),
    ("Parquet encoding", ("org.apache.parquet.", "ParquetWriteSupport", "ParquetOutputWriter")),
    ("Avro decoding", ("org.apache.avro.", "AvroDeserializer", "AvroDataToCatalyst")),
    (
        "Kafka read",
        (
            "org.apache.kafka.",
            "KafkaBatchPartitionReader",
            "KafkaDataConsumer",
            "KafkaRecordToRowConverter",
        ),
    ),
    ("observed counts", ("AggregatingAccumulator", "CollectMetricsExec")),
    ("sort before a partitioned write", ("UnsafeExternalSorter", "UnsafeInMemorySorter")),
    ("generated code", ("GeneratedClass",)),
)
GENERATED = PARTS[-1][0]
_EXECUTOR_THREAD = "Executor task launch worker"


@dataclass
class Profile:
    """Executor CPU by part, summed over the recordings added to it."""

    recordings: int = 0
    parts: Counter[str] = field(default_factory=Counter)

    def add(self, recording: Path) -> None:
        for stack in executor_stacks(recording):
            self.parts[part_of(stack)] += 1
        self.recordings += 1

    def seconds(self, part: str) -> float:
        """CPU seconds of `part` per recording (one catch-up each, in `bench/loader.py`)."""
        return self.parts[part] * SAMPLE_S / max(1, self.recordings)

    def total_s(self) -> float:
        return sum(self.parts.values()) * SAMPLE_S / max(1, self.recordings)


@contextmanager
def recording(pid: int, path: Path) -> Iterator[Path]:
    """Record the JVM `pid` into `path` while the block runs."""
    name = f"bench-{path.stem}"
    _jcmd(pid, "JFR.start", f"name={name}", "settings=profile", f"filename={path}")
    try:
        yield path
    finally:
        _jcmd(pid, "JFR.stop", f"name={name}")


def executor_stacks(recording: Path) -> Iterator[list[str]]:
    """The stacks of the executor threads' samples, running frame first, as `pkg.Class.method`."""
    printed = subprocess.run(
        ["jfr", "print", "--json", "--stack-depth", "128", "--events", "jdk.ExecutionSample",
         str(recording)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for event in json.loads(printed)["recording"]["events"]:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or ""
        if not thread.startswith(_EXECUTOR_THREAD) or not values.get("stackTrace"):
            continue
        yield [
            f"{frame['method']['type']['name'].replace('/', '.')}.{frame['method']['name']}"
            for frame in values["stackTrace"]["frames"]
        ]


def part_of(stack: list[str]) -> str:
    """The part a sample goes in (see the module's docstring)."""
    generated = False
    for frame in stack:
        for part, names in PARTS:
            if any(name in frame for name in names):
                if part != GENERATED:
                    return part
                generated = True
    return GENERATED if generated else "other"


def _jcmd(pid: int, *command: str) -> None:
    subprocess.run(["jcmd", str(pid), *command], capture_output=True, text=True, check=True)
