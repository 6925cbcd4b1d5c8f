"""The coordinator's keyed deadlines against a plain model: the earliest deadline first, ties in
scheduling order; scheduling a key again replaces it; cancelled keys never come back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from regroup.coordinator.timers import Timers

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
            timers.schedule(key, value)  # type: ignore[arg-type]
            model[key] = (value, n)
        elif op == "cancel":
            timers.cancel(key)  # type: ignore[arg-type]
            model.pop(key, None)
        else:
            due = sorted((entry, k) for k, entry in model.items() if entry[0] <= value)
            got = timers.pop_due(value)
            if due:
                assert got == due[0][1]
                del model[got]
            else:
                assert got is None
        assert timers.next_deadline() == (min(d for d, _ in model.values()) if model else None)
        for k in ("a", "b", "c"):
            assert timers.deadline(k) == (model[k][0] if k in model else None)
            assert (k in timers) == (k in model)
