"""K24, K25 of docs/protocol.md: a new target when the rack topology changes (Kafka's KIP-1101): a member's
rack changing (a ConsumerGroupHeartbeat with another RackId) or the replica racks of a subscribed partition
changing in the cluster image bump the group epoch of a group whose assignor reads racks; nothing else does.
Both decisions are taken from the records (the members' racks, the subscription metadata with its replica
racks), so a restarted coordinator takes them the same way.

Topic foo has partition 0 on rack r1 and partition 1 on rack r2; A (r1) holds foo-0 and B (r2) foo-1, stable
at epoch 2, under ``uniform`` unless said otherwise."""

from __future__ import annotations

import pytest

from tests.unit.coordinator.consumer_racks import RackHarness

SETTLED = {"A": {"foo": [0]}, "B": {"foo": [1]}}
SWAPPED = {"A": {"foo": [1]}, "B": {"foo": [0]}}
#: what A's heartbeat writes once foo's replica racks are flipped: the racks recorded, the epoch bumped, the
#: target swapped to follow the racks, and A told to give up foo-0 first
REPLICA_RACKS_FLIPPED = [
    "subscription foo:2",
    "epoch 3",
    "target A foo=1",
    "target B foo=0",
    "target-epoch 3",
    "current A epoch=2 prev=2 unrevoked_partitions assigned=- revoking=foo=0",
]


def settled(assignor: str | None = None, **config: object) -> tuple[RackHarness, str, str, dict[str, str]]:
    h = RackHarness(**config)
    h.racked(foo=["r1", "r2"])
    a = h.join_cg(rack_id="r1", assignor=assignor).member_id
    b = h.join_cg(rack_id="r2", assignor=assignor).member_id
    assert a and b
    h.settle([a, b])
    names = {a: "A", b: "B"}
    assert h.cg().group_epoch == 2
    if assignor != "consistent-hash":
        assert by_name(h, names) == SETTLED
    return h, a, b, names


def by_name(h: RackHarness, names: dict[str, str]) -> dict[str, object]:
    return {names[m]: t for m, t in h.targets().items()}


def test_k24_a_member_changing_its_rack_bumps_the_group_epoch() -> None:
    """When A moves to r2, then B to r1;
    then each heartbeat writes the member's metadata and bumps the group epoch (3, then 4). After A's move the
    target stays (balance keeps one each, and B keeps foo-1 on its rack); after B's the two are on the wrong
    racks and the new target swaps them."""
    h, a, b, names = settled()
    moved = h.hb(a, 2, rack_id="r2")
    assert moved.member_epoch == 3
    assert h.written(names) == [
        "member A foo",
        "epoch 3",
        "target-epoch 3",
        "current A epoch=3 prev=2 stable assigned=foo=0 revoking=-",
    ]
    assert h.cmember(a).rack_id == "r2"
    h.hb(b, 2, rack_id="r1")
    assert h.written(names) == [
        "member B foo",
        "epoch 4",
        "target A foo=1",
        "target B foo=0",
        "target-epoch 4",
        "current B epoch=2 prev=2 unrevoked_partitions assigned=- revoking=foo=1",
    ]
    h.settle([a, b])
    assert (h.cg().group_epoch, by_name(h, names)) == (4, SWAPPED)


def test_k25_replica_racks_changing_bump_the_group_epoch() -> None:
    """When the cluster image puts foo-0 on r2 and foo-1 on r1;
    then nothing is written until a member heartbeats; then the subscription metadata (with the new racks)
    is rewritten, the group epoch bumped to 3 and the target swaps the two partitions."""
    h, a, _, names = settled()
    h.racked(foo=["r2", "r1"])
    assert h.written(names) == []
    assert h.coordinator.awaits_metadata_refresh(h.group_id)
    h.hb(a, 2)
    assert h.written(names) == REPLICA_RACKS_FLIPPED
    assert h.cg().subscribed_topics["foo"].racks == (("r2",), ("r1",))


