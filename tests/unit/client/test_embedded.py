"""The member's embedded-protocol side: rebalance protocol selection (§2.2), the subscriptions it sends
(real Kafka-format bytes, one per assignor), and the leader's assignment including Kafka's cooperative
validation (P05)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.assignors import registry
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.consumer_protocol import (
    Subscription,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_subscription,
)
from regroup.assignors.spec import Assignment, GroupSpec, RebalanceProtocol
from regroup.client.config import ConfigError, MemberConfig, rebalance_protocol
from regroup.client.embedded import (
    LeaderAssignmentError,
    SubscriptionState,
    assigned_partitions,
    by_topic,
    join_protocols,
    leader_assign,
)
from regroup.protocol.classic import JoinGroupMember


@pytest.mark.parametrize(
    ("strategies", "expected"),
    [
        (("range", "cooperative-sticky"), RebalanceProtocol.EAGER),  # Kafka's default list
        (("cooperative-sticky",), RebalanceProtocol.COOPERATIVE),
        (("sticky",), RebalanceProtocol.EAGER),
    ],
)
def test_rebalance_protocol_is_the_highest_common_one(strategies: tuple[str, ...], expected: RebalanceProtocol) -> None:
    assert rebalance_protocol(strategies) is expected


def test_config_rejects_unknown_strategies_and_bad_timeouts() -> None:
    with pytest.raises(ConfigError, match="unknown assignment strategy"):
        MemberConfig(group_id="g", client_id="c", topics=("t",), strategies=("nope",))
    with pytest.raises(ConfigError, match="heartbeat_interval_ms"):
        MemberConfig(group_id="g", client_id="c", topics=("t",), session_timeout_ms=3_000, heartbeat_interval_ms=3_000)


def test_join_protocols_carry_owned_partitions_generation_and_each_assignors_user_data() -> None:
    assignors = (registry.get("cooperative-sticky"), registry.get("sticky"))
    state = SubscriptionState(
        topics=("t1", "t0"),
        owned=frozenset({("t0", 1), ("t0", 0)}),
        generation=4,
        previous=frozenset({("t0", 0), ("t0", 1)}),
        previous_generation=4,
        rack="r1",
    )
    protocols = join_protocols(assignors, state)
    assert [name for name, _ in protocols] == ["cooperative-sticky", "sticky"]
    coop, sticky = (decode_subscription(data) for _, data in protocols)
    assert coop.topics == ("t0", "t1") and coop.owned == {"t0": (0, 1)} and coop.generation == 4
    assert coop.rack == "r1"
    assert decode_cooperative_user_data(coop.user_data) == 4
    assert decode_sticky_user_data(sticky.user_data) == ({"t0": (0, 1)}, 4)


def _member(
    member_id: str, topics: tuple[str, ...], owned: dict[str, tuple[int, ...]] | None = None
) -> JoinGroupMember:
    sub = Subscription(topics=topics, owned=owned or {}, generation=3 if owned else -1)
    return JoinGroupMember(member_id=member_id, group_instance_id=None, metadata=encode_subscription(sub))


def test_leader_assigns_every_member_in_kafka_bytes() -> None:
    members = (_member("a", ("t",)), _member("b", ("t",)))
    result = leader_assign(registry.get("range"), members, {"t": 3, "other": 9}, cooperative=False)
    assert result.metadata_snapshot == {"t": 3}
    decoded = {m: dict(decode_assignment(data).partitions) for m, data in result.assignments}
    assert decoded == {"a": {"t": (0, 1)}, "b": {"t": (2,)}}
    assert assigned_partitions(result.assignments[0][1]) == {("t", 0), ("t", 1)}
    assert assigned_partitions(b"") == frozenset() and assigned_partitions(b"\x00") is None


class _Mover(PartitionAssignor):
    """A broken 'cooperative' assignor that hands a's partition 0 straight to b."""

    name = "mover"
    supported_protocols = (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE)

    def assign(self, spec: GroupSpec) -> Assignment:
        return {"a": {"t": [1]}, "b": {"t": [0]}}


def test_cooperative_leader_refuses_a_direct_transfer() -> None:
    """P05: an owned partition may not go to another member in the same rebalance."""
    members = (_member("a", ("t",), {"t": (0, 1)}), _member("b", ("t",)))
    with pytest.raises(LeaderAssignmentError, match="revokes them"):
        leader_assign(_Mover(), members, {"t": 2}, cooperative=True)
    leader_assign(_Mover(), members, {"t": 2}, cooperative=False)  # eager: allowed


@given(st.frozensets(st.tuples(st.sampled_from(["b", "a", "t10", "t2"]), st.integers(0, 50)), max_size=40))
def test_by_topic_orders_as_the_sorted_pairs(partitions: frozenset[tuple[str, int]]) -> None:
    expected: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        expected.setdefault(topic, []).append(partition)
    got = by_topic(partitions)
    assert list(got.items()) == [(t, tuple(ps)) for t, ps in expected.items()]
