"""What the timeline keeps of one group, whatever its type: its rebalances (the open one last), its partitions'
ownership, the member whose joining or leaving may start the next rebalance, and the time of its latest row.
The classic and the epoch-based folds (``classic.py``, ``epochs.py``) say when a rebalance starts and ends."""

from __future__ import annotations

from collections import deque
from typing import Any

from regroup.history.ownership import Key, Orphan, Ownership
from regroup.history.rebalance import Rebalance
from regroup.history.rows import GROUP_STATE, MEMBER_STATE, Row

#: ``cause=`` values that name no member (the ones that do: ``join`` and the leave reasons)
_NO_MEMBER = frozenset(("metadata", "subscription", "rack", "assignor", "unknown"))


class GroupTimeline:
    number_key = "generation"
    #: whether ``fold`` takes anything from ``group_assignment`` rows (else they only move ``latest_ms``)
    folds_assignments = True

    def __init__(self, max_rebalances: int, max_intervals: int) -> None:
        self.max_rebalances = max_rebalances
        self.rebalances: deque[Rebalance] = deque()
        self.current: Rebalance | None = None
        self.ownership = Ownership(max_intervals)
        self.latest_ms = 0
        self.dead = False  # its last group_state row said Dead
        self.converting = False  # the next group_state row is the first of a group converted to this type
        #: (member id, ``join`` or the leave reason) of the first member_state row since the last group_state row
        self.trigger: tuple[str, str] | None = None
        #: members that left as their group converted and have not joined its other type yet
        self.converted: set[str] = set()

    def observe(self, row: Row) -> None:
        self.latest_ms = max(self.latest_ms, row.t)
        if row.type == MEMBER_STATE:
            self._member_row(row)
        else:
            self.fold(row)
            if row.type == GROUP_STATE:
                # (a group converted to the other type: the trigger carries over its Dead row and the first row of
                # its new type)
                if row.state != "Dead" and not self.converting:
                    self.trigger = None
                self.converting = False
                self.dead = row.state == "Dead"

    def _member_row(self, row: Row) -> None:
        """The first member joining or leaving since the last group_state row triggers the next rebalance; a
        group converted to the other type has its members leave and join again (``reason=converted``): those
        rows trigger nothing."""
        member_id = row.member_id
        if member_id is None:
            return
        if row.state == "Joined":
            if member_id in self.converted:
                self.converted.discard(member_id)
                return
            why = "join"
        else:
            why = row.fields.get("reason") or "leave"
            if why == "converted":
                if len(self.converted) < self.ownership.cap:
                    self.converted.add(member_id)
                return
        if self.trigger is None:
            self.trigger = (member_id, why)

    def fold(self, row: Row) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------------------------ rebalances
    def start(self, t: int, generation: int, cause: str | None) -> Rebalance:
        """A rebalance starts at ``t``: its reason is ``cause`` if the row gave one, else what the member whose
        row came just before did, else ``unknown``."""
        member: str | None = None
        reason = cause or "unknown"
        if self.trigger is not None and (cause is None or cause not in _NO_MEMBER):
            member = self.trigger[0]
            reason = cause or self.trigger[1]
        rebalance = Rebalance(t, generation, reason, member, self.number_key)
        self.current = rebalance
        self.rebalances.append(rebalance)
        while len(self.rebalances) > self.max_rebalances:
            dropped = self.rebalances.popleft()
            if dropped is self.current:  # (a cap of 0 keeps none)
                self.current = None
        return rebalance

    def finish(self, t: int) -> None:
        if self.current is not None:
            self.current.finish(t, self.ownership)
            self.current = None

    def took(self, member_id: str, key: Key, t: int) -> None:
        """``member_id`` holds ``key`` from ``t`` on, within the open rebalance if there is one."""
        orphan = self.ownership.assign(member_id, key, t)
        if orphan is not None:
            self.ended_orphan(member_id, key, orphan, t)

    def ended_orphan(self, member_id: str, key: Key, orphan: Orphan, t: int) -> None:
        if self.current is not None:
            self.current.took(key, member_id, orphan, t)

    # --------------------------------------------------------------------------------------- reading
    def settle(self) -> None:
        """Anything the fold holds back until a later row (a classic generation's assignment rows)."""

    def prune(self, cutoff: int) -> None:
        self.settle()
        while self.rebalances and self.rebalances[0].end_ms is not None and self.rebalances[0].end_ms < cutoff:
            self.rebalances.popleft()
        self.ownership.prune(cutoff)

    def empty(self) -> bool:
        return not self.rebalances and not len(self.ownership) and self.current is None

    def timeline(self, since: int | None, until: int | None) -> dict[str, Any]:
        self.settle()
        rebalances = [
            r.to_json(self.latest_ms, self.ownership)
            for r in self.rebalances
            if (until is None or r.start_ms <= until) and (since is None or r.end_ms is None or r.end_ms >= since)
        ]
        ownership = [i.to_json() for i in self.ownership.intervals(since, until)]
        return {"rebalances": rebalances, "ownership": ownership}
