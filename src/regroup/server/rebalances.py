"""Rebalance events for the log and the metrics, always on: an observer (``CoordinatorRuntime.add_observer``)
that notices every classic group's state or generation change, logs it at info as one key=value line
(``group=<id> state=<state> generation=<n> protocol=<name> leader=<member id> members=<n>``) and counts
rebalances started (a group entering PreparingRebalance) and completed (a group reaching Stable from
another state).

Cheap enough for every core call: it compares one small tuple per group (state, generation, protocol,
leader, member count) and never looks at member sets, so its cost does not grow with group sizes. The
detailed per-member history (joins, leaves, assignments) is ``--events FILE``'s job (``server/events.py``),
which also logs group changes; with an events file this observer counts but leaves the logging to it.
"""

from __future__ import annotations

import logging

from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupState
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result

log = logging.getLogger("regroup.server.rebalances")

_Mark = tuple[ClassicGroupState, int, str | None, str | None, int]


def _mark(group: ClassicGroup) -> _Mark:
    return (group.state, group.generation, group.protocol_name, group.leader_id, len(group.members))


class RebalanceLog:
    def __init__(self, *, log_changes: bool = True) -> None:
        self.log_changes = log_changes
        self.rebalances_started = 0
        self.rebalances_completed = 0
        self._marks: dict[str, _Mark] = {}
        self._primed = False

    def __call__(self, coordinator: GroupCoordinator, result: Result, now_ms: int) -> None:
        marks = self._marks
        groups = coordinator.groups
        for group_id, group in groups.items():
            mark = _mark(group)
            old = marks.get(group_id)
            if old == mark:
                continue
            marks[group_id] = mark
            if old is None and not self._primed:
                continue  # groups loaded from the log: not an event
            self._changed(group_id, old, mark)
        if len(marks) > len(groups):
            for group_id in [g for g in marks if g not in groups]:
                del marks[group_id]
                if self.log_changes:
                    log.info("group=%s state=Dead", group_id)
        self._primed = True

    def _changed(self, group_id: str, old: _Mark | None, new: _Mark) -> None:
        state, generation, protocol, leader, members = new
        if old is not None and old[0] is not state:
            if state is ClassicGroupState.PREPARING_REBALANCE:
                self.rebalances_started += 1
            elif state is ClassicGroupState.STABLE:
                self.rebalances_completed += 1
        if self.log_changes and (old is None or (old[0], old[1]) != (state, generation)):
            log.info(
                "group=%s state=%s generation=%d protocol=%s leader=%s members=%d",
                group_id,
                state.value,
                generation,
                protocol,
                leader,
                members,
            )
