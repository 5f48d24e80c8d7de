"""`hub kafka start|stop|status`: the local broker's life cycle on a real JVM."""

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from hub_kafka.errors import BrokerError
from hub_kafka.local_broker import LocalBroker
from hub_kafka.settings import KafkaSettings
from tests.conftest import JARS
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


def test_missing_jars_give_an_error_that_names_the_fix(tmp_path: Path) -> None:
    settings = KafkaSettings(broker_home=tmp_path / "k", broker_jars_dir=tmp_path / "no-jars")
    with pytest.raises(BrokerError, match="make jars"):
        LocalBroker(settings).start()
