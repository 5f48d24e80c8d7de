"""`hub kafka start|stop|status`: the local broker's life cycle on a real JVM."""

import os
import stat
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from hub_kafka.admin import TopicAdmin
from hub_kafka.errors import BrokerError
from hub_kafka.local_broker import LocalBroker
from hub_kafka.settings import KafkaSettings
from tests.conftest import JARS
from tests.support.cli import hub
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


def test_broker_starts_keeps_data_across_restarts_and_stops_cleanly(tmp_path: Path) -> None:
    settings = KafkaSettings(
        broker_home=tmp_path / "kafka",
        broker_jars_dir=JARS / "kafka",
        broker_port=free_port(),
        controller_port=free_port(),
    )
    broker = LocalBroker(settings)
    assert not broker.status().running
    try:
        status = broker.start()
        assert status.running and status.ready
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("life.cycle", num_partitions=2)])["life.cycle"].result(30)

        assert broker.stop()
        assert not broker.status().running
        assert not broker.stop()  # stopping a stopped broker is a no-op

        broker.start()  # the formatted storage is reused, so the topic survives
        topics = AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(
            timeout=10
        )
        assert len(topics.topics["life.cycle"].partitions) == 2
    finally:
        broker.stop()
    assert not (tmp_path / "kafka" / "broker.pid").exists()


def test_a_broker_of_another_cluster_on_the_port_is_not_taken_for_this_one(
    tmp_path: Path, kafka_bootstrap: str
) -> None:
    """While a broker is down, another process may take its free port: a restart must not
    report ready because someone answers there (clients would then write to the wrong
    cluster). This broker's storage names its own cluster; the session's broker holds the
    port."""
    port = int(kafka_bootstrap.rsplit(":", 1)[1])
    settings = KafkaSettings(
        broker_home=tmp_path / "kafka",
        broker_jars_dir=JARS / "kafka",
        broker_port=port,
        controller_port=free_port(),
    )
    broker = LocalBroker(settings)
    (broker.home / "data").mkdir(parents=True)
    (broker.home / "data" / "meta.properties").write_text(
        "version=1\ncluster.id=another-cluster-id-000\nnode.id=1\n"
    )
    assert broker.formatted_cluster_id() == "another-cluster-id-000"
    with pytest.raises(BrokerError):
        broker.wait_ready(3.0)


def test_missing_jars_give_an_error_that_names_the_fix(tmp_path: Path) -> None:
    settings = KafkaSettings(broker_home=tmp_path / "k", broker_jars_dir=tmp_path / "no-jars")
    with pytest.raises(BrokerError, match="make jars"):
        LocalBroker(settings).start()


def test_hub_kafka_start_sasl_ssl_serves_only_logged_in_tls_clients(tmp_path: Path) -> None:
    home = tmp_path / "kafka"
    env = {
        **os.environ,
        "HUB_KAFKA_BROKER_HOME": str(home),
        "HUB_KAFKA_BROKER_JARS_DIR": str(JARS / "kafka"),
        "HUB_KAFKA_BROKER_PORT": str(free_port()),
        "HUB_KAFKA_CONTROLLER_PORT": str(free_port()),
    }
    try:
        started = hub("kafka", "start", "--sasl-ssl", env=env)
        assert started.returncode == 0, started.stdout + started.stderr
        printed = dict(
            line.strip().split("=", 1)
            for line in started.stdout.splitlines()
            if line.strip().startswith("HUB_KAFKA_")
        )
        assert printed["HUB_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
        password = (home / "tls" / "sasl-password").read_text()
        assert password not in started.stdout + started.stderr
        for private in ("server.properties", "tls/sasl-password", "tls/broker-key.pem"):
            assert stat.S_IMODE((home / private).stat().st_mode) == 0o600

        # `status` needs no flag: it sees the running broker is secured.
        status = hub("kafka", "status", env=env)
        assert status.returncode == 0 and "ready" in status.stdout, status.stdout

        client = KafkaSettings.model_validate(
            {k.removeprefix("HUB_KAFKA_").lower(): v for k, v in printed.items()}
        )
        assert TopicAdmin(client).create("secured.topic", partitions=1, config={})
        plain = KafkaSettings(bootstrap_servers=client.bootstrap_servers)
        assert not TopicAdmin(plain).ping(timeout_s=2.0)
    finally:
        hub("kafka", "stop", env=env)
    assert not (home / "broker.pid").exists()
