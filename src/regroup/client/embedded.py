"""The member's side of the consumer embedded protocol: the JoinGroup protocols it offers (one Kafka-format
subscription per configured assignor) and, when it is the leader, the assignment it computes from the
other members' subscriptions and sends in SyncGroup.

Everything crosses the coordinator as real ``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``
bytes (``assignors.consumer_protocol``), exactly as a Java consumer would send them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from regroup.assignors.base import MetadataInput, PartitionAssignor
from regroup.assignors.consumer_protocol import (
    ConsumerProtocolSubscription,
    ProtocolDecodeError,
    decode_assignment,
    decode_subscription,
    encode_assignment_of,
    encode_subscription,
    encode_subscription_sections,
    encode_topic_list,
    encode_topic_partitions,
)
from regroup.assignors.spec import Assignment, AssignmentError, GroupSpec, MemberSubscription
from regroup.client.types import TopicPartition
from regroup.protocol.classic import JoinGroupMember


class LeaderAssignmentError(Exception):
    """The leader cannot produce a valid assignment (assignor failure or a cooperative violation)."""


def by_topic(partitions: frozenset[TopicPartition]) -> dict[str, tuple[int, ...]]:
    """{(t, p)} -> topic -> sorted partitions, topics sorted (the byte-stable form for the wire). Grouped
    first, then topics and each topic's partitions sorted: the order of sorting the pairs, at less cost."""
    out: dict[str, list[int]] = {}
    pairs: frozenset[Any] = partitions  # (typed Any: the compiled build reads each pair without unboxing it)
    for pair in pairs:
        topic: str = pair[0]
        listed = out.get(topic)
        if listed is None:
            out[topic] = [pair[1]]
        else:
            listed.append(pair[1])
    return {t: sorted_tuple(out[t]) for t in sorted(out)}


def sorted_tuple(values: list[int]) -> tuple[int, ...]:
    """``tuple(sorted(values))``, sorting ``values`` in place. A member holds a few partitions of each
    topic: short lists are sorted by insertion, which the compiled build runs without calling into
    ``list.sort``."""
    if len(values) > 16:
        values.sort()
        return tuple(values)
    for i in range(1, len(values)):
        value = values[i]
        j = i - 1
        while j >= 0 and values[j] > value:
            values[j + 1] = values[j]
            j -= 1
        values[j + 1] = value
    return tuple(values)


def flatten(per_topic: Mapping[str, tuple[int, ...] | list[int]]) -> frozenset[TopicPartition]:
    return frozenset((t, p) for t, ps in per_topic.items() for p in ps)


#: ``assigned_partitions`` of bytes already read: a member that keeps its partitions is sent the same bytes
#: generation after generation, and gets the same set object back, which the member's and the simulator's
#: comparisons of owned sets then settle by identity; the server reads a large group's assignments ahead, where
#: their SyncGroup is decoded, for its events' rows (bounded: cleared when full, past a few generations of a
#: group of 10,000 members)
_ASSIGNED: Final[dict[bytes, frozenset[TopicPartition]]] = {}
_ASSIGNED_MOST: Final = 32_768


def assigned_partitions(data: bytes) -> frozenset[TopicPartition] | None:
    """The partitions in SyncGroup assignment bytes (empty bytes: none), or None if they are malformed."""
    if not data:
        return frozenset()
    known = _ASSIGNED.get(data)
    if known is not None:
        return known
    try:
        assignment = decode_assignment(data)
    except ProtocolDecodeError:
        return None
    partitions = flatten(assignment.partitions)
    if len(_ASSIGNED) >= _ASSIGNED_MOST:
        _ASSIGNED.clear()
    _ASSIGNED[bytes(data)] = partitions
    return partitions


@dataclass(slots=True, kw_only=True)
class SubscriptionState:
    """What the member advertises in a JoinGroup (built for each one and not changed after; not frozen, which
    would cost the compiled build about 10k instructions per object)."""

    topics: tuple[str, ...]
    owned: frozenset[TopicPartition]  # empty for eager members (they revoked before joining)
    generation: int  # generation in which ``owned`` was obtained (KIP-792), else the current one
    previous: frozenset[TopicPartition]  # last assignment received, for assignors that remember it
    previous_generation: int
    rack: str | None


