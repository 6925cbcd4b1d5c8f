"""``metrics.summary`` on arrays gives what the metrics' definitions give, valid assignments or not."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors import metrics
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription

TOPICS = ["t0", "t1", "t2", "ghost"]  # "ghost" is subscribed to or owned but never in the spec's topics


def reference_kip54(spec: GroupSpec, assignment: Assignment) -> bool:
    """KIP-54's balance test, pair by pair, as first written."""
    size = metrics.loads(assignment)
    if not size or max(size.values()) - min(size.values()) <= 1:
        return True
    subscribers: dict[str, list[str]] = {}
    for m, sub in spec.members.items():
        for t in sub.topics:
            subscribers.setdefault(t, []).append(m)
    for member, per_topic in assignment.items():
        for topic, partitions in per_topic.items():
            if not partitions:
                continue
            for other in subscribers.get(topic, []):
                if size[other] + 2 <= size[member]:
                    return False
    return True


def reference(
    spec: GroupSpec, assignment: Assignment, previous: Mapping[str, Mapping[str, Sequence[int]]] | None
) -> dict[str, object]:
    counts = metrics.loads(assignment)
    out: dict[str, object] = {
        "valid": metrics.is_valid(spec, assignment),
        "members": len(assignment),
        "partitions_assigned": sum(counts.values()),
        "min_partitions": min(counts.values()) if counts else 0,
        "max_partitions": max(counts.values()) if counts else 0,
        "max_min_spread": metrics.max_min_spread(assignment),
        "balance_score": metrics.balance_score(assignment),
        "kip54_balanced": reference_kip54(spec, assignment),
    }
    if previous is not None:
        plain = {m: {t: list(ps) for t, ps in pt.items()} for m, pt in previous.items()}
        out["partitions_moved"] = metrics.partitions_moved(plain, assignment)
        out["fraction_kept"] = round(metrics.fraction_kept(plain, assignment), 6)
    return out


def outcome(compute: Callable[[], dict[str, object]]) -> object:
    """The metrics, or the kind of error computing them raises (a spec member missing from the assignment
    makes KIP-54's test look up a count that is not there, by the definitions as much as on arrays)."""
    try:
        return compute()
    except KeyError:
        return KeyError


@st.composite
def cases(draw: st.DrawFn) -> tuple[GroupSpec, Assignment, dict[str, dict[str, list[int]]]]:
    counts = {t: draw(st.integers(0, 6)) for t in TOPICS[:3]}
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=4, unique=True))
    members = {m: MemberSubscription.of(draw(st.lists(st.sampled_from(TOPICS), max_size=3))) for m in names}
    spec = GroupSpec(topics=counts, members=members)
    if draw(st.booleans()):  # a single-owner assignment, maybe with a few partitions left out
        assignment: Assignment = {m: {} for m in names}
        for t, n in counts.items():
            subscribers = [m for m in names if t in members[m].topics]
            for p in range(n):
                if subscribers and draw(st.integers(0, 9)):
                    assignment[draw(st.sampled_from(subscribers))].setdefault(t, []).append(p)
    else:  # anything: unknown or missing members, repeats, partitions that do not exist
        assignment = draw(
            st.dictionaries(
                st.sampled_from(["a", "b", "c", "d", "e"]),
                st.dictionaries(st.sampled_from(TOPICS), st.lists(st.integers(-1, 7), max_size=6), max_size=3),
            )
        )
    previous = draw(
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "e"]),
            st.dictionaries(st.sampled_from(TOPICS), st.lists(st.integers(0, 7), max_size=6), max_size=3),
        )
    )
    return spec, assignment, previous


@settings(max_examples=400)
@given(cases())
def test_summary_is_the_definitions(case: tuple[GroupSpec, Assignment, dict[str, dict[str, list[int]]]]) -> None:
    spec, assignment, previous = case
    assert outcome(lambda: metrics.summary(spec, assignment, previous)) == outcome(
        lambda: reference(spec, assignment, previous)
    )
    assert outcome(lambda: metrics.summary(spec, assignment)) == outcome(lambda: reference(spec, assignment, None))


@settings(max_examples=200)
@given(cases())
def test_summary_of_ascending_tuples_as_the_cli_passes_them(
    case: tuple[GroupSpec, Assignment, dict[str, dict[str, list[int]]]],
) -> None:
    spec, assignment, previous = case
    owned = {m: {t: tuple(sorted(set(ps))) for t, ps in pt.items() if ps} for m, pt in previous.items()}
    assert outcome(lambda: metrics.summary(spec, assignment, owned)) == outcome(
        lambda: reference(spec, assignment, owned)
    )


def test_partition_numbers_that_are_not_int_take_the_definitions() -> None:
    spec = GroupSpec(topics={"t": 2}, members={"a": MemberSubscription.of(["t"])})
    for assignment in ({"a": {"t": [0, 1.5]}}, {"a": {"t": [0, 1.0]}}, {"a": {"t": [0, 2**70]}}):
        previous = {"a": {"t": [1]}}
        assert metrics.summary(spec, assignment, previous) == reference(spec, assignment, previous)  # type: ignore[arg-type]
