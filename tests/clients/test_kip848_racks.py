"""``broker.rack`` with KIP-848 consumers (confluent-kafka, ``group.protocol=consumer``, ``client.rack``) against
``regroup serve --config``: Metadata and DescribeCluster report the broker's rack; the members' racks reach the
coordinator; with one broker every partition is on its rack, so ``uniform`` stays balanced and gives the larger
share to the member on that rack, even when the member on the other rack held everything before."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.harness import Inspector
from tests.clients.kip848 import DESCRIBE_848, SERVER_ARGS, Book, Owner, stopped_at_exit, wait_settled
from tests.server.conftest import served
from tests.server.wire import WireClient

pytestmark = pytest.mark.timeout(90)

METADATA, DESCRIBE_CLUSTER = 3, 60
PARTITIONS = 5


def test_uniform_on_the_broker_rack(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("broker.rack=r1\n")
    with served(tmp_path, "--config", str(config), *SERVER_ARGS) as server:
        port, topic, group = server.port, "racks", "racks"
        with WireClient(port) as client:
            metadata = client.call(
                METADATA, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
            assert [(b.node_id, b.rack) for b in metadata.brokers] == [(0, "r1")]
            cluster = client.call(DESCRIBE_CLUSTER, 0, include_cluster_authorized_operations=False)
            assert [(b.broker_id, b.rack) for b in cluster.brokers] == [(0, "r1")]
        Inspector(f"127.0.0.1:{port}", topic, PARTITIONS).create_topic()

        book = Book()
        members: list[Owner] = []

        def member(name: str, rack: str) -> Owner:
            m = Owner(book, f"127.0.0.1:{port}", topic, group, name, assignor="uniform")
            m.config["client.rack"] = rack
            members.append(m)
            m.start()
            return m

        with stopped_at_exit(members):
            far = member("far", "r2")
            alone = wait_settled(port, group, topic, PARTITIONS, [far])
            assert alone.assignments == {"far": frozenset(range(PARTITIONS))}
            near = member("near", "r1")
            both = wait_settled(port, group, topic, PARTITIONS, [far, near])
            assert both.assignor == "uniform"
            # balance first (3 and 2); the larger share on the broker's rack; far keeps what it still has
            assert (len(both.assignments["near"]), len(both.assignments["far"])) == (3, 2)
            assert both.assignments["far"] < alone.assignments["far"]
            with WireClient(port) as client:
                described = client.call(DESCRIBE_848, 0, group_ids=[group], include_authorized_operations=False)
            assert {m.client_id: m.rack_id for m in described.groups[0].members} == {"far": "r2", "near": "r1"}
