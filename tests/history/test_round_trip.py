"""The timeline rebuilt from the durable rows (``storage/history_log.py``) after a restart is the timeline the
live rows built."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.history import Timelines
from regroup.storage.history_log import HistoryLog
from tests.history.strategies import ordered_rows


def all_timelines(timelines: Timelines) -> dict[str, Any]:
    return {group_id: timelines.timeline(group_id) for group_id in timelines.group_ids()}


@settings(max_examples=100, deadline=None)
@given(ordered_rows(), st.integers(1, 400), st.lists(st.integers(1, 10), min_size=1, max_size=10))
def test_rebuilding_from_the_log_gives_the_same_timelines(
    rows: list[dict[str, Any]], segment_bytes: int, chunks: list[int]
) -> None:
    live = Timelines(10**6)
    with tempfile.TemporaryDirectory() as directory:
        log = HistoryLog(Path(directory), 10**6, segment_bytes=segment_bytes)
        log.append([], 0)
        i = 0
        while i < len(rows):  # (appended in batches, as a sink's buffer would be flushed)
            batch = rows[i : i + chunks[i % len(chunks)]]
            live.observe_many(batch)
            log.append(batch, batch[-1]["t"])
            i += len(batch)
        log.close()
        rebuilt = Timelines(10**6)
        reopened = HistoryLog(Path(directory), 10**6)
        rebuilt.observe_many(reopened.load(1_000))
        assert reopened.skipped_lines == 0
    assert all_timelines(rebuilt) == all_timelines(live)
