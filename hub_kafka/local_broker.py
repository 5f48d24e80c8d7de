"""A single-node Kafka broker in KRaft mode, run from the jars `make jars` fetched.

Used by `hub kafka start|stop|status`, by `hub up` and by the test fixtures. Everything it writes
(data, logs, configuration, pid file, TLS files) lives under one state directory.

With `broker_security=sasl_ssl` the client listener speaks SASL_SSL: TLS with a certificate from
a private CA made at first start (`hub_kafka.certificates`), and SCRAM-SHA-512, SCRAM-SHA-256 or
PLAIN logins. SCRAM users are stored when the storage is formatted (KIP-900), so the broker
authenticates clients from its first second. The controller listener stays PLAINTEXT on
loopback. `client_settings()` gives the settings a client needs to connect.

The same class runs each node of a local cluster (`hub_kafka.local_cluster`): a `NodeLayout`
then gives the node's id, folder, ports and controller quorum; the CA, certificate and SASL
password stay under `broker_home/tls`, shared by every node.
"""

import base64
import logging
import os
import re
import secrets
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from hub_core.environment import child_environment
from hub_core.processes import BackgroundProcess, java_command, port_open
from hub_kafka.certificates import TlsFiles, make_certificates
from hub_kafka.errors import BrokerError
from hub_kafka.security import client_config
from hub_kafka.settings import BrokerSecurity, KafkaSettings, SecurityProtocol

log = logging.getLogger(__name__)

_SCRAM_MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256")
_LISTENER = "SASL_SSL"
# What the storage tool's `--add-scram` reads unquoted inside `[name=...,password=...]`.
_SCRAM_SAFE = re.compile(r"[A-Za-z0-9._~-]+")

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
class NodeLayout:
    """Where one KRaft node (broker and controller in one JVM) lives and listens, and the
    controller quorum it belongs to (`controller.quorum.voters`: `id@host:port,...`)."""

    node_id: int
    home: Path
    port: int
    controller_port: int
    voters: str
    cluster_size: int


