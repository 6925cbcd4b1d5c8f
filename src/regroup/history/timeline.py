"""Every group's rebalance timeline (``Timelines``): rows in, one fold per group by its type (``classic.py``,
``epochs.py``), the window and the caps that keep it bounded, and the JSON each group's timeline is read as
(docs/operations.md, "Rebalance timeline")."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from regroup.history.classic import ClassicTimeline
from regroup.history.epochs import EpochTimeline
from regroup.history.group import GroupTimeline
from regroup.history.rows import GROUP_ASSIGNMENT, GROUP_STATE, Row, parse


class Timelines:
    """The rebalances and partition ownership of every group the rows name, for ``window_ms``.

    ``observe`` takes every row the server writes (any other dict is ignored: it never raises);
    ``prune(now_ms)`` forgets what ended before the window; ``timeline(group_id, since_ms, until_ms)`` is a
    group's JSON. At most ``max_rebalances_per_group`` rebalances and ``max_intervals_per_group`` ownership
    intervals per group (open and closed together) and ``max_groups`` groups are kept, the oldest dropped first
    (the group whose latest row is oldest)."""

    def __init__(
        self,
        window_ms: int,
        *,
        max_rebalances_per_group: int = 10_000,
        max_intervals_per_group: int = 200_000,
        max_groups: int = 100_000,
    ) -> None:
        self.window_ms = window_ms
        self.max_rebalances = max_rebalances_per_group
        self.max_intervals = max_intervals_per_group
        self.max_groups = max_groups
        #: group id -> its timeline, the least recently written first
        self._groups: OrderedDict[str, GroupTimeline] = OrderedDict()
        self._last_state_group: str | None = None  # (a classic assignment row without a group follows it)
        #: group id -> its rows held until its next group_state row says its type
        self._waiting: OrderedDict[str, list[Row]] = OrderedDict()

    def observe(self, row: Mapping[str, Any]) -> None:
        parsed = parse(row)
        if parsed is None:
            return
        group_id = parsed.group_id
        if group_id is None:
            if parsed.type != GROUP_ASSIGNMENT or self._last_state_group is None:
                return
            group_id = self._last_state_group
        group = self._groups.get(group_id)
        if parsed.type != GROUP_STATE:
            if group is None or group.dead:
                self._hold(group_id, parsed)
            else:
                self._groups.move_to_end(group_id)
                group.observe(parsed)
            return
        kind = parsed.fields.get("type")
        if group is None:
            group = self._new(kind)
            self._groups[group_id] = group
            if len(self._groups) > self.max_groups:
                self._groups.popitem(last=False)
        else:
            self._groups.move_to_end(group_id)
            if _changes_type(group, kind):
                group = self._groups[group_id] = self._converted(group, parsed.t)
        self._last_state_group = group_id
        for held in self._waiting.pop(group_id, ()):
            group.observe(held)
        group.observe(parsed)

    def observe_assignments(self, first: Mapping[str, Any], rows: Callable[[], Iterable[Mapping[str, Any]]]) -> None:
        """A run of ``group_assignment`` rows of one group, all at one time and with one ``detail`` (``first``
        is the first; ``rows()`` gives them all, ``first`` included): the same as observing each of them, in
        one step when the group's fold takes nothing from them (a consumer or share group's target)."""
        parsed = parse(first)
        if parsed is not None and parsed.type == GROUP_ASSIGNMENT and parsed.group_id is not None:
            group = self._groups.get(parsed.group_id)
            if group is not None and not group.dead and not group.folds_assignments:
                self._groups.move_to_end(parsed.group_id)
                group.latest_ms = max(group.latest_ms, parsed.t)
                return
        for row in rows():
            self.observe(row)

    def _new(self, kind: str | None) -> GroupTimeline:
        if kind in (None, "classic"):
            return ClassicTimeline(self.max_rebalances, self.max_intervals)
        return EpochTimeline(self.max_rebalances, self.max_intervals)

    def _hold(self, group_id: str, row: Row) -> None:
        """A row of a group whose type is not known yet (a new consumer group's rows come before its first
        group_state row; so do a converted group's, after its Dead row): kept until that row comes."""
        waiting = self._waiting.get(group_id)
        if waiting is None:
            waiting = self._waiting[group_id] = []
            if len(self._waiting) > self.max_groups:
                self._waiting.popitem(last=False)
        if len(waiting) < self.max_intervals:
            waiting.append(row)

    def _converted(self, group: GroupTimeline, t: int) -> GroupTimeline:
        """The group changed type (classic <-> consumer): a fold of the other type, with its past."""
        group.settle()
        group.finish(t)
        new = self._new("classic" if isinstance(group, EpochTimeline) else "consumer")
        new.rebalances, new.ownership, new.latest_ms = group.rebalances, group.ownership, group.latest_ms
        new.trigger, new.converted, new.converting = group.trigger, group.converted, True
        return new

    def observe_many(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            self.observe(row)

    def prune(self, now_ms: int) -> None:
        """Forget the rebalances that ended, and the ownership intervals that closed, before ``now_ms -
        window_ms``, and the groups with nothing left."""
        cutoff = now_ms - self.window_ms
        for group_id in list(self._groups):
            group = self._groups[group_id]
            group.prune(cutoff)
            if group.empty() and group.latest_ms < cutoff:
                del self._groups[group_id]
        for group_id in list(self._waiting):
            rows = [row for row in self._waiting[group_id] if row.t >= cutoff]
            if rows:
                self._waiting[group_id] = rows
            else:
                del self._waiting[group_id]

    def group_ids(self) -> list[str]:
        return sorted(self._groups)

    def latest_ms(self, group_id: str) -> int | None:
        """The time of the group's latest row (None: a group it does not know)."""
        group = self._groups.get(group_id)
        return None if group is None else group.latest_ms

    def timeline(
        self, group_id: str, since_ms: int | None = None, until_ms: int | None = None
    ) -> dict[str, Any] | None:
        """``{"rebalances": [...], "ownership": [...]}``: the group's rebalances and ownership intervals that
        overlap [since_ms, until_ms] (either bound may be left out), by start; None for a group it does not
        know."""
        group = self._groups.get(group_id)
        return None if group is None else group.timeline(since_ms, until_ms)


def _changes_type(group: GroupTimeline, kind: str | None) -> bool:
    """A group_state row of the other type: the group was converted (classic <-> consumer)."""
    classic = kind in (None, "classic")
    return classic != isinstance(group, ClassicTimeline)
