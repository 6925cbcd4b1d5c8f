"""The coordinator's keyed deadlines against a plain model: the earliest deadline first, ties in
scheduling order; scheduling a key again replaces it; cancelled keys never come back; the reported next deadline
is never later than the earliest one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from regroup.coordinator.timers import Timers


@dataclass(frozen=True)
class Probe:
    """A timer that only has a key (firing is the facade's business, not the timers')."""

    key: Any

    def fire(self, ctx: Any, groups: Any) -> None:
        raise AssertionError("not fired here")


def _key(timer: Probe | None) -> Any:
    return None if timer is None else timer.key


KEYS = st.sampled_from(["a", "b", "c", ("session", "g", "m1"), ("join", "g")])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("schedule"), KEYS, st.integers(-10, 2**45)),
        st.tuples(st.just("cancel"), KEYS, st.just(0)),
        st.tuples(st.just("pop"), st.just(""), st.integers(-10, 2**45)),
    ),
    max_size=80,
)


@given(OPS)
def test_timers_match_a_plain_model(ops: list[tuple[str, object, int]]) -> None:
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
            due = sorted((entry, k) for k, entry in model.items() if entry[0] <= value)
            got = _key(timers.pop_due(value))
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
