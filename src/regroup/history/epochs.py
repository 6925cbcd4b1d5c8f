"""A consumer (KIP-848) or share group's rebalances and ownership, from its ``group_state``, ``member_state``,
``assigned`` and ``revoked`` rows (its ``group_assignment`` rows, the targets, are not needed: what moved is
what the members were handed and gave up). A rebalance starts when the group epoch rises and ends when the
group is Stable at an assignment epoch at least that high (every member reconciled to that target), or Empty or
Dead; a rise of the epoch before then ends the open rebalance and starts the next. Ownership is exactly the
``assigned`` / ``revoked`` rows, per member and partition.

The server writes a call's ``assigned`` / ``revoked`` rows before the ``group_state`` row that says the epoch
rose, all at the same ``t``: a partition taken at the very time a rebalance starts, before its row, counts in
that rebalance."""

from __future__ import annotations

from regroup.history.group import GroupTimeline
from regroup.history.ownership import Key, Orphan
from regroup.history.rows import ASSIGNED, GROUP_STATE, REVOKED, Row


class EpochTimeline(GroupTimeline):
    number_key = "epoch"
    folds_assignments = False  # (see the module's doc)

    def __init__(self, max_rebalances: int, max_intervals: int) -> None:
        super().__init__(max_rebalances, max_intervals)
        self.epoch: int | None = None  # the group epoch of the last group_state row
        #: partitions taken at ``held_back[0]`` outside a rebalance: they count in one starting at that time
        self.held_back: tuple[int, list[tuple[Key, str, Orphan]]] = (0, [])

    def fold(self, row: Row) -> None:
        if row.type == ASSIGNED or row.type == REVOKED:
            assert row.member_id is not None and row.topic is not None and row.partition is not None
            key = (row.topic, row.partition)
            if row.type == ASSIGNED:
                self.took(row.member_id, key, row.t)
            else:
                self.ownership.revoke(row.member_id, key, row.t)
            return
        if row.type != GROUP_STATE:
            return
        state, epoch, t = row.state, row.generation or 0, row.t
        cause = row.fields.get("cause")
        rises = epoch > self.epoch if self.epoch is not None else cause is not None
        if rises and state != "Dead":
            self.finish(t)  # (a rebalance still open is overtaken by the new epoch)
            rebalance = self.start(t, epoch, cause)
            at, taken = self.held_back
            if at == t:
                for key, member_id, orphan in taken:
                    rebalance.took(key, member_id, orphan, t)
        self.held_back = (0, [])
        self.epoch = None if state == "Dead" else epoch
        current = self.current
        if current is not None:
            try:
                reached = int(row.fields.get("assignment_epoch", ""))
            except ValueError:
                reached = -1
            if state in ("Empty", "Dead") or (state == "Stable" and reached >= current.generation):
                self.finish(t)
        if state == "Dead":
            self.ownership.revoke_all(t)

    def ended_orphan(self, member_id: str, key: Key, orphan: Orphan, t: int) -> None:
        if self.current is not None:
            self.current.took(key, member_id, orphan, t)
            return
        at, taken = self.held_back
        if at != t:
            taken = []
            self.held_back = (t, taken)
        if len(taken) < self.ownership.cap:
            taken.append((key, member_id, orphan))
