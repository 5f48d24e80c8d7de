"""Counting the threads librdkafka runs in this process."""

from contextlib import suppress
from pathlib import Path


def librdkafka_threads() -> int:
    """Threads of this process that librdkafka started (it names them `rdk:...`)."""
    count = 0
    for task in Path("/proc/self/task").iterdir():
        with suppress(FileNotFoundError):  # the thread ended meanwhile
            count += (task / "comm").read_text().startswith("rdk:")
    return count
