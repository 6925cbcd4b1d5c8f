"""A KIP-848 consumer group and its members as the coordinator holds them: group epoch, target assignment
and its epoch, subscription metadata, per-member epochs/state/assignment, the regular expressions its members
subscribe to as the group resolved them, the partition -> holder index that makes assignment exclusive, and
counts of what its members subscribe to and of the assignors they name (read without a walk over the
members). The hard part of it changes only through ``replay`` (records)."""

from __future__ import annotations

import enum
import operator
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from regroup.model.cluster import ClusterImage
from regroup.model.errors import CoordinatorBug
from regroup.records.consumer import (
    MEMBER_METADATA_FIELDS,
    ClassicProtocolMetadata,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupRegularExpressionValue,
    PartitionSet,
    SubscribedTopic,
)

if TYPE_CHECKING:
    from regroup.coordinator.consumer.kept_target import KeptTarget
    from regroup.coordinator.consumer.last_target import LastTarget
    from regroup.coordinator.consumer.regexes import RegexAside
    from regroup.coordinator.consumer.target_aside import TargetAside

#: a regular expression as the group resolved it: the topics it matched and when
ResolvedRegex = ConsumerGroupRegularExpressionValue

#: what one member subscribes to: its topic names and its regular expression
Subscription = tuple[tuple[str, ...], str | None]

#: topic id -> partitions
Partitions = Mapping[uuid.UUID, frozenset[int]]
EMPTY: Partitions = {}


class ConsumerGroupMemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"
    UNKNOWN = "unknown"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


_MEMBER_STABLE: Final = ConsumerGroupMemberState.STABLE
_GROUP_EMPTY: Final = ConsumerGroupState.EMPTY
_GROUP_ASSIGNING: Final = ConsumerGroupState.ASSIGNING
_GROUP_RECONCILING: Final = ConsumerGroupState.RECONCILING
_GROUP_STABLE: Final = ConsumerGroupState.STABLE


#: the metadata fields of a member or of a metadata record value, as one tuple
_metadata_of: Final[operator.attrgetter[Any]] = operator.attrgetter(*MEMBER_METADATA_FIELDS)


def to_set(parts: PartitionSet) -> dict[uuid.UUID, frozenset[int]]:
    return {topic_id: frozenset(ps) for topic_id, ps in parts if ps}


#: a topic id's sort key: the order of ``uuid.UUID``'s own comparisons (by its integer), read in C rather than
#: through its ``__lt__`` (a Python method: sorting 10,000 topic ids called it 140,000 times)
TOPIC_ORDER: Final[operator.attrgetter[int]] = operator.attrgetter("int")


def to_tuple(parts: Partitions) -> PartitionSet:
    return tuple((t, tuple(sorted(parts[t]))) for t in sorted(parts, key=TOPIC_ORDER) if parts[t])


@dataclass(slots=True, kw_only=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    classic: ClassicProtocolMetadata | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: ConsumerGroupMemberState = ConsumerGroupMemberState.STABLE
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)

    def copy(self) -> ConsumerGroupMember:
        return ConsumerGroupMember(
            member_id=self.member_id,
            instance_id=self.instance_id,
            rack_id=self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            subscribed_topic_names=self.subscribed_topic_names,
            subscribed_topic_regex=self.subscribed_topic_regex,
            server_assignor=self.server_assignor,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            classic=self.classic,
            member_epoch=self.member_epoch,
            previous_member_epoch=self.previous_member_epoch,
            state=self.state,
            assigned=self.assigned,
            pending_revocation=self.pending_revocation,
        )

    def metadata_value(self) -> ConsumerGroupMemberMetadataValue:
        """The member's metadata record value (``MEMBER_METADATA_FIELDS``)."""
        return ConsumerGroupMemberMetadataValue(**dict(zip(MEMBER_METADATA_FIELDS, _metadata_of(self), strict=True)))

    def set_metadata(self, value: ConsumerGroupMemberMetadataValue) -> None:
        """Take every ``MEMBER_METADATA_FIELDS`` field from a metadata record value."""
        for name, field_value in zip(MEMBER_METADATA_FIELDS, _metadata_of(value), strict=True):
            setattr(self, name, field_value)

    def metadata_differs(self, other: ConsumerGroupMember) -> bool:
        """Whether a metadata record written for one would differ from the other's (one C-level attribute
        getter per member: this runs on every heartbeat)."""
        return bool(_metadata_of(self) != _metadata_of(other))

    def classic_protocol_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.classic.protocols) if self.classic is not None else ()


