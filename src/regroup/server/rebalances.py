"""Rebalance events for the log and the metrics, always on: an observer (``CoordinatorRuntime.add_observer``)
that reads the core's events (``coordinator/events.py``) for every classic group's transitions, logs each at
info as one key=value line (``group=<id> state=<state> generation=<n> protocol=<name> leader=<member id>
members=<n>``; ``group=<id> state=Dead`` once the group is deleted or converted) and counts rebalances
started (a group entering PreparingRebalance) and completed (a group reaching Stable from another state; a
group converted from a consumer group is created Stable, which completes no rebalance).

A call that changed nothing (a heartbeat) has no events: it costs one test here, whatever the number and
size of the groups. The detailed per-member history (joins, leaves, assignments) is ``--events FILE``'s job
(``server/events.py``), which also logs group changes; with an events file this observer counts but leaves
the logging to it.
"""

from __future__ import annotations

import logging

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import GroupCreated, GroupStateChanged
from regroup.coordinator.result import Result

log = logging.getLogger("regroup.server.rebalances")


class RebalanceLog:
    def __init__(self, *, log_changes: bool = True) -> None:
        self.log_changes = log_changes
        self.rebalances_started = 0
        self.rebalances_completed = 0

    def __call__(self, coordinator: GroupCoordinator, result: Result, now_ms: int) -> None:
        if not result.events:
            return
        created: set[str] = set()  # classic groups created in this call: their first state is no transition
        for event in result.events:
            if isinstance(event, GroupCreated):
                if event.group_type == "classic":
                    created.add(event.group_id)
            elif isinstance(event, GroupStateChanged) and event.group_type == "classic":
                if event.group_id in created:
                    created.discard(event.group_id)
                elif event.state == "PreparingRebalance":
                    self.rebalances_started += 1
                elif event.state == "Stable":
                    self.rebalances_completed += 1
                if self.log_changes:
                    self._log(event)
            elif isinstance(event, GroupStateChanged) and event.group_type == "share" and self.log_changes:
                log.info(
                    "group=%s type=share state=%s group_epoch=%d assignment_epoch=%d members=%d",
                    event.group_id,
                    event.state,
                    event.generation,
                    event.assignment_epoch or 0,
                    event.members,
                )

    def _log(self, event: GroupStateChanged) -> None:
        if event.state == "Dead":
            log.info("group=%s state=Dead", event.group_id)
            return
        log.info(
            "group=%s state=%s generation=%d protocol=%s leader=%s members=%d",
            event.group_id,
            event.state,
            event.generation,
            event.protocol,
            event.leader,
            event.members,
        )
