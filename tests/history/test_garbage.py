"""Whatever rows come, ``observe`` never raises, and what it builds keeps its shape: every interval ends no
earlier than it starts, every rebalance likewise, the counts are not negative."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.history import Timelines
from tests.history.strategies import any_rows, ordered_rows, server_rows


def check_shape(timelines: Timelines) -> None:
    for group_id in timelines.group_ids():
        result = timelines.timeline(group_id)
        assert result is not None
        json.dumps(result)
        for r in result["rebalances"]:
            assert r["end_ms"] is None or r["end_ms"] >= r["start_ms"]
            assert r["moved"] >= 0 and r["unowned_partition_ms"] >= 0
        for i in result["ownership"]:
            assert i["to_ms"] is None or i["to_ms"] >= i["from_ms"]


@settings(max_examples=300)
@given(st.lists(any_rows, max_size=30))
def test_any_dict_is_ignored_or_read(rows: list[dict[str, Any]]) -> None:
    timelines = Timelines(1_000, max_rebalances_per_group=5, max_intervals_per_group=5)
    timelines.observe_many(rows)
    timelines.prune(10_000)
    check_shape(timelines)


@settings(max_examples=300)
@given(st.lists(server_rows(), max_size=80))
def test_server_like_rows_in_any_order_keep_the_shape(rows: list[dict[str, Any]]) -> None:
    timelines = Timelines(100, max_rebalances_per_group=4, max_intervals_per_group=6, max_groups=1)
    timelines.observe_many(rows)
    check_shape(timelines)
    timelines.prune(150)
    check_shape(timelines)


@settings(max_examples=200)
@given(ordered_rows())
def test_intervals_of_one_partition_never_overlap_in_time_ordered_rows(rows: list[dict[str, Any]]) -> None:
    """With one member at most holding a partition (no share group rows), one partition's intervals follow each
    other."""
    timelines = Timelines(10_000)
    timelines.observe_many(r for r in rows if "type=share" not in (r["detail"] or ""))
    for group_id in timelines.group_ids():
        result = timelines.timeline(group_id)
        assert result is not None
        by_partition: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for i in result["ownership"]:
            by_partition.setdefault((i["topic"], i["partition"]), []).append(i)
        for intervals in by_partition.values():
            for before, after in itertools.pairwise(intervals):
                assert before["to_ms"] is not None or before["member_id"] != after["member_id"]


def test_rows_that_are_not_mappings_are_ignored() -> None:
    timelines = Timelines(1_000)
    for row in (None, 3, "group_state", ["t"], {"type": ["x"]}, {"type": "group_state", "t": True}):
        timelines.observe(row)  # type: ignore[arg-type]
    assert timelines.group_ids() == []
