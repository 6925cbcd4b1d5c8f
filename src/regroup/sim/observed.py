"""The scenario's group as the coordinator's events describe it (``coordinator/events.py``): which type of group
holds the id (a classic or a KIP-848 consumer group; share members have a group of their own), its state and
generation (a consumer group's group epoch), its members and, in a consumer group, each member's current
assignment as the coordinator holds it (its member epoch and assigned partitions). The endpoint feeds it the
events of every result; the quiescence check and the fenced-commit check read it. Nothing here reads the
core's groups: what the events do not say comes from the facade's read-only views."""

from __future__ import annotations

from typing import Final

from regroup.coordinator.events import (
    Event,
    GroupCreated,
    GroupDeleted,
    GroupStateChanged,
    MemberAssignmentChanged,
    MemberJoined,
    MemberLeft,
)

#: the group types this view follows (a share group, even under the same id, is the share endpoint's)
_FOLLOWED: Final = ("classic", "consumer")


class ObservedGroup:
    __slots__ = ("generation", "group_id", "kind", "members", "state", "version")

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        #: the type of the group under the id: "classic", "consumer", or "" while there is none
        self.kind = ""
        #: its state as its last ``GroupStateChanged`` said ("" before the first)
        self.state = ""
        #: a classic group's generation, a consumer group's group epoch
        self.generation = 0
        #: member id -> its current assignment, in the group's member order. A consumer group's member holds
        #: nothing at epoch 0 until its first current assignment; for a classic group only the ids count.
        self.members: dict[str, MemberAssignmentChanged] = {}
        #: counts changes of the group, its generation or its members (a key for caches of answers about them)
        self.version = 0

    def apply(self, event: Event) -> str | None:
        """Take one event of a result into account; the id of the member whose epoch or presence it changed,
        when it did."""
        if isinstance(event, MemberAssignmentChanged):
            if event.group_id != self.group_id or self.kind != "consumer":
                return None
            self.members[event.member_id] = event
            return event.member_id
        if isinstance(event, GroupStateChanged):
            if event.group_id == self.group_id and event.group_type == self.kind:
                self.state = event.state
                if event.generation != self.generation:
                    self.generation = event.generation
                    self.version += 1
            return None
        if isinstance(event, MemberJoined):
            if event.group_id != self.group_id or event.group_type != self.kind:
                return None
            self.members[event.member_id] = MemberAssignmentChanged(
                self.group_id, event.member_id, event.client_id, 0, "stable", (), ()
            )
            self.version += 1
            return event.member_id
        if isinstance(event, MemberLeft):
            if event.group_id != self.group_id or event.group_type != self.kind:
                return None
            self.members.pop(event.member_id, None)
            self.version += 1
            return event.member_id
        if isinstance(event, GroupCreated):
            if event.group_id == self.group_id and event.group_type in _FOLLOWED:
                self._replaced(event.group_type)
        elif isinstance(event, GroupDeleted) and event.group_id == self.group_id and event.group_type == self.kind:
            self._replaced("")
        return None

    def _replaced(self, kind: str) -> None:
        self.kind = kind
        self.state = ""
        self.generation = 0
        self.members = {}
        self.version += 1
