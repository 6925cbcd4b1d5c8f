"""Rebalance events: the runtime calls ``GroupEvents`` after every core call; it compares each group with what
it saw last and logs the changes (state, generation, members joining and leaving) at info, and, with
``--events FILE``, appends them as JSON lines in the simulator's event schema (docs/simulator.md):

* ``group_state`` — ``state``, ``generation``, ``detail`` = ``group=<id> type=classic protocol=<name>
  [rebalance=eager|cooperative] leader=<member id>``: ``protocol`` is the selected assignor, ``rebalance`` the
  style the members' clients use, as they choose it (the highest rebalance protocol every assignor a member lists
  supports), given when every member lists known assignors only and they agree;
* ``member_state`` — ``member`` (the client id), ``member_id``, ``generation``, ``state`` = ``Joined`` or
  ``Left``, ``detail`` = ``group=<id>``;
* ``group_assignment`` — one row per partition of each member's assignment when a generation becomes Stable
  (consumer-protocol groups; other protocols' assignments are opaque and produce no rows).

KIP-848 consumer groups (``type=consumer`` in ``detail``) use the same types with the consumer protocol's
numbers, so a run can be analysed like a classic one:

* ``group_state`` — ``state`` = Empty, Assigning, Reconciling, Stable (Dead once deleted or converted back to
  classic), ``generation`` = the group epoch, ``detail`` = ``group=<id> type=consumer protocol=<server
  assignor> assignment_epoch=<n>`` (the assignor by regroup's name: ``uniform``, ``server-range``); logged when
  the state or an epoch changes;
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
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from regroup.assignors.registry import server_side_name
from regroup.client.config import ConfigError, rebalance_protocol
from regroup.client.embedded import assigned_partitions
from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupState
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.model.eventlog import FIELDS
from regroup.records.consumer import CONSUMER_KEY_TYPES

log = logging.getLogger("regroup.server.events")


@dataclass(frozen=True, slots=True)
class _View:
    state: str
    generation: int
    protocol: str | None
    leader: str | None
    members: frozenset[tuple[str, str]]  # (member id, client id)


def _view(group: ClassicGroup) -> _View:
    return _View(
        state=group.state.value,
        generation=group.generation,
        protocol=group.protocol_name,
        leader=group.leader_id,
        members=frozenset((m.member_id, m.client_id) for m in group.members.values()),
    )


@dataclass(frozen=True, slots=True)
class _ConsumerView:
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: frozenset[tuple[str, str]]  # (member id, client id)
    #: (member id, topic id, partition) held by the member: assigned or still to be revoked
    held: frozenset[tuple[str, uuid.UUID, int]]


def _consumer_view(group: ConsumerGroup, default_assignor: str) -> _ConsumerView:
    return _ConsumerView(
        state=group.state().value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor=group.preferred_assignor(default_assignor),
        members=frozenset((m.member_id, m.client_id) for m in group.members.values()),
        held=frozenset((member_id, t, p) for (t, p), member_id in group.partition_holders.items()),
    )


_DEAD_CONSUMER = _ConsumerView("Dead", 0, 0, "", frozenset(), frozenset())


def rebalance_style(group: ClassicGroup | None, known: dict[tuple[str, ...], str | None]) -> str | None:
    """``eager`` or ``cooperative``: the rebalance protocol a consumer group's members use, as their clients choose
    it from the assignors they list (the highest one all of them support); None when a member lists an assignor
    this server does not know, or the members differ. ``known`` caches the answer per list of names."""
    if group is None or group.protocol_type != "consumer" or not group.members:
        return None
    styles: set[str | None] = set()
    for member in group.members.values():
        names = tuple(name for name, _ in member.protocols)
        if names not in known:
            try:
                known[names] = rebalance_protocol(names).name.lower()
            except ConfigError:
                known[names] = None
        styles.add(known[names])
    return styles.pop() if len(styles) == 1 else None


class GroupEvents:
    """An observer for ``CoordinatorRuntime.add_observer``; ``close()`` closes the events file."""

    def __init__(self, path: Path | None = None) -> None:
        self._views: dict[str, _View] = {}
        self._consumer_views: dict[str, _ConsumerView] = {}
        self._member_epochs: dict[str, dict[str, int]] = {}  # consumer group -> member id -> last member epoch
        self._consumers_primed = False
        self._styles: dict[tuple[str, ...], str | None] = {}  # rebalance style by the assignors a member lists
        self._seq = 0
        self._file: IO[str] | None = path.open("a", encoding="utf-8", buffering=1) if path is not None else None

    def __call__(self, coordinator: GroupCoordinator, result: Result, now_ms: int) -> None:
        for group_id, group in coordinator.groups.items():
            view = _view(group)
            if self._views.get(group_id) != view:
                self._changed(group_id, self._views.get(group_id), view, group, now_ms)
                self._views[group_id] = view
        for group_id in [g for g in self._views if g not in coordinator.groups]:
            old = self._views.pop(group_id)
            dead = _View("Dead", old.generation, None, None, frozenset())
            self._changed(group_id, old, dead, None, now_ms)
        self._consumer_groups(coordinator, result, now_ms)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # ------------------------------------------------------------------------------------------ internals
    def _changed(self, group_id: str, old: _View | None, new: _View, group: ClassicGroup | None, now: int) -> None:
        old_members = dict(old.members) if old else {}
        new_members = dict(new.members)
        for member_id in sorted(new_members.keys() - old_members.keys()):
            self._member_state(now, group_id, member_id, new_members[member_id], new.generation, "Joined")
        for member_id in sorted(old_members.keys() - new_members.keys()):
            self._member_state(now, group_id, member_id, old_members[member_id], new.generation, "Left")
        if old is not None and (old.state, old.generation) == (new.state, new.generation):
            return
        log.info(
            "group=%s state=%s generation=%d protocol=%s leader=%s members=%d",
            group_id,
            new.state,
            new.generation,
            new.protocol,
            new.leader,
            len(new_members),
        )
        style = rebalance_style(group, self._styles)
        rebalance = f" rebalance={style}" if style else ""
        detail = f"group={group_id} type=classic protocol={new.protocol}{rebalance} leader={new.leader}"
        self._emit(now, "group_state", state=new.state, generation=new.generation, detail=detail)
        if group is not None and group.state is ClassicGroupState.STABLE:
            self._assignment_rows(group, now)

    def _consumer_groups(self, coordinator: GroupCoordinator, result: Result, now: int) -> None:
        """A consumer group changes only through its records: after the first call, only the groups this
        result wrote to are looked at (a heartbeat that changed nothing costs nothing here)."""
        default_assignor = coordinator.config.consumer_group_assignors[0]
        names = {t.topic_id: t.name for t in coordinator.image.by_name.values()}
        if self._consumers_primed:
            touched = {r.key.group_id for r in result.records if isinstance(r.key, CONSUMER_KEY_TYPES)}
        else:
            touched = set(coordinator.consumer_groups)
            self._consumers_primed = True
        for group_id, group in coordinator.consumer_groups.items():
            if group_id not in touched:
                continue
            view = _consumer_view(group, default_assignor)
            old = self._consumer_views.get(group_id)
            if old != view:
                self._consumer_changed(group_id, old, view, group, names, now)
                self._consumer_views[group_id] = view
        for group_id in [g for g in self._consumer_views if g not in coordinator.consumer_groups]:
            old = self._consumer_views.pop(group_id)
            dead = _ConsumerView("Dead", old.group_epoch, old.assignment_epoch, old.assignor, frozenset(), frozenset())
            self._consumer_changed(group_id, old, dead, None, names, now)

    def _consumer_changed(
        self,
        group_id: str,
        old: _ConsumerView | None,
        new: _ConsumerView,
        group: ConsumerGroup | None,
        names: dict[uuid.UUID, str],
        now: int,
    ) -> None:
        before = old or _DEAD_CONSUMER
        old_members, new_members = dict(before.members), dict(new.members)
        clients = {**old_members, **new_members}
        where = f"group={group_id}"
        for member_id in sorted(new_members.keys() - old_members.keys()):
            self._member_state(now, group_id, member_id, new_members[member_id], new.group_epoch, "Joined")
        epochs = self._member_epochs.setdefault(group_id, {})
        if group is not None:
            epochs.update((m.member_id, m.member_epoch) for m in group.members.values())
        for kind, rows in (("revoked", before.held - new.held), ("assigned", new.held - before.held)):
            for member_id, topic_id, partition in sorted(rows, key=lambda r: (r[0], str(r[1]), r[2])):
                self._emit(
                    now,
                    kind,
                    member=clients.get(member_id, ""),
                    member_id=member_id,
                    generation=epochs.get(member_id, -1),
                    topic=names.get(topic_id, str(topic_id)),
                    partition=partition,
                    detail=where,
                )
        for member_id in sorted(old_members.keys() - new_members.keys()):
            epochs.pop(member_id, None)
            self._member_state(now, group_id, member_id, old_members[member_id], new.group_epoch, "Left")
        if group is None:
            self._member_epochs.pop(group_id, None)
        epochs_changed = (before.group_epoch, before.assignment_epoch) != (new.group_epoch, new.assignment_epoch)
        if old is not None and before.state == new.state and not epochs_changed:
            return
        log.info(
            "group=%s type=consumer state=%s group_epoch=%d assignment_epoch=%d assignor=%s members=%d",
            group_id,
            new.state,
            new.group_epoch,
            new.assignment_epoch,
            new.assignor,
            len(new_members),
        )
        assignor = server_side_name(new.assignor) or new.assignor
        detail = f"{where} type=consumer protocol={assignor} assignment_epoch={new.assignment_epoch}"
        self._emit(now, "group_state", state=new.state, generation=new.group_epoch, detail=detail)
        if group is None or (old is not None and before.assignment_epoch == new.assignment_epoch):
            return
        for member_id in sorted(group.members):
            target = group.target_of(member_id)
            for topic_id in sorted(target, key=lambda t: names.get(t, str(t))):
                for partition in sorted(target[topic_id]):
                    self._emit(
                        now,
                        "group_assignment",
                        member=group.members[member_id].client_id,
                        member_id=member_id,
                        generation=new.assignment_epoch,
                        topic=names.get(topic_id, str(topic_id)),
                        partition=partition,
                        detail=where,
                    )

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

    def _assignment_rows(self, group: ClassicGroup, now: int) -> None:
        if group.protocol_type != "consumer":
            return
        for member_id, member in sorted(group.members.items()):
            for topic, partition in sorted(assigned_partitions(member.assignment) or ()):
                self._emit(
                    now,
                    "group_assignment",
                    member=member.client_id,
                    member_id=member_id,
                    generation=group.generation,
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
