"""KIP-54's three worked examples (round-robin and sticky side by side in ``regroup demo``, and the lab's
sanity checks): the groups, the change each undergoes, and how many partitions keep their owner through it
under a strategy, computed by the real assignors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from regroup.assignors import metrics, registry
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription


@dataclass(frozen=True)
class Example:
    title: str
    topics: Mapping[str, int]
    subscriptions: Mapping[str, tuple[str, ...]]
    change: str
    apply_change: Callable[[dict[str, tuple[str, ...]]], dict[str, tuple[str, ...]]]


def _drop(member: str) -> Callable[[dict[str, tuple[str, ...]]], dict[str, tuple[str, ...]]]:
    return lambda subs: {m: t for m, t in subs.items() if m != member}


def _add(member: str, topics: tuple[str, ...]) -> Callable[[dict[str, tuple[str, ...]]], dict[str, tuple[str, ...]]]:
    return lambda subs: {**subs, member: topics}


ALL4 = ("t0", "t1", "t2", "t3")
EXAMPLES = (
    Example(
        "KIP-54 example 1: three consumers, four topics of two partitions, all subscribed to everything",
        {"t0": 2, "t1": 2, "t2": 2, "t3": 2},
        {"C0": ALL4, "C1": ALL4, "C2": ALL4},
        "C1 leaves",
        _drop("C1"),
    ),
    Example(
        "KIP-54 example 2: C0 reads t0; C1 reads t0, t1; C2 reads t0, t1, t2 (1, 2 and 3 partitions)",
        {"t0": 1, "t1": 2, "t2": 3},
        {"C0": ("t0",), "C1": ("t0", "t1"), "C2": ("t0", "t1", "t2")},
        "C0 leaves",
        _drop("C0"),
    ),
    Example(
        "KIP-54 example 3: two consumers, two topics of two partitions",
        {"t0": 2, "t1": 2},
        {"C0": ("t0", "t1"), "C1": ("t0", "t1")},
        "C2 joins",
        _add("C2", ("t0", "t1")),
    ),
)


def _spec(topics: Mapping[str, int], subs: Mapping[str, tuple[str, ...]], previous: Assignment | None) -> GroupSpec:
    members = {
        m: MemberSubscription.of(
            list(t),
            (previous or {}).get(m, {}),
            generation=1 if previous and m in previous else -1,
        )
        for m, t in subs.items()
    }
    return GroupSpec(topics=topics, members=members)


def _run(strategy: str, spec: GroupSpec) -> Assignment:
    assignor = registry.get(strategy)
    return assignor.assign(assignor.with_previous(spec))


def kept(before: Assignment, after: Assignment) -> int:
    """Partitions with the same owner in both assignments."""
    now = metrics.owners(after)
    return sum(1 for tp, m in metrics.owners(before).items() if now.get(tp) == m)


def before_and_after(example: Example, strategy: str) -> tuple[Assignment, Assignment]:
    """The example's assignment under ``strategy`` before its change, and after it (given the one before)."""
    before = _run(strategy, _spec(example.topics, example.subscriptions, None))
    after_subs = example.apply_change(dict(example.subscriptions))
    return before, _run(strategy, _spec(example.topics, after_subs, before))


def kept_through_change(example: Example, strategy: str) -> int:
    """Partitions that keep their owner through the example's change under ``strategy``."""
    return kept(*before_and_after(example, strategy))
