"""The simulator's event queue: items come out by virtual time, ties in insertion order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.sim.queue import EventQueue, Wake


@given(st.lists(st.integers(-5, 10**12), max_size=200))
def test_items_come_out_by_time_then_insertion_order(times: list[int]) -> None:
    queue = EventQueue()
    for index, at in enumerate(times):
        queue.push(at, Wake(str(index)))
    expected = sorted(range(len(times)), key=lambda i: (times[i], i))
    out: list[tuple[int, str]] = []
    while (at := queue.next_at()) is not None:
        popped_at, item = queue.pop()
        assert popped_at == at and isinstance(item, Wake)
        out.append((popped_at, item.member))
    assert out == [(times[i], str(i)) for i in expected]
    assert not queue.items