def test_k24_k25_nothing_relevant_changed_no_bump() -> None:
    """When A heartbeats with its own rack again, a topic the group does not subscribe to changes racks, and
    foo is republished with the same racks;
    then nothing is written, the group is not even asked to refresh its metadata, and the epoch stays 2."""
    h, a, _, names = settled()
    h.hb(a, 2, rack_id="r1")
    assert h.written(names) == []
    h.racked(bar=["r1", "r2"])
    h.racked(foo=["r1", "r2"])
    assert not h.coordinator.awaits_metadata_refresh(h.group_id)
    h.hb(a, 2)
    assert h.written(names) == []
    assert h.cg().group_epoch == 2


def test_k24_a_rack_change_without_replica_racks_does_not_bump() -> None:
    """Given foo with no replica racks (no assignor can match a member's rack to anything);
    when A changes its rack;
    then only A's member metadata is written; the epoch stays 1."""
    h = RackHarness()
    h.topics(foo=2)
    a = h.join_cg(rack_id="r1").member_id
    assert a
    h.hb(a, 1, rack_id="r2")
    assert h.written({a: "A"}) == ["member A foo"]
    assert h.cg().group_epoch == 1


def test_k24_a_rack_change_under_an_assignor_blind_to_racks_does_not_bump() -> None:
    """Given the group on ``consistent-hash`` (its ring never reads racks);
    when A changes its rack;
    then only A's member metadata is written; the epoch stays. Replica racks changing still bump, as any
    change of the subscription metadata does (Kafka's rule), and the ring's target stays the same."""
    h, a, b, names = settled("consistent-hash", consumer_group_assignors=("uniform", "range", "consistent-hash"))
    ring = {"A": {}, "B": {"foo": [0, 1]}}
    assert by_name(h, names) == ring
    h.hb(a, 2, rack_id="r2")
    assert h.written(names) == ["member A foo"]
    h.racked(foo=["r2", "r1"])
    h.hb(b, 2)
    assert h.written(names) == [
        "subscription foo:2",
        "epoch 3",
        "target-epoch 3",
        "current B epoch=3 prev=2 stable assigned=foo=0,1 revoking=-",
    ]
    assert by_name(h, names) == ring


@pytest.mark.parametrize(("assignor", "target"), [("range", SWAPPED), ("optimal", SETTLED)])
def test_k24_the_other_rack_aware_assignors_bump_too(assignor: str, target: dict[str, object]) -> None:
    """Under ``range`` and ``optimal``, A moving to r2 bumps the epoch too. ``range`` recomputes its ranges
    rack-aware (A, first in member order, now matches foo-1); ``optimal`` keeps both where they are
    (stickiness before racks)."""
    h, a, _, names = settled(assignor, consumer_group_assignors=("uniform", "range", "optimal"))
    h.hb(a, 2, rack_id="r2")
    written = h.written(names)
    assert written[:2] == ["member A foo", "epoch 3"] and "target-epoch 3" in written
    assert (h.cg().group_epoch, by_name(h, names)) == (3, target)


def test_k24_a_restarted_coordinator_decides_the_same() -> None:
    """Given the group's records replayed by a new coordinator with the same cluster image;
    when A heartbeats (the first heartbeat after loading refreshes the metadata), then moves to r2;
    then the first writes nothing (the recorded racks are the image's) and the second bumps as before."""
    h, a, _, names = settled()
    h.reload()
    h.hb(a, 2)
    assert h.written(names) == []
    h.hb(a, 2, rack_id="r2")
    assert h.written(names)[:3] == ["member A foo", "epoch 3", "target-epoch 3"]


def test_k25_replica_racks_changed_while_the_coordinator_was_down() -> None:
    """Given the group's records, and a new coordinator whose cluster image has foo's racks flipped (a broker
    restarted with another ``broker.rack``);
    when A heartbeats;
    then the recorded racks differ from the image's: the subscription metadata is rewritten, the epoch bumped
    and the target swapped."""
    h, a, _, names = settled()
    h.racked(foo=["r2", "r1"])  # the image the new coordinator starts from (the old one hears of it first)
    h.reload()
    h.hb(a, 2)
    assert h.written(names) == REPLICA_RACKS_FLIPPED
