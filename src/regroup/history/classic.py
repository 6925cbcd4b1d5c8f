"""A classic group's rebalances and ownership, from its ``group_state``, ``member_state`` and
``group_assignment`` rows. A rebalance starts when the group enters PreparingRebalance and ends when it
reaches Stable (when the new generation's assignment is stored), Empty or Dead. Ownership follows the stored
assignments: with eager rebalancing (``rebalance=eager``, or the style unknown) every member gives up its
partitions at the rebalance's start and takes its new ones at its end; with cooperative rebalancing a partition
that stays with its member is held throughout, and one whose owner changes is given up at the start and taken
at the end. A generation's assignment rows follow its Stable row: they are taken together when the next row of
the group (or a read) comes."""

from __future__ import annotations

from regroup.history.group import GroupTimeline
from regroup.history.ownership import Key
from regroup.history.rows import GROUP_ASSIGNMENT, GROUP_STATE, Row


class ClassicTimeline(GroupTimeline):
    number_key = "generation"

    def __init__(self, max_rebalances: int, max_intervals: int) -> None:
        super().__init__(max_rebalances, max_intervals)
        self.cooperative = False  # the style of the open rebalance
        #: the assignment being collected: (generation, time of its Stable row, partition -> member)
        self.pending: tuple[int, int, dict[Key, str]] | None = None

    def fold(self, row: Row) -> None:
        if row.type == GROUP_ASSIGNMENT:
            assert row.member_id is not None and row.topic is not None and row.partition is not None
            if self.pending is None or self.pending[0] != row.generation:
                self.settle()
                # (rows of a generation whose Stable row was not seen: taken as of their own time)
                self.pending = (row.generation or 0, row.t, {})
            assignment = self.pending[2]
            if len(assignment) < self.ownership.cap:
                assignment[(row.topic, row.partition)] = row.member_id
            return
        if row.type != GROUP_STATE:
            return  # (assigned / revoked rows are not a classic group's)
        self.settle()
        state, generation = row.state, row.generation or 0
        if state == "PreparingRebalance":
            if self.current is None:
                self.cooperative = row.fields.get("rebalance") == "cooperative"
                self.start(row.t, generation, row.fields.get("cause"))
                if not self.cooperative:
                    self.ownership.revoke_all(row.t)
        elif state == "CompletingRebalance":
            if self.current is not None:
                self.current.generation = generation
        elif state == "Stable":
            if self.current is not None:
                self.current.generation = generation
            self.pending = (generation, row.t, {})
        elif state in ("Empty", "Dead"):
            if state == "Dead":  # (deleted, or converted: its members hold on until now)
                self.ownership.revoke_all(row.t)
            if self.current is not None:
                self.current.generation = generation
                self._apply({}, row.t)
            self.ownership.revoke_all(row.t)

    def settle(self) -> None:
        if self.pending is not None:
            _, t, assignment = self.pending
            self.pending = None
            self._apply(assignment, t)

    def _apply(self, assignment: dict[Key, str], t: int) -> None:
        """A generation's assignment, stored at ``t``: the end of the open rebalance, or (none open) a change of
        owners at ``t``."""
        rebalance = self.current
        given_up = t if rebalance is None else rebalance.start_ms
        for key, holders in self.ownership.owners().items():
            owner = assignment.get(key)
            for member_id in holders:
                if member_id != owner:
                    self.ownership.revoke(member_id, key, given_up)
        for key, member_id in assignment.items():
            self.took(member_id, key, t)
        self.finish(t)