def join_protocols(assignors: tuple[PartitionAssignor, ...], state: SubscriptionState) -> tuple[tuple[str, bytes], ...]:
    """One (name, subscription bytes) per assignor in preference order; each with its own user data."""
    return JoinProtocols().build(assignors, state)


class JoinProtocols:
    """One member's JoinGroup protocols (``join_protocols``), rebuilt only as far as their inputs changed
    since its previous JoinGroup.

    A member rejoins with the same topics and rack and, mostly, the same owned and previously assigned
    partitions, while the generations (and so the user data) change. So it keeps, from its previous
    JoinGroup only, the sorted topics and their encoded array, the owned partitions by topic and their
    encoded array, the previous assignment by topic, and the protocols themselves (returned as they are
    when nothing changed). The user data is asked of each assignor every time, and the subscription bytes
    are written from the kept sections (``encode_subscription_sections``), equal to
    ``encode_subscription`` of the same ``ConsumerProtocolSubscription``; a section the fast writers cannot take
    makes it fall back to ``encode_subscription``.
    """

    def __init__(self) -> None:
        self._assignors: tuple[PartitionAssignor, ...] | None = None
        self._topics: tuple[str, ...] | None = None
        self._sorted_topics: tuple[str, ...] = ()
        self._topic_list: bytes | None = None
        self._owned: frozenset[TopicPartition] | None = None
        self._owned_by_topic: dict[str, tuple[int, ...]] = {}
        self._owned_list: bytes | None = None
        self._previous: frozenset[TopicPartition] | None = None
        self._previous_by_topic: dict[str, tuple[int, ...]] = {}
        self._key: tuple[int, int, str | None] = (0, 0, None)  # generation, previous generation, rack
        self._protocols: tuple[tuple[str, bytes], ...] = ()

    def build(
        self, assignors: tuple[PartitionAssignor, ...], state: SubscriptionState
    ) -> tuple[tuple[str, bytes], ...]:
        changed = self._assignors is not assignors
        self._assignors = assignors
        topics = state.topics
        if self._topics != topics:
            changed = True
            self._topics = topics
            self._sorted_topics = tuple(sorted(topics))
            self._topic_list = encode_topic_list(self._sorted_topics)
        owned = state.owned
        if self._owned is not owned and self._owned != owned:
            changed = True
            self._owned = owned
            self._owned_by_topic = by_topic(owned)
            self._owned_list = encode_topic_partitions(self._owned_by_topic)
        previous = state.previous
        if self._previous is not previous and self._previous != previous:
            changed = True
            self._previous = previous
            self._previous_by_topic = self._owned_by_topic if previous == owned else by_topic(previous)
        key = (state.generation, state.previous_generation, state.rack)
        if not changed and key == self._key:
            return self._protocols
        self._assignors = None  # (until the protocols are built: a build that raises keeps nothing)
        remembered = MetadataInput(
            topics=topics,
            owned=self._previous_by_topic,
            generation=state.previous_generation,
            rack=state.rack,
        )
        out: list[tuple[str, bytes]] = []
        for assignor in assignors:
            user_data = assignor.metadata(remembered)
            data = None
            if self._topic_list is not None and self._owned_list is not None:
                data = encode_subscription_sections(
                    self._topic_list, user_data, self._owned_list, state.generation, state.rack
                )
            if data is None:
                subscription = ConsumerProtocolSubscription(
                    topics=self._sorted_topics,
                    user_data=user_data,
                    owned=self._owned_by_topic,
                    generation=state.generation,
                    rack=state.rack,
                )
                data = encode_subscription(subscription)
            out.append((assignor.name, data))
        self._protocols = tuple(out)
        self._key = key
        self._assignors = assignors
        return self._protocols


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
    subscriptions: dict[str, ConsumerProtocolSubscription] = {}
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
                topics=sorted_topics(sub.topics),
                owned=sorted_owned(sub.owned),
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
        (member.member_id, encode_assignment_of(wire_partitions(assignment.get(member.member_id, {}))))
        for member in members
    )
    return LeaderResult(assignments=encoded, metadata_snapshot=snapshot)


