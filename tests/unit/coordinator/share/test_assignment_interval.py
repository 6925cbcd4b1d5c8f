"""KIP-1263's assignment batching for share groups (``group.share.assignment.interval.ms``, a group's own
``share.assignment.interval.ms``): the next target waits for the interval after the last; a member joining
meanwhile gets the last target's epoch and nothing, and a timer computes the target when the interval ends.
With no interval (the default) every epoch bump computes at once; the target's time is kept in its record only
while there is an interval, so a reloaded coordinator keeps it running."""

from __future__ import annotations

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.share.group import ShareGroup
from regroup.records.share import ShareGroupTargetAssignmentMetadataValue
from tests.unit.coordinator.share.test_membership import T, beat, coordinator


def _group(c: GroupCoordinator) -> ShareGroup:
    group = c.groups.typed("g", ShareGroup)
    assert group is not None
    return group


def _times(records: list[object]) -> list[tuple[int, int]]:
    return [
        (r.value.assignment_epoch, r.value.assignment_timestamp_ms)  # type: ignore[attr-defined]
        for r in records
        if isinstance(getattr(r, "value", None), ShareGroupTargetAssignmentMetadataValue)
    ]


def test_a_member_joining_within_the_interval_waits_for_the_timer() -> None:
    c = coordinator(share_group_assignment_interval_ms=1_000)
    first, records = beat(c, "m1", now=10_000)
    assert (first.member_epoch, first.assignment, _times(records)) == (1, ((T, (0, 1, 2)),), [(1, 10_000)])
    second, records = beat(c, "m2", now=10_200)
    assert (second.member_epoch, second.assignment, _times(records)) == (1, (), [])
    assert (_group(c).group_epoch, _group(c).assignment_epoch) == (2, 1)
    assert _times(list(c.advance(10_999).records)) == []
    assert _times(list(c.advance(11_000).records)) == [(2, 11_000)]
    again, _ = beat(c, "m2", epoch=1, topics=None, now=11_010)
    assert again.member_epoch == 2 and again.assignment and sum(len(ps) for _, ps in again.assignment) >= 1


def test_without_an_interval_every_bump_computes_at_once_and_keeps_no_time() -> None:
    c = coordinator()
    beat(c, "m1", now=10_000)
    second, records = beat(c, "m2", now=10_001)
    assert second.member_epoch == 2 and _times(records) == [(2, 0)]


def test_a_group_s_own_interval_and_a_reload() -> None:
    c = coordinator()
    c.group_configs["g"] = GroupConfig(share_assignment_interval_ms=500)
    _, records = beat(c, "m1", now=10_000)
    assert _times(records) == [(1, 10_000)]
    every = list(records)
    reloaded = GroupCoordinator.from_records(every, 10_100, CoordinatorConfig(), group_configs=dict(c.group_configs))
    assert _group(reloaded).assignment_timestamp_ms == 10_000
    reloaded.update_metadata(c.image, 10_100)
    second, _ = beat(reloaded, "m2", now=10_100)
    assert second.member_epoch == 1  # (still within the interval after the reload)
    assert _times(list(reloaded.advance(10_500).records)) == [(2, 10_500)]
