"""The optimal engine against brute force on small random groups.

For every small group we enumerate every valid assignment and check that ours has the decreasingly
minimal load vector (hence minimal sum of squares, max, and KIP-54 score) and, among those, keeps the most
partitions with their previous owner.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.assignors import metrics
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.assignors.sticky import OptimalAssignor


@st.composite
def small_groups(draw: st.DrawFn) -> tuple[GroupSpec, dict[tuple[str, int], str]]:
    n_topics = draw(st.integers(1, 3))
    counts = {f"t{i}": draw(st.integers(1, 3)) for i in range(n_topics)}
    n_members = draw(st.integers(1, 4))
    members = [f"c{i}" for i in range(n_members)]
    subs = {
        m: draw(st.lists(st.sampled_from(sorted(counts)), min_size=0, max_size=n_topics, unique=True)) for m in members
    }
    previous: dict[tuple[str, int], str] = {}
    for t, c in counts.items():
        for p in range(c):
            owner = draw(st.sampled_from([None, *members]))
            if owner is not None and t in subs[owner]:
                previous[(t, p)] = owner
            elif owner is not None and draw(st.booleans()):
                previous[(t, p)] = owner  # a stale claim on a topic the member left
    owned: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    for (t, p), m in previous.items():
        owned[m].setdefault(t, []).append(p)
    spec = GroupSpec(
        topics=counts,
        members={m: MemberSubscription.of(subs[m], owned[m], generation=1) for m in members},
    )
    return spec, previous


def brute_force(spec: GroupSpec, previous: dict[tuple[str, int], str]) -> tuple[tuple[int, ...], int, int]:
    """(best sorted-desc load vector, best kept among those, min KIP-54 score) over all assignments."""
    partitions = [(t, p) for t in sorted(spec.topics) for p in range(spec.topics[t])]
    choices = []
    for t, p in partitions:
        subscribers = [m for m, s in spec.members.items() if t in s.topics]
        if subscribers:
            choices.append([(t, p, m) for m in subscribers])
    best: tuple[tuple[int, ...], int] | None = None
    best_score: int | None = None
    for combo in itertools.product(*choices):
        load = dict.fromkeys(spec.members, 0)
        kept = 0
        for t, p, m in combo:
            load[m] += 1
            kept += previous.get((t, p)) == m and t in spec.members[m].topics
        vector = tuple(sorted(load.values(), reverse=True))
        if best is None or vector < best[0] or (vector == best[0] and kept > best[1]):
            best = (vector, kept)
        values = sorted(load.values())
        score = sum(abs(a - b) for a, b in itertools.combinations(values, 2))
        best_score = score if best_score is None else min(best_score, score)
    assert best is not None and best_score is not None
    return best[0], best[1], best_score


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_groups())
def test_optimal_matches_brute_force(case: tuple[GroupSpec, dict[tuple[str, int], str]]) -> None:
    spec, previous = case
    result = OptimalAssignor().assign(spec)
    assert metrics.validity_errors(spec, result) == []
    vector, kept, score = brute_force(spec, previous)
    ours = tuple(sorted(metrics.loads(result).values(), reverse=True))
    assert ours == vector
    ours_kept = sum(
        1 for m, per_topic in result.items() for t, ps in per_topic.items() for p in ps if previous.get((t, p)) == m
    )
    assert ours_kept == kept
    assert metrics.balance_score(result) == score
    assert metrics.kip54_balanced(spec, result)