@dataclass(frozen=True, slots=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap_servers: str
    ready: bool


class LocalBroker:
    """Start, stop and inspect one local KRaft broker: the single broker the settings describe,
    or one node of a local cluster when `node` is given."""

    def __init__(self, settings: KafkaSettings, node: NodeLayout | None = None) -> None:
        self._settings = settings
        self.node = node or NodeLayout(
            node_id=1,
            home=settings.broker_home,
            port=settings.broker_port,
            controller_port=settings.controller_port,
            voters=f"1@127.0.0.1:{settings.controller_port}",
            cluster_size=1,
        )
        self.home = self.node.home
        self.bootstrap_servers = f"127.0.0.1:{self.node.port}"
        name = "Kafka broker" if node is None else f"Kafka node {self.node.node_id}"
        self._process = BackgroundProcess(name, self.home / "broker.pid")
        self.tls = TlsFiles.under(settings.broker_home / "tls")
        self._secured = settings.broker_security is BrokerSecurity.SASL_SSL or self._runs_secured()

    @property
    def log_file(self) -> Path:
        return self.home / "logs" / "server.log"

    @property
    def secured(self) -> bool:
        """Whether the client listener is SASL_SSL."""
        return self._secured

    def _runs_secured(self) -> bool:
        """Whether a broker already runs here with a SASL_SSL listener (started with
        `--sasl-ssl`): `status` and `stop` then need not be told again."""
        config = self.home / "server.properties"
        return (
            self._process.pid() is not None
            and config.is_file()
            and f"listeners={_LISTENER}://" in config.read_text()
        )

    @property
    def sasl_username(self) -> str:
        return self._settings.sasl_username or "hub"

    @property
    def sasl_password_file(self) -> Path:
        """Where the password of the broker's SCRAM user is kept (mode 0600)."""
        return self._settings.broker_home / "tls" / "sasl-password"

    def client_settings(self) -> KafkaSettings:
        """Settings with which a client reaches this broker (and logs in, if it is secured)."""
        update: dict[str, object] = {"bootstrap_servers": self.bootstrap_servers}
        if self._secured:
            update |= {
                "security_protocol": SecurityProtocol.SASL_SSL,
                "sasl_username": self.sasl_username,
                # The password the broker was given (it made its user with it), else its file.
                **(
                    {}
                    if self._settings.sasl_password is not None
                    else {"sasl_password_file": self.sasl_password_file}
                ),
                "ssl_ca_location": self.tls.ca_certificate,
            }
        return self._settings.model_copy(update=update)

    def start(self, *, timeout_s: float = 90.0) -> BrokerStatus:
        """Start the broker (formatting its storage on first start) and wait until it serves."""
        process = self.launch()
        self.wait_ready(timeout_s, process=process)
        return self.status()

    def launch(self, *, cluster_id: str | None = None) -> subprocess.Popen[bytes] | None:
        """Start the JVM without waiting for it to serve (the nodes of a cluster serve only
        once a majority of controllers runs, so a cluster launches them all first). Formats
        the storage on first start, with `cluster_id` (a new one when not given). None when the
        broker already runs."""
        current = self.status()
        if current.running:
            log.info("%s already running (pid %s)", self._process.name, current.pid)
            return None
        jars = self._classpath()
        if self._secured:
            self._prepare_security()
        config = self._write_config()
        if not (self.home / "data" / "meta.properties").exists():
            self._format(jars, config, cluster_id or new_cluster_id())
        log.info(
            "starting %s on %s (logs: %s)",
            self._process.name,
            self.bootstrap_servers,
            self.log_file,
        )
        return self._process.start(
            [*self._java(jars), "kafka.Kafka", str(config)],
            output=self.home / "logs" / "stdout.log",
        )

    def wait_ready(
        self, timeout_s: float, *, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        """Wait until the broker answers; a `process` just launched is stopped if it does not."""
        try:
            self._wait_ready(timeout_s, process=process)
        except BrokerError:
            if process is not None:
                self.stop()
            raise
        log.info("%s ready (pid %s)", self._process.name, self._process.pid())

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
        port, controller = self.node.port, self.node.controller_port
        listener = _LISTENER if self._secured else "PLAINTEXT"
        # Internal topics get as many replicas as the cluster has nodes, up to 3.
        replicas = min(3, self.node.cluster_size)
        min_insync = str(max(1, replicas - 1))
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(self.node.node_id),
            "controller.quorum.voters": self.node.voters,
            "listeners": f"{listener}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
            "advertised.listeners": f"{listener}://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": listener,
            "listener.security.protocol.map": f"{listener}:{listener},CONTROLLER:PLAINTEXT",
            **(self._security_properties() if self._secured else {}),
            "log.dirs": str(self.home / "data"),
            "num.partitions": "1",
            "offsets.topic.replication.factor": str(replicas),
            "transaction.state.log.replication.factor": str(replicas),
            "transaction.state.log.min.isr": min_insync,
            "share.coordinator.state.topic.replication.factor": str(replicas),
            "share.coordinator.state.topic.min.isr": min_insync,
            "default.replication.factor": str(replicas),
            "group.initial.rebalance.delay.ms": "0",
            # Topics are created deliberately (by the hub), never by a typo in a consumer.
            "auto.create.topics.enable": "false",
        }
        path = self.home / "server.properties"
        path.unlink(missing_ok=True)  # it may hold a password: readable by the owner only
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(descriptor, "w") as out:
            out.write("".join(f"{k}={_escaped(v)}\n" for k, v in properties.items()))
        return path

    def _prepare_security(self) -> None:
        """Make the CA and broker certificate, and the SCRAM user's password, unless present."""
        if not self.tls.exist():
            log.info("making a CA and a broker certificate in %s", self.tls.ca_certificate.parent)
            make_certificates(self.tls)
        if not self.sasl_password_file.is_file():
            password = self._settings.sasl_password_value() or secrets.token_urlsafe(24)
            descriptor = os.open(
                self.sasl_password_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600
            )
            with os.fdopen(descriptor, "w") as out:
                out.write(password)
        if not _SCRAM_SAFE.fullmatch(self.sasl_username):
            raise BrokerError(
                "The local broker's SASL user name may hold only letters, digits and '._~-': "
                "change HUB_KAFKA_SASL_USERNAME."
            )
        if not _SCRAM_SAFE.fullmatch(self._sasl_password()):
            raise BrokerError(
                "The local broker's SASL password may hold only letters, digits and '._~-' "
                "(the storage tool reads it unquoted): change HUB_KAFKA_SASL_PASSWORD, or "
                f"delete {self.sasl_password_file} to have one made."
            )

    def _sasl_password(self) -> str:
        return self.sasl_password_file.read_text().rstrip("\r\n")

    def _security_properties(self) -> dict[str, str]:
        """The SASL_SSL listener: PEM certificates given inline (a PEM key in a file would
        have to be encrypted), every mechanism the hub's clients support, and the broker's own
        login for the inter-broker connection."""
        user, password = self.sasl_username, self._sasl_password()
        scram = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";'
        )
        plain = (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{user}" password="{password}" user_{user}="{password}";'
        )
        prefix = f"listener.name.{_LISTENER.lower()}"
        return {
            "sasl.enabled.mechanisms": ",".join((*_SCRAM_MECHANISMS, "PLAIN")),
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            f"{prefix}.scram-sha-512.sasl.jaas.config": scram,
            f"{prefix}.scram-sha-256.sasl.jaas.config": scram,
            f"{prefix}.plain.sasl.jaas.config": plain,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": self.tls.certificate.read_text(),
            "ssl.keystore.key": self.tls.key.read_text(),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.tls.ca_certificate),
        }

    def _format(self, classpath: str, config: Path, cluster_id: str) -> None:
        log.info("formatting Kafka storage in %s (cluster id %s)", self.home / "data", cluster_id)
        users: list[str] = []
        if self._secured:
            log.info("adding SCRAM user '%s' to the storage", self.sasl_username)
            login = f"name={self.sasl_username},password={self._sasl_password()}"
            users = [f"--add-scram={mechanism}=[{login}]" for mechanism in _SCRAM_MECHANISMS]
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
                *users,
            ],
            capture_output=True,
            text=True,
            check=False,
            env=child_environment(),
        )
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()[-2000:]
            if self._secured:
                output = output.replace(self._sasl_password(), "***")
            raise BrokerError(
                f"Formatting Kafka storage failed (exit {result.returncode}): {output}"
            )

    def _wait_ready(
        self, timeout_s: float, *, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        self._process.wait_ready(
            lambda: port_open(self.node.port) and self._answers(timeout_s=2.0),
            address=self.bootstrap_servers,
            logs=f"{self.log_file} and {self.home / 'logs' / 'stdout.log'}",
            error=BrokerError,
            timeout_s=timeout_s,
            interval_s=0.5,
            process=process,
        )

    def _answers(self, *, timeout_s: float) -> bool:
        """Whether this broker answers on its port. The answer must name the cluster its
        storage was formatted for: while a broker is down, another process may take its free
        port, and a broker of another cluster answering there is not this one."""
        admin = AdminClient({**client_config(self.client_settings()), "log_level": 0})
        try:
            metadata = admin.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        formatted = self.formatted_cluster_id()
        return bool(metadata.brokers) and (formatted is None or metadata.cluster_id == formatted)

    def formatted_cluster_id(self) -> str | None:
        """The cluster id in this broker's `meta.properties`; None before its storage exists."""
        try:
            lines = (self.home / "data" / "meta.properties").read_text().splitlines()
        except FileNotFoundError:
            return None
        for line in lines:
            name, _, value = line.partition("=")
            if name.strip() == "cluster.id":
                return value.strip()
        return None


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _escaped(value: str) -> str:
    """A value for a Java properties file: line breaks (in inline PEM) and backslashes escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")
