"""The local cluster's layout and the replication settings, checked without starting a JVM."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from hub_kafka.errors import BrokerError
from hub_kafka.local_cluster import LocalCluster
from hub_kafka.settings import KafkaSettings

pytestmark = pytest.mark.unit


def test_nodes_get_their_own_ids_ports_and_folders(tmp_path: Path) -> None:
    cluster = LocalCluster(KafkaSettings(broker_home=tmp_path), brokers=3)

    layouts = [node.node for node in cluster.nodes]
    assert [(n.node_id, n.port, n.controller_port) for n in layouts] == [
        (1, 9092, 9093),
        (2, 9094, 9095),
        (3, 9096, 9097),
    ]
    assert [n.home for n in layouts] == [tmp_path / f"node-{i}" for i in (1, 2, 3)]
    assert {n.voters for n in layouts} == {"1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"}
    assert cluster.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"


def test_colliding_ports_are_refused_naming_the_settings(tmp_path: Path) -> None:
    settings = KafkaSettings(broker_home=tmp_path, broker_port=9092, controller_port=9094)

    with pytest.raises(BrokerError, match="HUB_KAFKA_CONTROLLER_PORT"):
        LocalCluster(settings, brokers=3)


def test_a_recorded_cluster_of_another_size_is_not_reused(tmp_path: Path) -> None:
    settings = KafkaSettings(broker_home=tmp_path)
    (tmp_path / "cluster.json").write_text(
        '{"cluster_id": "x", "nodes": [{"node_id": 1, "port": 9092, "controller_port": 9093}]}'
    )

    found = LocalCluster.found(settings)
    assert found is not None and len(found.nodes) == 1
    with pytest.raises(BrokerError, match="--brokers 1"):
        LocalCluster(settings, brokers=3).start()


def test_min_insync_replicas_above_the_replication_factor_is_refused() -> None:
    with pytest.raises(ValidationError, match="HUB_KAFKA_MIN_INSYNC_REPLICAS"):
        KafkaSettings(replication_factor=2, min_insync_replicas=3)