def sorted_topics(topics: tuple[str, ...]) -> tuple[str, ...]:
    """``tuple(sorted(set(topics)))``: the topics themselves when already strictly ascending (members send
    them sorted), so the usual subscription costs a few comparisons instead of a set and a sort."""
    for i in range(1, len(topics)):
        if not topics[i - 1] < topics[i]:
            return tuple(sorted(set(topics)))
    return topics


def sorted_owned(owned: Mapping[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """``{t: tuple(sorted(ps)) for t, ps in sorted(owned.items()) if ps}``, keeping the partition tuples
    that are already ascending (as members send them) instead of sorting each one again."""
    out: dict[str, tuple[int, ...]] = {}
    previous: str | None = None
    # (a decoded subscription's owned partitions are a dict: iterated as one, not as any Mapping)
    by_topic: dict[str, tuple[int, ...]] = owned if isinstance(owned, dict) else dict(owned)
    for topic, partitions in by_topic.items():
        if previous is not None and not previous < topic:
            return {t: tuple(sorted(ps)) for t, ps in sorted(owned.items()) if ps}
        previous = topic
        if partitions:
            out[topic] = partitions if _ascending(partitions) else tuple(sorted(partitions))
    return out


def wire_partitions(per_topic: dict[str, list[int]]) -> dict[str, tuple[int, ...]]:
    """``{t: tuple(sorted(ps)) for t, ps in sorted(per_topic.items())}``: the byte-stable form of one member's
    assignment, without sorting what an assignor already returns sorted (topics and partitions)."""
    out: dict[str, tuple[int, ...]] = {}
    previous: str | None = None
    for topic, listed in per_topic.items():
        if previous is not None and not previous < topic:
            return {t: tuple(sorted(ps)) for t, ps in sorted(per_topic.items())}
        previous = topic
        partitions = tuple(listed)
        out[topic] = partitions if _ascending(partitions) else tuple(sorted(partitions))
    return out


def _ascending(partitions: tuple[int, ...]) -> bool:
    """Non-decreasing (what ``sorted`` would leave as it is)."""
    return all(partitions[i - 1] <= partitions[i] for i in range(1, len(partitions)))


def _validate_cooperative(subscriptions: dict[str, ConsumerProtocolSubscription], assignment: Assignment) -> None:
    """Topic by topic, on partition numbers (no (topic, partition) pair per partition): what each member
    gains, what the group revokes, and the first member (by id) that gains a revoked partition."""
    revoked: dict[str, set[int]] = {}
    added: dict[str, dict[str, set[int]]] = {}
    nothing: dict[str, list[int]] = {}
    for member_id, sub in subscriptions.items():
        raw = assignment.get(member_id, nothing)
        # (a decoded subscription's owned partitions are a dict: looked up as one, not as any Mapping)
        owned: dict[str, tuple[int, ...]] = sub.owned if isinstance(sub.owned, dict) else dict(sub.owned)
        gained: dict[str, set[int]] = {}
        for topic, partitions in raw.items():
            held = owned.get(topic)
            if held is None:
                new = set(partitions)
            elif tuple(partitions) == held:  # (kept as it was: the common case)
                continue
            else:
                new = set(partitions) - set(held)
            if new:
                gained[topic] = new
        for topic, held in owned.items():
            kept = raw.get(topic)
            if kept is None:
                lost = set(held)
            elif tuple(kept) == held:
                continue
            else:
                lost = set(held) - set(kept)
            if lost:
                known = revoked.get(topic)
                if known is None:
                    revoked[topic] = lost
                else:
                    known |= lost
        added[member_id] = gained
    for member_id in sorted(added):
        moved = [(t, p) for t, ps in added[member_id].items() if t in revoked for p in ps & revoked[t]]
        if moved:
            raise LeaderAssignmentError(
                f"cooperative assignment gives {sorted(moved)} to {member_id} in the same rebalance "
                "that revokes them from their owner"
            )