@dataclass(slots=True, kw_only=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    #: when the target was computed (0: not known): the next waits for the assignment interval from it
    assignment_timestamp_ms: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    targets: dict[str, Partitions] = field(default_factory=dict)
    subscribed_topics: dict[str, SubscribedTopic] = field(default_factory=dict)  # by name
    #: (topic id, partition) -> the member holding it (assigned or pending revocation); exclusive
    partition_holders: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    #: regular expression -> the topics the group last resolved it to (records), and when
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    #: regular expression -> how many members subscribe to it (derived from the members, kept by set/drop)
    regex_subscribers: dict[str, int] = field(default_factory=dict)
    #: (topic names, regular expression) -> how many members subscribe to exactly that (derived from the
    #: members, kept by set/drop): what the group subscribes to, read without a walk over its members
    subscriptions: dict[Subscription, int] = field(default_factory=dict)
    #: server assignor -> how many members name it (derived from the members, kept by set/drop)
    assignor_votes: dict[str, int] = field(default_factory=dict)
    # --- soft state (not in records) ---
    metadata_refresh_needed: bool = True
    #: the cluster image the regular expressions were last resolved against (None: not since loading)
    regex_image: ClusterImage | None = field(default=None, compare=False, repr=False)
    #: (state, group epoch, assignment epoch) as last reported in a ``GroupStateChanged`` event (report.py)
    reported: tuple[ConsumerGroupState, int, int] | None = field(default=None, compare=False, repr=False)
    #: the target assignment kept between computations (``kept_target``; rebuilt from the targets when stale)
    kept_target: KeptTarget | None = field(default=None, compare=False, repr=False)
    #: the last full target computation's inputs and result (``last_target``; trusted member by member)
    last_target: LastTarget | None = field(default=None, compare=False, repr=False)
    #: the full target computation running beside the coordinator (``target_aside``), if one is
    target_aside: TargetAside | None = field(default=None, compare=False, repr=False)
    #: the matching of the regular expressions running beside the coordinator (``regexes.RegexAside``), if one is
    regex_aside: RegexAside | None = field(default=None, compare=False, repr=False)
    #: the group epoch whose computation beside the coordinator failed: it is computed within a heartbeat
    #: instead, whose member is told of the failure
    target_failed_epoch: int = field(default=-1, compare=False, repr=False)

    # --- derived ---------------------------------------------------------------------------------------
    def state(self) -> ConsumerGroupState:
        # (the enum members read once, not per member: ListGroups asks this of every consumer group)
        if not self.members:
            return _GROUP_EMPTY
        epoch = self.assignment_epoch
        if self.group_epoch > epoch:
            return _GROUP_ASSIGNING
        for m in self.members.values():
            if m.state is not _MEMBER_STABLE or m.member_epoch != epoch:
                return _GROUP_RECONCILING
        return _GROUP_STABLE

    def is_held(self, topic_id: uuid.UUID, partition: int) -> bool:
        return (topic_id, partition) in self.partition_holders

    def classic_member_count(self) -> int:
        return sum(1 for m in self.members.values() if m.classic is not None)

    def target_of(self, member_id: str) -> Partitions:
        return self.targets.get(member_id, EMPTY)

    def preferred_assignor(self, default: str) -> str:
        """The assignor named by most members (ties: the alphabetically first), else the default."""
        votes = self.assignor_votes
        if not votes:
            return default
        return min(votes, key=lambda name: (-votes[name], name))

    # --- index maintenance (used by replay) ------------------------------------------------------------
    def _release(self, member: ConsumerGroupMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    if self.partition_holders.get((topic_id, p)) == member.member_id:
                        del self.partition_holders[(topic_id, p)]

    def _hold(self, member: ConsumerGroupMember) -> None:
        for parts in (member.assigned, member.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    holder = self.partition_holders.setdefault((topic_id, p), member.member_id)
                    if holder != member.member_id:
                        raise CoordinatorBug(
                            f"group {self.group_id}: partition {topic_id}-{p} held by {holder} and {member.member_id}"
                        )

    def _count_regex(self, regex: str | None, delta: int) -> None:
        if regex is None:
            return
        count = self.regex_subscribers.get(regex, 0) + delta
        if count:
            self.regex_subscribers[regex] = count
        else:
            del self.regex_subscribers[regex]

    def _count_subscription(self, member: ConsumerGroupMember, delta: int) -> None:
        """Count the member's subscription and its assignor in (``delta`` 1) or out (-1)."""
        key = (member.subscribed_topic_names, member.subscribed_topic_regex)
        count = self.subscriptions.get(key, 0) + delta
        if count:
            self.subscriptions[key] = count
        else:
            del self.subscriptions[key]
        assignor = member.server_assignor
        if assignor:
            count = self.assignor_votes.get(assignor, 0) + delta
            if count:
                self.assignor_votes[assignor] = count
            else:
                del self.assignor_votes[assignor]

    def set_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
            self._count_regex(old.subscribed_topic_regex, -1)
            self._count_subscription(old, -1)
            if old.instance_id is not None and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._count_regex(member.subscribed_topic_regex, 1)
        self._count_subscription(member, 1)
        self._hold(member)

    def drop_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._release(old)
        self._count_regex(old.subscribed_topic_regex, -1)
        self._count_subscription(old, -1)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
