"""What happened in an operation, as the core says it: typed events, emitted at the point of change and
carried by the operation's ``Result`` (``Result.events``), in the order they happened.

Shells (the server's event log, metrics and rebalance log; the simulator's observer) learn what changed
from these instead of comparing the core's state before and after a call. An event is plain data: ids,
names, numbers and tuples, nothing a shell could change the core through. A refused request has no
events (they are dropped with its records); a timer's events are in the result of the call that fired it.
How the groups stood when the coordinator was rebuilt from its records is said the same way
(``GroupCoordinator.loaded_events``): each member joined (a consumer group's with its current assignment),
each group's state, each stable classic group's assignments.
Events are built on every write, so, like the core's other value types, they are dataclasses that are not
frozen (the compiled build compiles their constructors, written out from the fields: docs/architecture.md);
their ``Final`` fields keep them immutable for mypy, ``unsafe_hash`` keeps the field-based hash.

* ``GroupCreated`` / ``GroupDeleted`` — a group entered or left the namespace (a classic group converted to
  a consumer group is deleted as a classic group and created as a consumer group, and the reverse).
* ``GroupStateChanged`` — a classic group's transition (with its generation, selected protocol and leader),
  or a consumer group's state or epochs after a write that changed them (group epoch as ``generation``, the
  server assignor as ``protocol``, and ``assignment_epoch``). A consumer group's state is derived from its
  members, so it is reported once per write (a request or a timer firing), not per record.
* ``MemberJoined`` / ``MemberLeft`` — a member entered or left a group; ``MemberLeft.reason`` says why
  (``LeaveReason``: a fenced member's reason is the timeout or the fencing that removed it).
  ``MemberJoined.protocols`` names the protocols (assignors) a member of the classic protocol listed.
* ``MemberProtocolsChanged`` — a member still in its group lists other protocols: a classic member rejoined
  with another list, or a consumer group's member moved between the classic and the consumer protocol.
* ``AssignmentStored`` — a classic generation's assignments, stored by the leader's SyncGroup (or carried
  over when a consumer group converts back to classic): the members of the group's record itself, so that a
  group of 10,000 members costs the event no copy of them.
* ``TargetComputed`` — a consumer group's new target assignment: its epoch, the assignor and every member's
  target.
* ``MemberAssignmentChanged`` — a consumer group's member has a new current assignment: its member epoch and
  state, the partitions assigned to it and those it still has to revoke, at every write of it (a reconciliation
  step, an epoch bump with nothing to move, a rejoin that starts over at epoch 0, a static member's
  replacement, a conversion).
* ``PartitionsAssigned`` / ``PartitionsRevoked`` — reconciliation on the coordinator's side: partitions a
  member now holds (assigned, or still to be revoked) that it did not hold before, and the reverse.
* ``OffsetsCommitted`` — offsets a commit stored.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from regroup.records.model import MemberMetadata

#: the types of group an event can name
GroupTypeName = Literal["classic", "consumer", "share"]

#: why a member left a group
LeaveReason = Literal[
    "leave",  # LeaveGroup, or a ConsumerGroupHeartbeat with epoch -1 (a static member leaving with -2 stays)
    "session timeout",  # no heartbeat within the session timeout
    "revocation timeout",  # a consumer-protocol member did not revoke in time
    "join timeout",  # a classic member did not rejoin in time (join phase, or told to rejoin a consumer group)
    "sync timeout",  # a classic member did not send SyncGroup in time
    "group max size",  # a classic group over its maximum size turned the member away
    "replaced",  # a static member's instance id was taken over by a new member id
    "group deleted",  # the group was deleted (DeleteGroups, offsets expiry)
    "converted",  # the group changed type; the member is in the group of the other type now
]

#: partitions by topic id, sorted: ((topic id, (partition, ...)), ...)
Partitions = tuple[tuple[uuid.UUID, tuple[int, ...]], ...]

#: a member's target as the group holds it: topic id -> partitions (never changed once held)
TargetPartitions = Mapping[uuid.UUID, frozenset[int]]


@dataclass(slots=True, unsafe_hash=True)
class GroupCreated:
    group_id: Final[str]
    group_type: Final[GroupTypeName]


@dataclass(slots=True, unsafe_hash=True)
class GroupDeleted:
    group_id: Final[str]
    group_type: Final[GroupTypeName]


@dataclass(slots=True, unsafe_hash=True)
class GroupStateChanged:
    group_id: Final[str]
    group_type: Final[GroupTypeName]
    #: classic: Empty, PreparingRebalance, CompletingRebalance, Stable; consumer: Empty, Assigning,
    #: Reconciling, Stable
    state: Final[str]
    #: classic: the generation; consumer: the group epoch
    generation: Final[int]
    #: classic: the selected protocol (None until one is); consumer: the server assignor (Kafka's name)
    protocol: Final[str | None]
    #: classic: the protocol type (``consumer`` for Kafka consumers); consumer: None
    protocol_type: Final[str | None]
    #: classic: the leader's member id; consumer: None
    leader: Final[str | None]
    #: consumer: the target assignment epoch; classic: None
    assignment_epoch: Final[int | None]
    members: Final[int]


@dataclass(slots=True, unsafe_hash=True)
class MemberJoined:
    group_id: Final[str]
    group_type: Final[GroupTypeName]
    member_id: Final[str]
    client_id: Final[str]
    #: classic: the group's generation; consumer: the group epoch
    generation: Final[int]
    #: a member of the classic protocol: the protocols (assignors) its JoinGroup listed, in its order; empty for
    #: a member of the consumer or share protocol
    protocols: Final[tuple[str, ...]] = ()


@dataclass(slots=True, unsafe_hash=True)
class MemberLeft:
    group_id: Final[str]
    group_type: Final[GroupTypeName]
    member_id: Final[str]
    client_id: Final[str]
    #: classic: the group's generation; consumer: the group epoch
    generation: Final[int]
    reason: Final[LeaveReason]


@dataclass(slots=True, unsafe_hash=True)
class MemberProtocolsChanged:
    """A member still in its group lists other protocols than when it joined or last changed them: a classic
    member's JoinGroup listed other protocols, or a consumer group's member moved between the protocols
    (``protocols`` empty: it speaks the consumer protocol now)."""

    group_id: Final[str]
    group_type: Final[GroupTypeName]
    member_id: Final[str]
    protocols: Final[tuple[str, ...]]


@dataclass(slots=True, unsafe_hash=True)
class AssignmentStored:
    """A classic generation's assignments: the members as the group's record stores them (``members``, in the
    group's member order, each with its opaque assignment bytes); ``protocol_type`` says how to read them
    (``consumer``: Kafka's consumer protocol)."""

    group_id: Final[str]
    generation: Final[int]
    protocol_type: Final[str | None]
    protocol: Final[str | None]
    members: Final[tuple[MemberMetadata, ...]]

    @property
    def assignments(self) -> tuple[tuple[str, str, bytes], ...]:
        """(member id, client id, assignment) per member, in order (made when asked)."""
        return tuple([(m.member_id, m.client_id, m.assignment) for m in self.members])


@dataclass(slots=True)
class TargetComputed:
    """A consumer group's new target assignment: (member id, client id, its target) per member. The targets
    are the group's own (immutable) mappings, not sorted copies: a new target costs the coordinator what
    changed, and only a reader of the event that wants them sorted pays for sorting them."""

    group_id: Final[str]
    assignment_epoch: Final[int]
    assignor: Final[str]
    targets: Final[tuple[tuple[str, str, TargetPartitions], ...]]


@dataclass(slots=True, unsafe_hash=True)
class MemberAssignmentChanged:
    """A consumer group's member's current assignment as the coordinator now holds it, at every write of it:
    its member epoch, its reconciliation state, the partitions assigned to it and those it still has to revoke
    (it still holds them)."""

    group_id: Final[str]
    member_id: Final[str]
    client_id: Final[str]
    member_epoch: Final[int]
    #: Kafka's member states: ``stable``, ``unrevoked_partitions``, ``unreleased_partitions``
    state: Final[str]
    assigned: Final[Partitions]
    pending_revocation: Final[Partitions]


@dataclass(slots=True, unsafe_hash=True)
class PartitionsAssigned:
    group_id: Final[str]
    member_id: Final[str]
    client_id: Final[str]
    member_epoch: Final[int]
    partitions: Final[Partitions]


@dataclass(slots=True, unsafe_hash=True)
class PartitionsRevoked:
    group_id: Final[str]
    member_id: Final[str]
    client_id: Final[str]
    #: the member's epoch when it released them (its last epoch when it left or was fenced)
    member_epoch: Final[int]
    partitions: Final[Partitions]


@dataclass(slots=True, unsafe_hash=True)
class OffsetsCommitted:
    """(topic, partition, offset) per committed partition, in the request's order."""

    group_id: Final[str]
    offsets: Final[tuple[tuple[str, int, int], ...]]


@dataclass(slots=True, unsafe_hash=True)
class OffsetsDeleted:
    """(topic, partition) per committed offset an OffsetDelete removed."""

    group_id: Final[str]
    partitions: Final[tuple[tuple[str, int], ...]]


Event = (
    GroupCreated
    | GroupDeleted
    | GroupStateChanged
    | MemberJoined
    | MemberLeft
    | MemberProtocolsChanged
    | AssignmentStored
    | TargetComputed
    | MemberAssignmentChanged
    | PartitionsAssigned
    | PartitionsRevoked
    | OffsetsCommitted
    | OffsetsDeleted
)
