"""The coordinator's keyed deadlines against a plain model: the earliest deadline first, ties in
scheduling order; scheduling a key again replaces it; cancelled keys never come back; the reported next deadline
is never later than the earliest one; asked for the timers that are not paced, the earliest of those, the paced
ones left in place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from regroup.coordinator import timers as timers_module
from regroup.coordinator.timers import Timers


@dataclass(frozen=True)
class Probe:
    """A timer that only has a key (firing is the facade's business, not the timers')."""

    key: Any

    @property
    def paced(self) -> bool:
        return self.key in PACED

    def fire(self, ctx: Any, groups: Any) -> None:
        raise AssertionError("not fired here")


#: the keys whose timers are paced (``timers.is_paced``)
PACED = frozenset({"c", ("join", "g")})


def _key(timer: Probe | None) -> Any:
    return None if timer is None else timer.key


KEYS = st.sampled_from(["a", "b", "c", ("session", "g", "m1"), ("join", "g")])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), KEYS, st.integers(-10, 2**45)),
        st.tuples(st.just("cancel"), KEYS, st.just(0)),
        st.tuples(st.just("pop"), st.just(""), st.integers(-10, 2**45)),
        st.tuples(st.just("pop-unpaced"), st.just(""), st.integers(-10, 2**45)),
    ),
    max_size=80,
)


@given(OPS)
def test_timers_match_a_plain_model(ops: list[tuple[str, object, int]]) -> None:
    _check_against_model(ops)


@given(OPS)
def test_timers_compacting_their_heap_at_once_match_the_plain_model(ops: list[tuple[str, object, int]]) -> None:
    """The same with the heap rebuilt without its disowned entries as soon as there are two of them and they are
    most of it (``COMPACT_AT``: a thousand in the server)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(timers_module, "COMPACT_AT", 1)
        _check_against_model(ops)


def test_a_mass_cancellation_is_taken_out_of_the_heap_at_once() -> None:
    """10,000 sessions cancelled together (a group leaving at once), behind 10 still scheduled: the next read of
    the deadline rebuilds the heap of the 10 left, not leaving 10,000 disowned entries to pop one by one; those
    10 still come due in order."""
    timers = Timers()
    for i in range(10_010):
        timers.schedule(Probe(("session", i)), 1_000 + i)
    for i in range(10, 10_010):
        timers.cancel(("session", i))
    assert timers.next_deadline() == 1_000
    assert len(timers._heap) == 10  # (no disowned entry left)
    assert [_key(timers.pop_due(2**40)) for _ in range(11)] == [("session", i) for i in range(10)] + [None]


def _check_against_model(ops: list[tuple[str, object, int]]) -> None:
    timers = Timers()
    model: dict[object, tuple[int, int]] = {}
    for n, (op, key, value) in enumerate(ops):
        if op == "schedule":
            timers.schedule(Probe(key), value)
            model[key] = (value, n)
        elif op == "cancel":
            timers.cancel(key)  # type: ignore[arg-type]
            model.pop(key, None)
        else:
            paced = op == "pop"
            due = sorted((entry, k) for k, entry in model.items() if entry[0] <= value and (paced or k not in PACED))
            got = _key(timers.pop_due(value, paced=paced))
            if due:
                assert got == due[0][1]
                del model[got]
            else:
                assert got is None
        next_deadline = timers.next_deadline()
        if model:  # never later than the earliest deadline (earlier only when that key's deadline moved)
            assert next_deadline is not None and next_deadline <= min(d for d, _ in model.values())
        else:
            assert next_deadline is None
        for k in ("a", "b", "c"):
            assert timers.deadline(k) == (model[k][0] if k in model else None)
            assert (k in timers) == (k in model)
    # Draining at the reported deadlines: each key comes out at its deadline, in order, and an outdated
    # report costs at most one empty call per key.
    empty_calls = 0
    while model:
        at = timers.next_deadline()
        assert at is not None
        got = _key(timers.pop_due(at))  # type: ignore[arg-type]
        if got is None:
            empty_calls += 1
            assert empty_calls <= len(ops)
            continue
        expected = min((entry, k) for k, entry in model.items())
        assert (at, got) == (expected[0][0], expected[1])
        del model[got]
    assert timers.next_deadline() is None


BATCH = st.lists(st.tuples(KEYS, st.integers(0, 50)), max_size=12)


def _drained(timers: Timers, until: int = 2**46) -> list[tuple[Any, int | None]]:
    """Every timer in the order it comes due, with its deadline."""
    order = []
    while True:
        deadlines = timers.scheduled()
        timer = timers.pop_due(until)
        if timer is None:
            return order
        order.append((timer.key, deadlines[timer.key][0]))


@given(BATCH, BATCH)
def test_scheduling_a_batch_is_scheduling_each_and_its_undo_restores_everything(
    first: list[tuple[Any, int]], batch: list[tuple[Any, int]]
) -> None:
    """``schedule_all`` is ``schedule`` of each pair in order (deadlines, ties in scheduling order, a key twice);
    under an active journal its one undo entry puts every key back as it was, scheduled or not."""
    from regroup.coordinator.journal import Journal

    one_by_one, at_once, undone = Timers(), Timers(), Timers()
    for timers in (one_by_one, at_once, undone):
        for key, deadline in first:
            timers.schedule(Probe(key), deadline)
    before = _drained(_copy(undone, first))
    for key, deadline in batch:
        one_by_one.schedule(Probe(key), deadline)
    at_once.schedule_all((Probe(key), deadline) for key, deadline in batch)
    assert _drained(at_once) == _drained(one_by_one)
    journal = Journal()
    undone.journal = journal
    journal.begin()
    undone.schedule_all((Probe(key), deadline) for key, deadline in batch)
    assert len(journal.entries) == 1  # (one entry, however many timers)
    journal.rollback()
    assert _drained(undone) == before


def _copy(timers: Timers, scheduled: list[tuple[Any, int]]) -> Timers:
    copy = Timers()
    for key, deadline in scheduled:
        copy.schedule(Probe(key), deadline)
    return copy
