"""Rebalance events: the runtime calls ``GroupEvents`` after every core call with its result; it turns the
core's events (``coordinator/events.py``: what happened, in order) into info log lines (state, generation,
members joining and leaving) and, with ``--events FILE``, JSON lines in the simulator's event schema
(docs/simulator.md). At startup it writes the groups loaded from the log as they are (their state, members
and stored assignment), as a first look at them. A call that changed nothing (a heartbeat) has no events
and costs nothing here. What it knows of a group it learnt from those events: the core's groups are not read.

* ``group_state`` — one per transition of the group (Empty when it is created; Dead when it is deleted or
  converted to a consumer group), ``state``, ``generation``, ``detail`` = ``group=<id> type=classic
  protocol=<name> [rebalance=eager|cooperative] leader=<member id>``: ``protocol`` is the selected assignor as
  the group holds it at that transition (``None`` until a generation selects one), ``rebalance`` the style the
  members' clients use, as they choose it (the highest rebalance protocol every assignor a member lists
  supports), given when the group has members, every member lists known assignors only and they agree (the
  members as of that transition, with the assignors their last JoinGroup listed: ``MemberJoined.protocols``,
  ``MemberProtocolsChanged``);
* ``member_state`` — ``member`` (the client id), ``member_id``, ``generation``, ``state`` = ``Joined`` or
  ``Left``, ``detail`` = ``group=<id>``;
* ``group_assignment`` — one row per partition of each member's assignment when a generation becomes Stable
  (the leader's SyncGroup stored it), right after that ``group_state`` row (consumer-protocol groups; other
  protocols' assignments are opaque and produce no rows).

KIP-848 consumer groups (``type=consumer`` in ``detail``) use the same types with the consumer protocol's
numbers, so a run can be analysed like a classic one:

* ``group_state`` — ``state`` = Empty, Assigning, Reconciling, Stable (Dead once deleted or converted back to
  classic), ``generation`` = the group epoch, ``detail`` = ``group=<id> type=consumer protocol=<server
  assignor> assignment_epoch=<n>`` (the assignor by regroup's name: ``uniform``, ``server-range``); logged once
  per write (a request or a timer firing) that changed the state or an epoch;
* ``member_state`` — ``Joined``/``Left`` as above, ``generation`` = the group epoch;
* ``group_assignment`` — one row per partition of every member's *target* assignment each time a new target
  is computed, ``generation`` = its assignment epoch (the counterpart of a classic generation's assignment);
* ``assigned`` / ``revoked`` — the coordinator's side of reconciliation, one row per partition: the partition
  was handed to the member (it may use it from its next heartbeat response on), or is no longer held by it
  (the member confirmed the revocation, left, or was fenced). ``generation`` = the member epoch, ``detail`` =
  ``group=<id>``. Partitions a member still has to revoke count as held: they are never handed to another
  member before they are released, which is exactly what these rows let an analysis check.

The server hosts many groups while a simulation has one, hence the group id in ``detail``; ``t`` is wall-clock
milliseconds. Every line has all keys of the schema, in its order.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from regroup.assignors.registry import server_side_name
from regroup.client.config import ConfigError, rebalance_protocol
from regroup.client.embedded import assigned_partitions
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import (
    AssignmentStored,
    Event,
    GroupDeleted,
    GroupStateChanged,
    MemberJoined,
    MemberLeft,
    MemberProtocolsChanged,
    PartitionsAssigned,
    PartitionsRevoked,
    TargetComputed,
)
from regroup.coordinator.result import Result
from regroup.model.cluster import ClusterImage
from regroup.model.eventlog import FIELDS

log = logging.getLogger("regroup.server.events")


def rebalance_style(
    protocol_type: str | None, members: Iterable[tuple[str, ...]], known: dict[tuple[str, ...], str | None]
) -> str | None:
    """``eager`` or ``cooperative``: the rebalance protocol a classic group's consumers use, as their clients
    choose it from the assignors they list (``members``: each member's list; the highest one all of them
    support); None when the group's protocol type is not ``consumer``, it has no members, a member lists an
    assignor this server does not know, or the members differ. ``known`` caches the answer per list of names."""
    if protocol_type != "consumer":
        return None
    styles: set[str | None] = set()
    for names in members:
        if names not in known:
            try:
                known[names] = rebalance_protocol(names).name.lower()
            except ConfigError:
                known[names] = None
        styles.add(known[names])
    return styles.pop() if len(styles) == 1 else None  # (none: no members)


class GroupEvents:
    """An observer for ``CoordinatorRuntime.add_observer``; ``close()`` closes the events file."""

    def __init__(self, path: Path | None = None) -> None:
        self._styles: dict[tuple[str, ...], str | None] = {}  # rebalance style by the assignors a member lists
        #: classic group id -> member id -> the assignors the member listed (from the events)
        self._protocols: dict[str, dict[str, tuple[str, ...]]] = {}
        self._names: tuple[ClusterImage | None, dict[uuid.UUID, str]] = (None, {})  # topic names of an image
        self._primed = False
        self._seq = 0
        self._file: IO[str] | None = path.open("a", encoding="utf-8", buffering=1) if path is not None else None

    def __call__(self, coordinator: GroupCoordinator, result: Result, now_ms: int) -> None:
        if not self._primed:
            self._primed = True
            self._events(coordinator, coordinator.loaded_events, now_ms)  # how the groups stood at load
        self._events(coordinator, result.events, now_ms)

    def _events(self, coordinator: GroupCoordinator, events: list[Event], now_ms: int) -> None:
        for event in events:
            if isinstance(event, GroupStateChanged):
                if event.group_type == "classic":
                    self._classic_state(event, now_ms)
                else:
                    self._epoch_state(event, now_ms)
            elif isinstance(event, MemberJoined):
                if event.group_type == "classic":
                    self._protocols.setdefault(event.group_id, {})[event.member_id] = event.protocols
                self._member_state(now_ms, event.group_id, event.member_id, event.client_id, event.generation, "Joined")
            elif isinstance(event, MemberLeft):
                if event.group_type == "classic":
                    self._protocols.get(event.group_id, {}).pop(event.member_id, None)
                self._member_state(now_ms, event.group_id, event.member_id, event.client_id, event.generation, "Left")
            elif isinstance(event, MemberProtocolsChanged):
                if event.group_type == "classic":
                    self._protocols.setdefault(event.group_id, {})[event.member_id] = event.protocols
            elif isinstance(event, GroupDeleted):
                if event.group_type == "classic":
                    self._protocols.pop(event.group_id, None)
            elif isinstance(event, AssignmentStored):
                self._assignment_rows(event, now_ms)
            elif isinstance(event, TargetComputed):
                self._target_rows(coordinator, event, now_ms)
            elif isinstance(event, (PartitionsAssigned, PartitionsRevoked)):
                kind = "assigned" if isinstance(event, PartitionsAssigned) else "revoked"
                for topic, partition in self._partitions(coordinator, event.partitions):
                    self._emit(
                        now_ms,
                        kind,
                        member=event.client_id,
                        member_id=event.member_id,
                        generation=event.member_epoch,
                        topic=topic,
                        partition=partition,
                        detail=f"group={event.group_id}",
                    )

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # ------------------------------------------------------------------------------------------ internals
    def _classic_state(self, event: GroupStateChanged, now: int) -> None:
        group_id = event.group_id
        log.info(
            "group=%s state=%s generation=%d protocol=%s leader=%s members=%d",
            group_id,
            event.state,
            event.generation,
            event.protocol,
            event.leader,
            event.members,
        )
        if self._file is None:
            return
        members = self._protocols.get(group_id)
        style = (
            rebalance_style(event.protocol_type, members.values(), self._styles)
            if event.state != "Dead" and members
            else None
        )
        rebalance = f" rebalance={style}" if style else ""
        detail = f"group={group_id} type=classic protocol={event.protocol}{rebalance} leader={event.leader}"
        self._emit(now, "group_state", state=event.state, generation=event.generation, detail=detail)

    def _epoch_state(self, event: GroupStateChanged, now: int) -> None:
        """A group with epochs and a server-side assignor (a KIP-848 consumer group, a share group)."""
        assignor = event.protocol or ""
        log.info(
            "group=%s type=%s state=%s group_epoch=%d assignment_epoch=%d assignor=%s members=%d",
            event.group_id,
            event.group_type,
            event.state,
            event.generation,
            event.assignment_epoch or 0,
            assignor,
            event.members,
        )
        name = server_side_name(assignor) or assignor
        detail = (
            f"group={event.group_id} type={event.group_type} protocol={name} "
            f"assignment_epoch={event.assignment_epoch or 0}"
        )
        self._emit(now, "group_state", state=event.state, generation=event.generation, detail=detail)

    def _target_rows(self, coordinator: GroupCoordinator, event: TargetComputed, now: int) -> None:
        if self._file is None:
            return
        where = f"group={event.group_id}"
        for member_id, client_id, target in sorted(event.targets):
            for topic, partition in self._partitions(coordinator, target.items()):
                self._emit(
                    now,
                    "group_assignment",
                    member=client_id,
                    member_id=member_id,
                    generation=event.assignment_epoch,
                    topic=topic,
                    partition=partition,
                    detail=where,
                )

    def _partitions(
        self, coordinator: GroupCoordinator, partitions: Iterable[tuple[uuid.UUID, Iterable[int]]]
    ) -> list[tuple[str, int]]:
        """(topic name, partition) of each partition, by topic name then partition."""
        image = coordinator.image
        if self._names[0] is not image:
            self._names = (image, {t.topic_id: t.name for t in image.by_name.values()})
        names = self._names[1]
        return sorted((names.get(topic_id, str(topic_id)), p) for topic_id, ps in partitions for p in ps)

    def _member_state(
        self, now: int, group_id: str, member_id: str, client_id: str, generation: int, state: str
    ) -> None:
        """A member joined or left: one log line and one ``member_state`` event."""
        verb = "joined" if state == "Joined" else "left"
        log.info("group=%s member %s member_id=%s client_id=%s", group_id, verb, member_id, client_id)
        self._emit(
            now,
            "member_state",
            member=client_id,
            member_id=member_id,
            generation=generation,
            state=state,
            detail=f"group={group_id}",
        )

    def _assignment_rows(self, event: AssignmentStored, now: int) -> None:
        if self._file is None or event.protocol_type != "consumer":
            return
        for member_id, client_id, assignment in sorted(event.assignments):
            for topic, partition in sorted(assigned_partitions(assignment) or ()):
                self._emit(
                    now,
                    "group_assignment",
                    member=client_id,
                    member_id=member_id,
                    generation=event.generation,
                    topic=topic,
                    partition=partition,
                )

    def _emit(self, t: int, type_: str, **values: Any) -> None:
        if self._file is None:
            return
        event: dict[str, Any] = dict.fromkeys(FIELDS)
        event.update(values)
        event.update(seq=self._seq, t=t, type=type_)
        self._seq += 1
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")
