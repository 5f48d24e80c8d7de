"""A local Kafka cluster: several KRaft nodes, each a JVM of its own, from the same jars.

Used by `hub kafka start --brokers N` and by the failover tests. Every node is a broker and a
controller (`process.roles=broker,controller`), so a cluster of three keeps a controller majority
and a leader for every partition while any one node is down. The quorum is static
(`controller.quorum.voters`): every node knows all voters from its configuration, and all are
formatted with one cluster id. Node `i` lives in `<broker_home>/node-<i>`; the cluster's layout
(ids, ports, cluster id) is kept in `<broker_home>/cluster.json`, so `stop` and `status` find
every node without being told the size again. See ADR 0027.
"""

import json
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hub_kafka.errors import BrokerError
from hub_kafka.local_broker import BrokerStatus, LocalBroker, NodeLayout, new_cluster_id
from hub_kafka.settings import KafkaSettings

log = logging.getLogger(__name__)

_LAYOUT_FILE = "cluster.json"


@dataclass(frozen=True, slots=True)
class ClusterStatus:
    """The cluster as `hub kafka status` shows it: running while any node runs, ready when all
    nodes answer."""

    running: bool
    pid: int | None
    ready: bool
    nodes: dict[int, BrokerStatus]


class LocalCluster:
    """Start, stop and inspect a local cluster of `brokers` KRaft nodes.

    `ports` gives each node's (client, controller) port; by default node `i` (from 0) takes
    `broker_port + 2i` and `controller_port + 2i`, so three nodes on the default ports use
    9092-9097.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        *,
        brokers: int,
        ports: Sequence[tuple[int, int]] | None = None,
    ) -> None:
        if brokers < 1:
            raise BrokerError(f"A cluster needs at least one broker, not {brokers}.")
        self._settings = settings
        self.home = settings.broker_home
        ports = list(ports) if ports is not None else _default_ports(settings, brokers)
        if len(ports) != brokers:
            raise BrokerError(f"{brokers} brokers need {brokers} port pairs, got {len(ports)}.")
        used = [port for pair in ports for port in pair]
        if len(set(used)) != len(used):
            raise BrokerError(
                f"The cluster's ports collide ({used}): set HUB_KAFKA_BROKER_PORT and "
                "HUB_KAFKA_CONTROLLER_PORT further apart."
            )
        voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
        self.nodes = [
            LocalBroker(
                settings,
                NodeLayout(
                    node_id=i + 1,
                    home=self.home / f"node-{i + 1}",
                    port=port,
                    controller_port=controller,
                    voters=voters,
                    cluster_size=brokers,
                ),
            )
            for i, (port, controller) in enumerate(ports)
        ]
        self.bootstrap_servers = ",".join(node.bootstrap_servers for node in self.nodes)

    @classmethod
    def found(cls, settings: KafkaSettings) -> "LocalCluster | None":
        """The cluster set up under `broker_home` by an earlier start, if there is one."""
        layout = _read_layout(settings.broker_home)
        if layout is None:
            return None
        ports = [(node["port"], node["controller_port"]) for node in layout["nodes"]]
        return cls(settings, brokers=len(ports), ports=ports)

    @property
    def secured(self) -> bool:
        return self.nodes[0].secured

    def node(self, node_id: int) -> LocalBroker:
        """The node with `node_id` (1 to the cluster size)."""
        return self.nodes[node_id - 1]

    def client_settings(self) -> KafkaSettings:
        """Settings with which a client reaches the cluster (all nodes as bootstrap servers)."""
        return (
            self.nodes[0]
            .client_settings()
            .model_copy(update={"bootstrap_servers": self.bootstrap_servers})
        )

    def start(self, *, timeout_s: float = 120.0) -> ClusterStatus:
        """Launch every node that does not run, then wait until all serve. A node alone never
        serves: it waits for a majority of the controllers."""
        cluster_id = self._cluster_id()
        launched = [(node, node.launch(cluster_id=cluster_id)) for node in self.nodes]
        try:
            for node, process in launched:
                node.wait_ready(timeout_s, process=process)
        except BrokerError:
            self.stop()
            raise
        log.info("Kafka cluster of %d nodes ready on %s", len(self.nodes), self.bootstrap_servers)
        return self.status()

    def stop(self, *, timeout_s: float = 30.0) -> bool:
        """Stop every node cleanly, all at once: a node stopped after the others would wait for
        a controller majority that is gone. True if any ran."""
        with ThreadPoolExecutor(max_workers=len(self.nodes)) as pool:
            stopped = list(pool.map(lambda node: node.stop(timeout_s=timeout_s), self.nodes))
        return any(stopped)

    def status(self) -> ClusterStatus:
        nodes = {node.node.node_id: node.status() for node in self.nodes}
        pids = [s.pid for s in nodes.values() if s.pid is not None]
        return ClusterStatus(
            running=bool(pids),
            pid=pids[0] if pids else None,
            ready=all(s.ready for s in nodes.values()),
            nodes=nodes,
        )

    def _cluster_id(self) -> str:
        """The id every node is formatted with: the recorded one, or a new one recorded now.
        A recorded layout of another size is refused (its nodes' storage belongs to it)."""
        layout = _read_layout(self.home)
        if layout is not None:
            if len(layout["nodes"]) != len(self.nodes):
                raise BrokerError(
                    f"{self.home} holds a cluster of {len(layout['nodes'])} nodes: start it with "
                    f"--brokers {len(layout['nodes'])}, or delete its node-* folders and "
                    f"{_LAYOUT_FILE} to make a new one."
                )
            return str(layout["cluster_id"])
        cluster_id = new_cluster_id()
        self.home.mkdir(parents=True, exist_ok=True)
        nodes = [
            {
                "node_id": n.node.node_id,
                "port": n.node.port,
                "controller_port": n.node.controller_port,
            }
            for n in self.nodes
        ]
        (self.home / _LAYOUT_FILE).write_text(
            json.dumps({"cluster_id": cluster_id, "nodes": nodes}, indent=2)
        )
        return cluster_id


def _default_ports(settings: KafkaSettings, brokers: int) -> list[tuple[int, int]]:
    return [
        (settings.broker_port + 2 * i, settings.controller_port + 2 * i) for i in range(brokers)
    ]


def _read_layout(home: Path) -> dict[str, Any] | None:
    path = home / _LAYOUT_FILE
    if not path.is_file():
        return None
    layout: dict[str, Any] = json.loads(path.read_text())
    return layout
