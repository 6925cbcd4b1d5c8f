"""A real kafka-python group rolled from kafka-python's own sticky assignor to regroup's, member by member, and one
member rolled back, while records keep arriving (eager ``sticky`` and cooperative ``cooperative-sticky``).

Each upgraded member restarts with ``rolling_upgrade(ours, theirs)`` (ours first): the group's vote keeps
kafka-python's protocol while any member offers only it, and switches to ours in the rebalance where the last
such member leaves. That first rebalance under ours is sticky to what the members own (their adapters learnt it
from kafka-python's assignor); when a member comes back with kafka-python's assignor alone the group falls back to
it, and kafka-python's assignor is sticky to what the members own under ours. Throughout: no partition is owned by
two members at once (ownership windows from the rebalance listeners, on one clock), and every acknowledged record
is consumed (the group never stops)."""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from tests.adapters.groups import (
    GroupView,
    GroupWatch,
    KafkaPythonMember,
    Ledger,
    Member,
    Members,
    Producer,
    Timeline,
    eventually,
)
from tests.server.conftest import ServerProcess

pytest.importorskip("kafka")

from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

from regroup.adapters import kafka_python as kp

log = logging.getLogger("tests.adapters")

PARTITIONS = 12
#: the longest the group may go without consuming anything while records keep arriving (a rebalance takes a
#: second or two; generous for a loaded machine)
MAX_GAP_S = 15.0

MODES = {
    "sticky": (StickyPartitionAssignor, kp.RegroupStickyAssignor),
    "cooperative-sticky": (CooperativeStickyAssignor, kp.RegroupCooperativeStickyAssignor),
}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rolling_upgrade_to_regroup_and_back(server: ServerProcess, mode: str) -> None:
    theirs, ours = MODES[mode]
    bootstrap = f"127.0.0.1:{server.port}"
    group = f"adapters-rolling-{mode}"
    topic = group
    timeline, ledger = Timeline(), Ledger()
    steps: list[str] = []
    watch = GroupWatch(bootstrap, group)
    producer = Producer(bootstrap, topic, PARTITIONS)
    try:
        watch.create_topics({topic: PARTITIONS})
        with Members() as members:

            def start(name: str, assignors: list[Any]) -> Member:
                return members.start(KafkaPythonMember(name, bootstrap, group, [topic], assignors, timeline, ledger))

            def settled(note: str) -> GroupView:
                view = watch.settled(list(members.running.values()))
                steps.append(f"{note}: {view.protocol} {sorted((m, len(a)) for m, a in view.assignments.items())}")
                consumed_since = ledger_size() + 20
                eventually(lambda: True if ledger_size() >= consumed_since else None, 30, f"consumption after {note}")
                return view

            def ledger_size() -> int:
                return sum(ledger.counts().values())

            for name in ("a1", "b1", "c1"):
                start(name, [theirs()])
            producer.start()
            view = settled("three members on kafka-python's assignor")
            assert view.protocol == mode

            # the roll: restart each member with both assignors, ours first
            for old, new in (("a1", "a2"), ("b1", "b2"), ("c1", "c2")):
                members.stop(old)
                after_leave = settled(f"{old} left")
                if old == "c1":  # the last member offering only kafka-python's: the group switches to ours
                    assert after_leave.protocol == f"regroup-{mode}"
                    for kept in ("a2", "b2"):  # sticky to what they owned under kafka-python's assignor
                        assert view.assignments[kept] <= after_leave.assignments[kept], steps
                else:
                    assert after_leave.protocol == mode
                start(new, kp.rolling_upgrade(ours(), theirs()))
                before = after_leave
                view = settled(f"{new} joined with [ours, theirs]")
                assert view.protocol == (f"regroup-{mode}" if old == "c1" else mode)
                for name in before.assignments:  # the members that stayed keep a share of what they owned
                    assert view.assignments[name] <= before.assignments[name], steps

            # a member rolled back: kafka-python's assignor again, sticky to what members own under ours
            members.stop("a2")
            before = settled("a2 left")
            assert before.protocol == f"regroup-{mode}"
            start("a3", [theirs()])
            view = settled("a3 joined with kafka-python's assignor alone")
            assert view.protocol == mode
            for kept in ("b2", "c2"):
                assert view.assignments[kept] <= before.assignments[kept], steps
                assert len(view.assignments[kept]) == PARTITIONS // 3, steps

            acked = producer.stop()
            eventually(lambda: True if not acked - set(ledger.counts()) else None, 30, "every record consumed")
        overlaps = timeline.overlaps()
        assert not overlaps, "\n".join(overlaps[:10])
        times = ledger.times()
        gap = max(b - a for a, b in itertools.pairwise(times))
        steps.append(f"{len(acked)} records produced and consumed; longest pause in consumption {gap:.2f}s")
        assert gap < MAX_GAP_S, steps
        log.info("rolling %s:\n%s", mode, "\n".join(steps))
        print("\n".join(steps))  # the roll's evidence, shown with pytest -s
    finally:
        if producer.is_alive():
            producer.stop()
        watch.close()
