"""The member's side of the consumer embedded protocol: the JoinGroup protocols it offers (one Kafka-format
subscription per configured assignor) and, when it is the leader, the assignment it computes from the
other members' subscriptions and sends in SyncGroup.

Everything crosses the coordinator as real ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``
bytes (``assignors.consumer_protocol``), exactly as a Java consumer would send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from regroup.assignors.base import MemberState as AssignorMemberState
from regroup.assignors.base import PartitionAssignor
from regroup.assignors.consumer_protocol import (
    Assignment as WireAssignment,
)
from regroup.assignors.consumer_protocol import (
    ProtocolDecodeError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from regroup.assignors.spec import AssignmentError, GroupSpec, MemberSubscription
from regroup.client.types import TopicPartition
from regroup.protocol.classic import JoinGroupMember


class LeaderAssignmentError(Exception):
    """The leader cannot produce a valid assignment (assignor failure or a cooperative violation)."""


def by_topic(partitions: frozenset[TopicPartition]) -> dict[str, tuple[int, ...]]:
    """{(t, p)} -> topic -> sorted partitions, topics sorted (the byte-stable form for the wire). Grouped
    first, then topics and each topic's partitions sorted: the order of sorting the pairs, at less cost."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        listed = out.get(topic)
        if listed is None:
            out[topic] = [partition]
        else:
            listed.append(partition)
    return {t: tuple(sorted(out[t])) for t in sorted(out)}


def flatten(per_topic: Mapping[str, tuple[int, ...] | list[int]]) -> frozenset[TopicPartition]:
    return frozenset((t, p) for t, ps in per_topic.items() for p in ps)


def assigned_partitions(data: bytes) -> frozenset[TopicPartition] | None:
    """The partitions in SyncGroup assignment bytes (empty bytes: none), or None if they are malformed."""
    if not data:
        return frozenset()
    try:
        assignment = decode_assignment(data)
    except ProtocolDecodeError:
        return None
    return flatten(assignment.partitions)


@dataclass(slots=True, kw_only=True, init=False)
class SubscriptionState:
    """What the member advertises in a JoinGroup (built for each one and not changed after: not frozen, with
    a written ``__init__``, which the compiled build compiles)."""

    topics: tuple[str, ...]
    owned: frozenset[TopicPartition]  # empty for eager members (they revoked before joining)
    generation: int  # generation in which ``owned`` was obtained (KIP-792), else the current one
    previous: frozenset[TopicPartition]  # last assignment received, for assignors that remember it
    previous_generation: int
    rack: str | None

    def __init__(
        self,
        *,
        topics: tuple[str, ...],
        owned: frozenset[TopicPartition],
        generation: int,
        previous: frozenset[TopicPartition],
        previous_generation: int,
        rack: str | None,
    ) -> None:
        self.topics = topics
        self.owned = owned
        self.generation = generation
        self.previous = previous
        self.previous_generation = previous_generation
        self.rack = rack


def join_protocols(assignors: tuple[PartitionAssignor, ...], state: SubscriptionState) -> tuple[tuple[str, bytes], ...]:
    """One (name, subscription bytes) per assignor in preference order; each with its own user data."""
    remembered = AssignorMemberState(
        topics=state.topics,
        owned=by_topic(state.previous),
        generation=state.previous_generation,
        rack=state.rack,
    )
    owned = by_topic(state.owned)
    out: list[tuple[str, bytes]] = []
    for assignor in assignors:
        subscription = Subscription(
            topics=tuple(sorted(state.topics)),
            user_data=assignor.metadata(remembered),
            owned=owned,
            generation=state.generation,
            rack=state.rack,
        )
        out.append((assignor.name, encode_subscription(subscription)))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderResult:
    assignments: tuple[tuple[str, bytes], ...]  # member id -> assignment bytes, in the response's order
    metadata_snapshot: dict[str, int]  # partition counts of every topic the group subscribes to


def metadata_snapshot(members: tuple[JoinGroupMember, ...], partition_counts: Mapping[str, int]) -> dict[str, int]:
    """Partition counts of every topic the members subscribe to (what a leader monitors for changes)."""
    topics: set[str] = set()
    for member in members:
        try:
            topics.update(decode_subscription(member.metadata).topics)
        except ProtocolDecodeError:
            continue
    return {t: partition_counts.get(t, 0) for t in sorted(topics)}


def leader_assign(
    assignor: PartitionAssignor,
    members: tuple[JoinGroupMember, ...],
    partition_counts: Mapping[str, int],
    *,
    cooperative: bool,
    options: Mapping[str, object] | None = None,
) -> LeaderResult:
    """Decode every member's subscription, run ``assignor`` and encode the per-member assignments.

    A cooperative leader also checks that no partition goes directly from its owner to another member
    (Kafka's ``validateCooperativeAssignment``) and fails otherwise.
    """
    subscriptions: dict[str, Subscription] = {}
    for member in members:
        try:
            subscriptions[member.member_id] = decode_subscription(member.metadata)
        except ProtocolDecodeError as exc:
            raise LeaderAssignmentError(f"member {member.member_id}: {exc}") from None
    subscribed = sorted({t for s in subscriptions.values() for t in s.topics})
    snapshot = {t: partition_counts.get(t, 0) for t in subscribed}
    spec = GroupSpec(
        topics={t: n for t, n in snapshot.items() if n > 0},
        members={
            member.member_id: MemberSubscription(
                topics=tuple(sorted(set(sub.topics))),
                owned={t: tuple(sorted(ps)) for t, ps in sorted(sub.owned.items()) if ps},
                generation=sub.generation,
                rack=sub.rack,
                instance_id=member.group_instance_id,
                user_data=sub.user_data,
            )
            for member in members
            for sub in (subscriptions[member.member_id],)
        },
        options=dict(options or {}),
    )
    try:
        assignment = assignor.assign(spec)
    except AssignmentError as exc:
        raise LeaderAssignmentError(f"{assignor.name}: {exc}") from None
    if cooperative:
        _validate_cooperative(subscriptions, assignment)
    encoded = tuple(
        (
            member.member_id,
            encode_assignment(
                WireAssignment(
                    partitions={t: tuple(sorted(ps)) for t, ps in sorted(assignment.get(member.member_id, {}).items())}
                )
            ),
        )
        for member in members
    )
    return LeaderResult(assignments=encoded, metadata_snapshot=snapshot)


def _validate_cooperative(subscriptions: Mapping[str, Subscription], assignment: Mapping[str, object]) -> None:
    revoked: set[TopicPartition] = set()
    added: dict[str, frozenset[TopicPartition]] = {}
    for member_id, sub in subscriptions.items():
        raw = assignment.get(member_id, {})
        assert isinstance(raw, dict)
        assigned = flatten(raw)
        owned = flatten(sub.owned)
        revoked |= owned - assigned
        added[member_id] = assigned - owned
    for member_id in sorted(added):
        moved = added[member_id] & revoked
        if moved:
            raise LeaderAssignmentError(
                f"cooperative assignment gives {sorted(moved)} to {member_id} in the same rebalance "
                "that revokes them from their owner"
            )
