"""Rebalance events: the runtime calls ``GroupEvents`` after every core call; it compares each group with what
it saw last and logs the changes (state, generation, members joining and leaving) at info, and, with
``--events FILE``, appends them as JSON lines in the simulator's event schema (docs/simulator.md):

* ``group_state`` — ``state``, ``generation``, ``detail`` = ``group=<id> protocol=<name> leader=<member id>``;
* ``member_state`` — ``member`` (the client id), ``member_id``, ``generation``, ``state`` = ``Joined`` or
  ``Left``, ``detail`` = ``group=<id>``;
* ``group_assignment`` — one row per partition of each member's assignment when a generation becomes Stable
  (consumer-protocol groups; other protocols' assignments are opaque and produce no rows).

The server hosts many groups while a simulation has one, hence the group id in ``detail``; ``t`` is wall-clock
milliseconds. Every line has all keys of the schema, in its order.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from regroup.client.embedded import assigned_partitions
from regroup.coordinator.classic.group import ClassicGroup, GroupState
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.sim.eventlog import FIELDS

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


class GroupEvents:
    """An observer for ``CoordinatorRuntime.add_observer``; ``close()`` closes the events file."""

    def __init__(self, path: Path | None = None) -> None:
        self._views: dict[str, _View] = {}
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

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    # ------------------------------------------------------------------------------------------ internals
    def _changed(self, group_id: str, old: _View | None, new: _View, group: ClassicGroup | None, now: int) -> None:
        old_members = dict(old.members) if old else {}
        new_members = dict(new.members)
        for member_id in sorted(new_members.keys() - old_members.keys()):
            log.info("group=%s member joined member_id=%s client_id=%s", group_id, member_id, new_members[member_id])
            self._emit(
                now,
                "member_state",
                member=new_members[member_id],
                member_id=member_id,
                generation=new.generation,
                state="Joined",
                detail=f"group={group_id}",
            )
        for member_id in sorted(old_members.keys() - new_members.keys()):
            log.info("group=%s member left member_id=%s client_id=%s", group_id, member_id, old_members[member_id])
            self._emit(
                now,
                "member_state",
                member=old_members[member_id],
                member_id=member_id,
                generation=new.generation,
                state="Left",
                detail=f"group={group_id}",
            )
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
        detail = f"group={group_id} protocol={new.protocol} leader={new.leader}"
        self._emit(now, "group_state", state=new.state, generation=new.generation, detail=detail)
        if group is not None and group.state is GroupState.STABLE:
            self._assignment_rows(group, now)

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
