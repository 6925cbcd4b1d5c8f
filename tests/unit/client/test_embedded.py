"""The member's embedded-protocol side: rebalance protocol selection (KIP-429), the subscriptions it
sends (real Kafka-format bytes, one per assignor), and the leader's assignment including Kafka's cooperative
validation (docs/protocol.md, P05)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors import registry
from regroup.assignors.base import MetadataInput, PartitionAssignor
from regroup.assignors.consumer_protocol import (
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_subscription,
)
from regroup.assignors.spec import Assignment, GroupSpec, RebalanceProtocol
from regroup.client.config import ConfigError, MemberConfig, rebalance_protocol
from regroup.client.embedded import (
    JoinProtocols,
    LeaderAssignmentError,
    SubscriptionState,
    _validate_cooperative,
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
    sub = ConsumerProtocolSubscription(topics=topics, owned=owned or {}, generation=3 if owned else -1)
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


# --- JoinProtocols: one member's protocols, rebuilt from what changed since its previous JoinGroup -------

_TOPICS = ("t1", "t0", "t2")
_partition_sets = st.frozensets(st.tuples(st.sampled_from(_TOPICS), st.integers(0, 6)), max_size=8)
_states = st.builds(
    SubscriptionState,
    topics=st.sampled_from([_TOPICS, ("t0",), ("t2", "t1")]),
    owned=_partition_sets,
    generation=st.integers(-1, 4),
    previous=_partition_sets,
    previous_generation=st.integers(-1, 4),
    rack=st.sampled_from([None, "r1", ""]),
)
_assignor_lists = st.sampled_from(
    [
        ("cooperative-sticky",),
        ("sticky",),
        ("range", "cooperative-sticky"),
        ("roundrobin", "sticky", "cooperative-sticky"),
    ]
)


def _built_afresh(assignors: tuple[PartitionAssignor, ...], state: SubscriptionState) -> tuple[tuple[str, bytes], ...]:
    """What a member sends, built from nothing with the general encoder (no sections, nothing kept)."""
    out = []
    for assignor in assignors:
        remembered = MetadataInput(
            topics=state.topics, owned=by_topic(state.previous), generation=state.previous_generation, rack=state.rack
        )
        sub = ConsumerProtocolSubscription(
            topics=tuple(sorted(state.topics)),
            user_data=assignor.metadata(remembered),
            owned=by_topic(state.owned),
            generation=state.generation,
            rack=state.rack,
        )
        out.append((assignor.name, encode_subscription(sub)))
    return tuple(out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_assignor_lists, _states, st.booleans()), min_size=1, max_size=8))
def test_join_protocols_kept_between_joins_equal_freshly_built_ones(
    joins: list[tuple[tuple[str, ...], SubscriptionState, bool]],
) -> None:
    """A member whose owned partitions, previous assignment, generations, topics, rack or assignors change
    from one JoinGroup to the next gets exactly the bytes built afresh; unchanged inputs (``repeat``: the
    same state again, as equal copies) give them again."""
    kept = JoinProtocols()
    chosen = {names: tuple(registry.get(n) for n in names) for names in {j[0] for j in joins}}
    for names, state, repeat in joins:
        assignors = chosen[names]
        expected = _built_afresh(assignors, state)
        assert kept.build(assignors, state) == expected
        if repeat:
            copy = SubscriptionState(
                topics=tuple(state.topics),
                owned=frozenset(state.owned),
                generation=state.generation,
                previous=frozenset(state.previous),
                previous_generation=state.previous_generation,
                rack=state.rack,
            )
            assert kept.build(assignors, copy) == expected


def test_join_protocols_follow_a_new_generation_and_new_owned_partitions() -> None:
    assignors = (registry.get("cooperative-sticky"),)
    kept = JoinProtocols()

    def state(owned: frozenset[tuple[str, int]], generation: int) -> SubscriptionState:
        return SubscriptionState(
            topics=("t",), owned=owned, generation=generation, previous=owned, previous_generation=generation, rack=None
        )

    first = kept.build(assignors, state(frozenset({("t", 0)}), 1))
    assert kept.build(assignors, state(frozenset({("t", 0)}), 1)) is first  # nothing changed: kept
    second = kept.build(assignors, state(frozenset({("t", 0)}), 2))
    assert decode_subscription(second[0][1]).generation == 2
    third = kept.build(assignors, state(frozenset({("t", 0), ("t", 1)}), 2))
    assert decode_subscription(third[0][1]).owned == {"t": (0, 1)}
    for built, (owned, generation) in zip(
        (first, second, third), ((frozenset({("t", 0)}), 1), ({("t", 0)}, 2), ({("t", 0), ("t", 1)}, 2)), strict=True
    ):
        assert built == _built_afresh(assignors, state(frozenset(owned), generation))


class _Refuses(PartitionAssignor):
    """User data that cannot be built once the member previously held a partition of topic "bad"."""

    name = "refuses"

    def metadata(self, state: MetadataInput) -> bytes | None:
        if "bad" in state.owned:
            raise ValueError("no")
        return None

    def assign(self, spec: GroupSpec) -> Assignment:
        return {m: {} for m in spec.members}


def test_join_protocols_that_failed_to_build_are_not_kept() -> None:
    """A build that raises leaves nothing behind: the same inputs raise again, not the protocols before."""
    kept = JoinProtocols()
    assignors = (_Refuses(),)

    def state(previous: frozenset[tuple[str, int]]) -> SubscriptionState:
        return SubscriptionState(
            topics=("t",), owned=frozenset(), generation=1, previous=previous, previous_generation=1, rack=None
        )

    assert kept.build(assignors, state(frozenset())) == _built_afresh(assignors, state(frozenset()))
    for _ in range(2):
        with pytest.raises(ValueError, match="no"):
            kept.build(assignors, state(frozenset({("bad", 0)})))


def test_join_protocols_fall_back_to_the_general_encoder_for_values_the_sections_cannot_take() -> None:
    state = SubscriptionState(
        topics=("t",),
        owned=frozenset({("t", 2**31)}),
        generation=1,
        previous=frozenset(),
        previous_generation=1,
        rack=None,
    )
    with pytest.raises(ValueError, match="int32"):
        JoinProtocols().build((registry.get("range"),), state)


def _validate_by_pairs(
    subscriptions: dict[str, ConsumerProtocolSubscription], assignment: dict[str, dict[str, list[int]]]
) -> str | None:
    """Kafka's check on (topic, partition) pairs: the first member (by id) given a partition revoked from
    its owner in the same rebalance, with those partitions."""
    revoked: set[tuple[str, int]] = set()
    added: dict[str, set[tuple[str, int]]] = {}
    for member_id, sub in subscriptions.items():
        assigned = {(t, p) for t, ps in assignment.get(member_id, {}).items() for p in ps}
        owned = {(t, p) for t, ps in sub.owned.items() for p in ps}
        revoked |= owned - assigned
        added[member_id] = assigned - owned
    for member_id in sorted(added):
        if added[member_id] & revoked:
            return f"{sorted(added[member_id] & revoked)} to {member_id}"
    return None


_owned_maps = st.dictionaries(st.sampled_from(["t0", "t1"]), st.lists(st.integers(0, 5), max_size=4).map(tuple))


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["a", "b", "c"]), _owned_maps, min_size=1),
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]),
        st.dictionaries(st.sampled_from(["t0", "t1"]), st.lists(st.integers(0, 5), max_size=4)),
    ),
)
def test_cooperative_validation_agrees_with_the_check_on_pairs(
    owned: dict[str, dict[str, tuple[int, ...]]], assignment: dict[str, dict[str, list[int]]]
) -> None:
    subscriptions = {m: ConsumerProtocolSubscription(topics=("t0", "t1"), owned=o) for m, o in owned.items()}
    expected = _validate_by_pairs(subscriptions, assignment)
    try:
        _validate_cooperative(subscriptions, assignment)
    except LeaderAssignmentError as exc:
        assert expected is not None and expected in str(exc)
    else:
        assert expected is None
