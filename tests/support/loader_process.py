"""`hub load run` as a process of its own, as an operator runs it: for tests that kill it, or
run it on a Spark cluster (one SparkSession per Python process: the tests' own is local)."""

import os
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

REPO = Path(__file__).resolve().parents[2]
JARS = Path(os.environ.get("HUB_HOME", REPO / ".hub")) / "jars"


def loader_env(home: Path, api_url: str, bootstrap: str, topic: str) -> dict[str, str]:
    """A loader of `topic` alone, with its warehouse, checkpoints and embedded metastore in
    `home`: nothing shared with the tests' own Spark session."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUB_")}
    env.update(
        {
            "HUB_KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "HUB_LOADER_MASTER": "local[2]",
            "HUB_LOADER_DRIVER_MEMORY": "1g",
            "HUB_LOADER_EXECUTOR_MEMORY": "1g",
            "HUB_LOADER_SHUFFLE_PARTITIONS": "2",
            "HUB_LOADER_WAREHOUSE_DIR": str(home / "warehouse"),
            "HUB_LOADER_METASTORE_DIR": str(home / "metastore"),
            "HUB_LOADER_METASTORE_URL": (
                f"jdbc:derby:;databaseName={home / 'metastore' / 'metastore_db'};create=true"
            ),
            "HUB_LOADER_CHECKPOINT_DIR": str(home / "checkpoints"),
            "HUB_LOADER_JARS_DIR": str(JARS / "spark"),
            "HUB_LOADER_REGISTRY_URL": api_url,
            "HUB_LOADER_TOPIC_PATTERN": topic.replace(".", "\\."),
            "HUB_LOADER_TRIGGER_SECONDS": "1",
            # Driver and executors on loopback, where Kafka and the registry listen here.
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    return env


class LoaderProcess:
    """`hub load run [ARGS]` in its own process group, so a kill takes its driver JVM along."""

    def __init__(self, env: dict[str, str], log: Path, *args: str) -> None:
        self._env, self.log, self._args = env, log, args

    def __enter__(self) -> "LoaderProcess":
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "hub"), "load", "run", *self._args],
            env=self._env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.kill()
        self._out.close()

    def kill(self) -> None:
        """SIGKILL the loader and its driver JVM, as a crash would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, text: str, *, after: int = 0, timeout_s: float = 300) -> int:
        """Wait until the log holds `text` past position `after`; returns where it ends."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.text().find(text, after)
            if found >= 0:
                return found + len(text)
            assert self.process.poll() is None, self.text()[-3000:]
            time.sleep(0.2)
        raise AssertionError(f"the loader did not log {text!r}: {self.text()[-3000:]}")
