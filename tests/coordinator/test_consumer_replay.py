"""Randomized consumer-group operation sequences (KIP-848 members, classic members in consumer groups,
upgrades and downgrades, static leaves, timeouts, topic changes, reloads) checked against the invariants
of the model and the replay contract: a coordinator rebuilt from the records has the same hard state."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMemberState
from regroup.model.errors import ErrorCode
from tests.coordinator.consumer_harness import ConsumerHarness, named, subscription
from tests.group_views import consumer_groups

TOPIC_SETS = (["foo"], ["foo", "bar"], ["bar"])


def check_invariants(group: ConsumerGroup) -> None:
    holders: dict[tuple[object, int], str] = {}
    for m in group.members.values():
        if m.member_epoch >= 0:
            assert m.member_epoch <= group.assignment_epoch <= group.group_epoch, (m, group.group_epoch)
        for parts in (m.assigned, m.pending_revocation):
            for topic_id, ps in parts.items():
                for p in ps:
                    assert (topic_id, p) not in holders, f"{topic_id}-{p} held twice"
                    holders[(topic_id, p)] = m.member_id
    assert holders == group.partition_holders
    for instance, member_id in group.static_members.items():
        assert group.members[member_id].instance_id == instance


class Driver:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.h = ConsumerHarness()
        self.h.topics(foo=6, bar=3)
        self.instances = iter(f"i{n}" for n in range(1000))

    def consumer_members(self) -> list[str]:
        group = consumer_groups(self.h.coordinator).get("group")
        return [] if group is None else [m for m, x in group.members.items() if x.classic is None]

    def classic_members_in_cg(self) -> list[str]:
        group = consumer_groups(self.h.coordinator).get("group")
        return [] if group is None else [m for m, x in group.members.items() if x.classic is not None]

    def step(self) -> None:
        h, rng = self.h, self.rng
        action = rng.choice(
            [
                "join",
                "join",
                "heartbeat",
                "heartbeat",
                "heartbeat",
                "ack",
                "leave",
                "static-leave",
                "sleep",
                "topics",
                "classic-join",
                "classic-heartbeat",
                "classic-leave",
                "reload",
                "commit",
            ]
        )
        group = consumer_groups(h.coordinator).get("group")
        members = self.consumer_members()
        if action == "join":
            instance = next(self.instances) if rng.random() < 0.3 else None
            h.hb("", 0, topics=rng.choice(TOPIC_SETS), instance_id=instance, assignor=rng.choice([None, "range"]))
        elif action in ("heartbeat", "ack") and members and group is not None:
            m = group.members[rng.choice(members)]
            owned = named(m.assigned) if action == "ack" else None
            topics = rng.choice(TOPIC_SETS) if rng.random() < 0.1 else None
            response = h.hb(m.member_id, m.member_epoch, owned=owned, topics=topics, instance_id=m.instance_id)
            assert response.error is ErrorCode.NONE, response
        elif action == "leave" and members and group is not None:
            m = group.members[rng.choice(members)]
            h.hb(m.member_id, -1, instance_id=m.instance_id)
        elif action == "static-leave" and members and group is not None:
            statics = [x for x in members if group.members[x].instance_id is not None]
            if statics:
                m = group.members[rng.choice(statics)]
                h.hb(m.member_id, -2, instance_id=m.instance_id)
        elif action == "sleep":
            h.sleep(rng.choice([1_000, 5_000, 12_000, 46_000]))
        elif action == "topics":
            h.topics(foo=rng.choice([6, 8]), bar=rng.choice([3, 4]))
        elif action == "classic-join":
            call = h.join("", protocols=(("range", subscription(rng.choice(TOPIC_SETS))),), instance_id=None)
            h.sleep(0)
            if call.done and call.response.error is ErrorCode.MEMBER_ID_REQUIRED:
                again = h.join(call.response.member_id, protocols=(("range", subscription(["foo"])),), instance_id=None)
                h.sleep(0)
                if again.done and again.response.error is ErrorCode.NONE and "group" in consumer_groups(h.coordinator):
                    h.sync(again.response.member_id, again.response.generation_id, instance_id=None)
        elif action == "classic-heartbeat" and group is not None:
            classic = self.classic_members_in_cg()
            if classic:
                m = group.members[rng.choice(classic)]
                h.heartbeat(m.member_id, m.member_epoch, instance_id=m.instance_id)
        elif action == "classic-leave" and group is not None:
            from regroup.protocol.classic import LeavingMember

            classic = self.classic_members_in_cg()
            if classic:
                h.leave(LeavingMember(member_id=rng.choice(classic)))
        elif action == "reload":
            before = h.coordinator.hard_state()
            h.reload()
            assert h.coordinator.hard_state() == before
        elif action == "commit" and members and group is not None:
            m = group.members[rng.choice(members)]
            h.commit(m.member_id, m.member_epoch, {("foo", 0): rng.randint(0, 100)})
        group = consumer_groups(h.coordinator).get("group")
        if group is not None:
            check_invariants(group)


@pytest.mark.parametrize("seed", range(40))
def test_random_operations_keep_invariants_and_replay(seed: int) -> None:
    driver = Driver(seed)
    for _ in range(150):
        driver.step()
    h = driver.h
    state = h.coordinator.hard_state()
    h.reload()
    assert h.coordinator.hard_state() == state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.sampled_from(TOPIC_SETS), min_size=1, max_size=6),
    st.lists(st.integers(min_value=0, max_value=5), max_size=20),
)
def test_reconciliation_converges_without_double_ownership(subs: list[list[str]], order: list[int]) -> None:
    """Members joining with any subscriptions, heartbeating (and acknowledging) in any order, end Stable with
    every subscribed partition owned exactly once and each member holding exactly its target."""
    h = ConsumerHarness()
    h.topics(foo=6, bar=3)
    ids = [h.hb("", 0, topics=s).member_id or "" for s in subs]
    for i in order:
        m = h.cmember(ids[i % len(ids)])
        h.hb(m.member_id, m.member_epoch, owned=named(m.assigned) or {})
        check_invariants(h.cg())
    h.settle(ids, rounds=20)
    group = h.cg()
    for m in group.members.values():
        assert m.state is ConsumerGroupMemberState.STABLE and m.assigned == group.target_of(m.member_id)
    owned = sorted((str(t), p) for m in group.members.values() for t, ps in m.assigned.items() for p in ps)
    subscribed = {t for s in subs for t in s}
    expected = sorted(
        (str(tid), p)
        for name, n in (("foo", 6), ("bar", 3))
        if name in subscribed
        for tid in [h.coordinator.image.by_name[name].topic_id]
        for p in range(n)
    )
    assert owned == expected


def test_consumer_records_survive_serialization() -> None:
    from regroup.records import serde

    driver = Driver(7)
    for _ in range(150):
        driver.step()
    kinds = set()
    for record in driver.h.records:
        assert serde.decode(serde.encode(record)) == record
        kinds.add((type(record.key).__name__, record.value is None))
    assert len(kinds) >= 12  # every consumer-group record kind, live and tombstone, went through
