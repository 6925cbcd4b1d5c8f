"""The libraries' own cluster metadata and JoinGroup members, built without a broker: a ``ClusterMetadata`` of
kafka-python or aiokafka fed a Metadata response (brokers with racks, partitions with replicas) through the
library's own ``update_metadata``, and member subscriptions as each library's leader hands them to its assignor."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: (topic, partition) → the brokers holding a replica; partitions not listed have one replica, on broker 0
Replicas = Mapping[tuple[str, int], Sequence[int]]


def kafka_python_cluster(topics: Mapping[str, int], brokers: Mapping[int, str | None], replicas: Replicas) -> Any:
    from kafka.cluster import ClusterMetadata
    from kafka.protocol.metadata import MetadataResponse

    broker = MetadataResponse.MetadataResponseBroker
    topic_entry = MetadataResponse.MetadataResponseTopic
    partition_entry = topic_entry.MetadataResponsePartition

    def nodes(topic: str, p: int) -> list[int]:
        return list(replicas.get((topic, p), [0]))

    response = MetadataResponse(
        version=8,
        throttle_time_ms=0,
        brokers=[broker(node_id=n, host="localhost", port=9092 + n, rack=r) for n, r in sorted(brokers.items())],
        cluster_id="adapters",
        controller_id=0,
        topics=[
            topic_entry(
                error_code=0,
                name=topic,
                is_internal=False,
                partitions=[
                    partition_entry(
                        error_code=0,
                        partition_index=p,
                        leader_id=nodes(topic, p)[0],
                        leader_epoch=0,
                        replica_nodes=nodes(topic, p),
                        isr_nodes=nodes(topic, p),
                        offline_replicas=[],
                    )
                    for p in range(count)
                ],
            )
            for topic, count in sorted(topics.items())
        ],
    )
    # (the library applies decoded responses only: a built one has no wire version)
    decoded = MetadataResponse.decode(response.encode(version=8, header=False), version=8, header=False)
    cluster = ClusterMetadata()
    cluster.update_metadata(decoded)
    return cluster


def aiokafka_cluster(topics: Mapping[str, int], brokers: Mapping[int, str | None], replicas: Replicas) -> Any:
    from aiokafka.cluster import ClusterMetadata
    from aiokafka.protocol.metadata import MetadataResponse_v1

    def partition(topic: str, p: int) -> tuple[int, int, int, list[int], list[int]]:
        nodes = list(replicas.get((topic, p), [0]))
        return (0, p, nodes[0], nodes, nodes)

    response = MetadataResponse_v1(
        [(n, "localhost", 9092 + n, r) for n, r in sorted(brokers.items())],
        0,
        [(0, topic, False, [partition(topic, p) for p in range(count)]) for topic, count in sorted(topics.items())],
    )
    cluster = ClusterMetadata()
    cluster.update_metadata(response)
    return cluster


def kafka_python_member(member_id: str, subscription: Any, instance_id: str | None = None) -> Any:
    """A JoinGroup response member as kafka-python's leader hands it to its assignor (metadata decoded)."""
    from kafka.protocol.consumer.group import JoinGroupResponse
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    decoded = ConsumerProtocolSubscription.decode(subscription.encode())  # over the wire and back
    return JoinGroupResponse.JoinGroupResponseMember(
        member_id=member_id, group_instance_id=instance_id, metadata=decoded
    )


def aiokafka_member(subscription: Any) -> Any:
    """A member's metadata as aiokafka's leader hands it to its assignor (decoded as v0)."""
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

    raw = subscription if isinstance(subscription, bytes) else subscription.encode()
    return ConsumerProtocolMemberMetadata.decode(raw)


def kafka_python_assignment(partitions: Mapping[str, Sequence[int]]) -> Any:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    return ConsumerProtocolAssignment(0, [(t, list(ps)) for t, ps in sorted(partitions.items())], b"")


def aiokafka_assignment(partitions: Mapping[str, Sequence[int]], user_data: bytes = b"") -> Any:
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

    return ConsumerProtocolMemberAssignment(0, [(t, list(ps)) for t, ps in sorted(partitions.items())], user_data)


def as_dict(assignments: Mapping[str, Any]) -> dict[str, dict[str, list[int]]]:
    """Either library's assignment objects as member → topic → partitions (topics without partitions dropped)."""
    out: dict[str, dict[str, list[int]]] = {}
    for member, a in assignments.items():
        pairs = a.assigned_partitions if hasattr(a, "assigned_partitions") else a.assignment
        out[member] = {str(t): sorted(ps) for t, ps in pairs if ps}
    return out
