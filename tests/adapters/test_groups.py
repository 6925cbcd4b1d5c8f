"""Each adapter strategy in a real group of three kafka-python or aiokafka consumers against ``regroup serve``:
the group settles on the adapter's protocol with every partition owned as the strategy promises (once, or by
``replicas`` members), balanced as it promises; then a member leaves and the survivors keep what they owned
(every strategy but range, which promises no stickiness)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.adapters.groups import AioKafkaMember, GroupView, GroupWatch, KafkaPythonMember, Member, Members
from tests.server.conftest import ServerProcess

pytest.importorskip("kafka")
pytest.importorskip("aiokafka")

from regroup.adapters import aiokafka as aio
from regroup.adapters import kafka_python as kp

PARTITIONS = 12
REPLICAS = 2


@dataclass(frozen=True)
class Case:
    strategy: str
    make: Callable[[list[str]], Any]  # one member's assignor, given the group's topics
    partitions: tuple[int, ...]  # per topic
    owners: int = 1  # distinct owners per partition
    sticky: bool = True
    balanced: bool = True


def cases(module: Any, cooperative: bool) -> list[Case]:
    out = [
        Case("sticky", lambda _: module.RegroupStickyAssignor(), (PARTITIONS,)),
        Case("range", lambda _: module.RegroupRangeAssignor(), (PARTITIONS,), sticky=False),
        Case("redundant", lambda _: module.RegroupRedundantAssignor(replicas=REPLICAS), (PARTITIONS,), REPLICAS),
        # partition p of both topics is one unit: 6 units of 2 partitions
        Case("copartitioned", lambda ts: module.RegroupCopartitionedAssignor(copartitioned=[ts]), (6, 6)),
        Case("consistent-hash", lambda _: module.RegroupConsistentHashAssignor(), (PARTITIONS,), balanced=False),
    ]
    if cooperative:
        out.insert(1, Case("cooperative-sticky", lambda _: module.RegroupCooperativeStickyAssignor(), (PARTITIONS,)))
    return out


PARAMS = [pytest.param("kafka-python", c, id=f"kafka-python-{c.strategy}") for c in cases(kp, cooperative=True)] + [
    pytest.param("aiokafka", c, id=f"aiokafka-{c.strategy}") for c in cases(aio, cooperative=False)
]


def check_ownership(case: Case, topics: dict[str, int], view: GroupView, members: list[str]) -> None:
    owners = Counter(tp for name in members for tp in view.assignments[name])
    everything = {(t, p) for t, n in topics.items() for p in range(n)}
    assert set(owners) == everything, f"unowned: {everything - set(owners)}"
    want = min(case.owners, len(members))
    assert set(owners.values()) == {want}, f"owners per partition: {owners}"
    loads = [len(view.assignments[name]) for name in members]
    if case.balanced:
        spread = len(topics)  # (copartitioned: a unit is partition p of both topics)
        assert max(loads) - min(loads) <= spread, f"unbalanced: {view.assignments}"
    if case.strategy == "copartitioned":
        first, second = topics
        for name in members:
            mine = view.assignments[name]
            assert {p for t, p in mine if t == first} == {p for t, p in mine if t == second}, view.assignments


@pytest.mark.parametrize(("library", "case"), PARAMS)
def test_group_of_three_then_one_leaves(server: ServerProcess, library: str, case: Case) -> None:
    bootstrap = f"127.0.0.1:{server.port}"
    group = f"adapters-{library}-{case.strategy}"
    topics = {f"{group}-{i}": n for i, n in enumerate(case.partitions)}
    watch = GroupWatch(bootstrap, group)
    try:
        watch.create_topics(topics)
        kind = KafkaPythonMember if library == "kafka-python" else AioKafkaMember
        with Members() as members:
            started: list[Member] = [
                members.start(kind(f"{group}-{i}", bootstrap, group, list(topics), [case.make(list(topics))]))
                for i in range(3)
            ]
            view = watch.settled(started)
            assert view.protocol == f"regroup-{case.strategy}"
            check_ownership(case, topics, view, [m.member for m in started])

            leaving, survivors = started[2], started[:2]
            members.stop(leaving.member)
            after = watch.settled(survivors)
            check_ownership(case, topics, after, [m.member for m in survivors])
            if case.sticky:
                for m in survivors:
                    assert view.assignments[m.member] <= after.assignments[m.member], (view, after)
    finally:
        watch.close()
