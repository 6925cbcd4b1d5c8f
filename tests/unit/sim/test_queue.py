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
    assert len(queue) == 0 and queue.next_at() is None


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 6)), max_size=200))
def test_pushes_between_pops_keep_the_order(steps: list[tuple[bool, int]]) -> None:
    """Pops interleaved with pushes, some at the time being popped or before it: every pop gives the
    earliest item, first pushed first among equal times."""
    queue = EventQueue()
    pending: list[tuple[int, int]] = []  # (time, insertion number)
    for number, (is_pop, value) in enumerate(steps):
        if is_pop and pending:
            expected = min(pending)
            pending.remove(expected)
            at, item = queue.pop()
            assert (at, item) == (expected[0], Wake(str(expected[1])))
        else:
            queue.push(value, Wake(str(number)))
            pending.append((value, number))
        assert len(queue) == len(pending)
        assert queue.next_at() == (min(pending)[0] if pending else None)
