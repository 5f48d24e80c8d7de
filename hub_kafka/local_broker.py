"""A single-node Kafka broker in KRaft mode, run from the jars `make jars` fetched.

Used by `hub kafka start|stop|status`, by `hub up` and by the test fixtures. Everything it writes
(data, logs, configuration, pid file) lives under one state directory.
"""

import base64
import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hub_kafka.errors import BrokerError
from hub_kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

_LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = WARN
"""


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    ready: bool


class LocalBroker:
    """Start, stop and inspect one local KRaft broker."""

    def __init__(self, settings: KafkaSettings) -> None:
        self._settings = settings
        self.home = settings.broker_home
        self.bootstrap_servers = f"127.0.0.1:{settings.broker_port}"

    @property
    def _pid_file(self) -> Path:
        return self.home / "broker.pid"

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"

    def start(self, *, timeout_s: float = 90.0) -> BrokerStatus:
        """Start the broker (formatting its storage on first start) and wait until it serves."""
        current = self.status()
        if current.running:
            log.info("Kafka broker already running (pid %s)", current.pid)
            self._wait_ready(timeout_s)
            return self.status()
        jars = self._classpath()
        config = self._write_config()
        if not (self.home / "data" / "meta.properties").exists():
            self._format(jars, config)
        log.info("starting Kafka broker on %s (logs: %s)", self.bootstrap_servers, self.log_file)
        stdout = (self.home / "logs" / "stdout.log").open("ab")
        process = subprocess.Popen(
            [*self._java(jars), "kafka.Kafka", str(config)],
            stdout=stdout,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in a terminal reaches the hub, which stops us
        )
        self._pid_file.write_text(str(process.pid))
        try:
            self._wait_ready(timeout_s, process=process)
        except BrokerError:
            self.stop()
            raise
        log.info("Kafka broker ready (pid %s)", process.pid)
        return self.status()

    def stop(self, *, timeout_s: float = 30.0) -> bool:
        """Stop the broker cleanly (SIGTERM, then SIGKILL after `timeout_s`). True if it ran."""
        pid = self._pid()
        if pid is None:
            return False
        log.info("stopping Kafka broker (pid %s)", pid)
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(pid):
            log.warning("Kafka broker did not stop in %.0fs; killing it", timeout_s)
            _signal(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self._pid_file.unlink(missing_ok=True)
        return True

    def status(self) -> BrokerStatus:
        """Whether the broker process runs and answers metadata requests."""
        pid = self._pid()
        ready = pid is not None and self._answers(timeout_s=2.0)
        return BrokerStatus(
            running=pid is not None, pid=pid, bootstrap_servers=self.bootstrap_servers, ready=ready
        )

    def _pid(self) -> int | None:
        try:
            pid = int(self._pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not _alive(pid):
            self._pid_file.unlink(missing_ok=True)
            return None
        return pid

    def _classpath(self) -> str:
        jars_dir = self._settings.broker_jars_dir
        if not any(jars_dir.glob("kafka_*.jar")):
            raise BrokerError(
                f"No Kafka broker jars in {jars_dir}. Run `make jars` (or set "
                "HUB_KAFKA_BROKER_JARS_DIR to a folder holding them)."
            )
        return f"{jars_dir}/*"

    def _java(self, classpath: str) -> list[str]:
        java_home = os.environ.get("JAVA_HOME")
        java = str(Path(java_home) / "bin" / "java") if java_home else "java"
        return [
            java,
            f"-Xmx{self._settings.broker_heap}",
            f"-Xms{self._settings.broker_heap}",
            "-XX:+UseG1GC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={self.home / 'logs'}",
            "-cp",
            classpath,
        ]

    def _write_config(self) -> Path:
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        (self.home / "log4j2.properties").write_text(_LOG4J2.format(log_file=self.log_file))
        port, controller = self._settings.broker_port, self._settings.controller_port
        properties = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.home / "data"),
            "num.partitions": "1",
            # One node: internal topics cannot have more replicas than that.
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Topics are created deliberately (by the hub), never by a typo in a consumer.
            "auto.create.topics.enable": "false",
        }
        path = self.home / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
        return path

    def _format(self, classpath: str, config: Path) -> None:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        log.info("formatting Kafka storage in %s (cluster id %s)", self.home / "data", cluster_id)
        result = subprocess.run(
            [
                *self._java(classpath),
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(config),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerError(
                f"Formatting Kafka storage failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )

    def _wait_ready(
        self, timeout_s: float, *, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process is not None and process.poll() is not None:
                raise BrokerError(
                    f"Kafka broker exited with code {process.returncode} during start-up; "
                    f"see {self.log_file} and {self.home / 'logs' / 'stdout.log'}."
                )
            if _port_open(self._settings.broker_port) and self._answers(timeout_s=2.0):
                return
            time.sleep(0.5)
        raise BrokerError(
            f"Kafka broker did not become ready on {self.bootstrap_servers} within "
            f"{timeout_s:.0f}s; see {self.log_file}."
        )

    def _answers(self, *, timeout_s: float) -> bool:
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        try:
            metadata = admin.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        return bool(metadata.brokers)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still "exists"; reap it if it is ours.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return _not_zombie(pid)


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0
