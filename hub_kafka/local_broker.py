"""A single-node Kafka broker in KRaft mode, run from the jars `make jars` fetched.

Used by `hub kafka start|stop|status`, by `hub up` and by the test fixtures. Everything it writes
(data, logs, configuration, pid file) lives under one state directory.
"""

import base64
import logging
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hub_core.environment import child_environment
from hub_core.processes import BackgroundProcess, java_command, port_open
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
        self._process = BackgroundProcess("Kafka broker", self.home / "broker.pid")

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
        process = self._process.start(
            [*self._java(jars), "kafka.Kafka", str(config)],
            output=self.home / "logs" / "stdout.log",
        )
        try:
            self._wait_ready(timeout_s, process=process)
        except BrokerError:
            self.stop()
            raise
        log.info("Kafka broker ready (pid %s)", process.pid)
        return self.status()

    def stop(self, *, timeout_s: float = 30.0) -> bool:
        """Stop the broker cleanly (SIGTERM, then SIGKILL after `timeout_s`). True if it ran."""
        return self._process.stop(timeout_s=timeout_s)

    def status(self) -> BrokerStatus:
        """Whether the broker process runs and answers metadata requests."""
        pid = self._process.pid()
        ready = pid is not None and self._answers(timeout_s=2.0)
        return BrokerStatus(
            running=pid is not None, pid=pid, bootstrap_servers=self.bootstrap_servers, ready=ready
        )

    def _classpath(self) -> str:
        jars_dir = self._settings.broker_jars_dir
        if not any(jars_dir.glob("kafka_*.jar")):
            raise BrokerError(
                f"No Kafka broker jars in {jars_dir}. Run `make jars` (or set "
                "HUB_KAFKA_BROKER_JARS_DIR to a folder holding them)."
            )
        return f"{jars_dir}/*"

    def _java(self, classpath: str) -> list[str]:
        return java_command(
            heap=self._settings.broker_heap,
            fixed_heap=True,
            classpath=classpath,
            options=[
                "-XX:+UseG1GC",
                f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.home / 'logs'}",
            ],
        )

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
                # One argument: a URL-safe base64 id may start with '-', which would otherwise
                # be read as an option (1 in 64 runs failed to format).
                f"--cluster-id={cluster_id}",
                "-c",
                str(config),
            ],
            capture_output=True,
            text=True,
            check=False,
            env=child_environment(),
        )
        if result.returncode != 0:
            raise BrokerError(
                f"Formatting Kafka storage failed (exit {result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )

    def _wait_ready(
        self, timeout_s: float, *, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        self._process.wait_ready(
            lambda: port_open(self._settings.broker_port) and self._answers(timeout_s=2.0),
            address=self.bootstrap_servers,
            logs=f"{self.log_file} and {self.home / 'logs' / 'stdout.log'}",
            error=BrokerError,
            timeout_s=timeout_s,
            interval_s=0.5,
            process=process,
        )

    def _answers(self, *, timeout_s: float) -> bool:
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        try:
            metadata = admin.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        return bool(metadata.brokers)
