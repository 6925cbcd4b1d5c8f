"""The server-side assignors on racks, by example: ``uniform`` (balance, then partitions on their owner's
rack, then rack locality, then the rest of stickiness) and ``server-range`` (the client-side KIP-881 range)."""

from __future__ import annotations

from regroup.assignors.range import RangeAssignor
from regroup.assignors.server_range import ServerRangeAssignor
from regroup.assignors.spec import Assignment, GroupSpec, MemberSubscription
from regroup.assignors.uniform import UniformAssignor

A, B = frozenset({"a"}), frozenset({"b"})


def member(topics: list[str], owned: dict[str, list[int]] | None = None, rack: str | None = None) -> MemberSubscription:
    return MemberSubscription.of(topics, owned, rack=rack)


def uniform(
    topics: dict[str, int], members: dict[str, MemberSubscription], racks: dict[str, tuple[frozenset[str], ...]]
) -> Assignment:
    return UniformAssignor().assign(GroupSpec(topics=topics, members=members, partition_racks=racks))


# ------------------------------------------------------------------------------------------------ uniform


def test_one_broker_rack_keeps_the_rack_blind_balance_and_stickiness() -> None:
    """One broker on rack a: every partition is on a. Members on a and b get equal shares when the count
    divides; the larger share goes to the member on a; nothing on a moves for locality."""
    everything_on_a = {"t": (A,) * 4}
    members = {"x": member(["t"], {"t": [0, 1]}, "a"), "y": member(["t"], {"t": [2, 3]}, "b")}
    assert uniform({"t": 4}, members, everything_on_a) == {"x": {"t": [0, 1]}, "y": {"t": [2, 3]}}
    # 5 partitions, the member on b held them all: the one on a joins and takes the larger share
    members = {"x": member(["t"], rack="a"), "y": member(["t"], {"t": [0, 1, 2, 3, 4]}, "b")}
    result = uniform({"t": 5}, members, {"t": (A,) * 5})
    assert (len(result["x"]["t"]), len(result["y"]["t"])) == (3, 2)


def test_a_partition_whose_replicas_left_its_owners_rack_moves_when_balance_allows() -> None:
    racks = {"t": (A, B, A, B)}
    members = {"x": member(["t"], {"t": [0, 1]}, "a"), "y": member(["t"], {"t": [2, 3]}, "b")}
    # x holds 1 (on b only), y holds 2 (on a only): they swap, every other partition stays
    assert uniform({"t": 4}, members, racks) == {"x": {"t": [0, 2]}, "y": {"t": [1, 3]}}


def test_partitions_on_their_owners_rack_never_move_for_locality() -> None:
    # x (rack a) keeps 0 and 1, both on a, though y (rack b) is then cross-rack for all it has: balance
    # comes first, and a partition on its owner's rack is not given up for another member's locality
    racks = {"t": (A, A, A, A)}
    members = {"x": member(["t"], {"t": [0, 1]}, "a"), "y": member(["t"], {"t": [2, 3]}, "b")}
    assert uniform({"t": 4}, members, racks) == {"x": {"t": [0, 1]}, "y": {"t": [2, 3]}}


def test_balance_comes_before_locality() -> None:
    # every partition is on a, only x is on a: x still gets only its share
    members = {"x": member(["t"], rack="a"), "y": member(["t"], rack="b"), "z": member(["t"], rack="b")}
    result = uniform({"t": 6}, members, {"t": (A,) * 6})
    assert sorted(len(per["t"]) for per in result.values()) == [2, 2, 2]


def test_no_member_rack_holds_a_replica_means_racks_are_ignored() -> None:
    members = {"x": member(["t"], {"t": [0]}, "c"), "y": member(["t"], {"t": [1, 2]})}
    blind = UniformAssignor().assign(GroupSpec(topics={"t": 3}, members=members))
    assert uniform({"t": 3}, members, {"t": (A, B, A)}) == blind


def test_members_without_rack_are_cross_rack_for_nothing() -> None:
    # y has no rack: it may take anything; x on b takes the partitions on b
    members = {"x": member(["t"], rack="b"), "y": member(["t"])}
    assert uniform({"t": 4}, members, {"t": (A, B, A, B)}) == {"x": {"t": [1, 3]}, "y": {"t": [0, 2]}}


# ------------------------------------------------------------------------------------------- server-range


def server_range(spec: GroupSpec) -> Assignment:
    result = ServerRangeAssignor().assign(spec)
    assert result == RangeAssignor().assign(spec)
    return result


def test_server_range_matches_partitions_to_racks() -> None:
    members = {"x": member(["t"], rack="a"), "y": member(["t"], rack="b")}
    spec = GroupSpec(topics={"t": 4}, members=members, partition_racks={"t": (A, B, A, B)})
    assert server_range(spec) == {"x": {"t": [0, 2]}, "y": {"t": [1, 3]}}
    # without racks: the plain ranges
    assert server_range(GroupSpec(topics={"t": 4}, members=members)) == {"x": {"t": [0, 1]}, "y": {"t": [2, 3]}}


def test_server_range_keeps_co_partitioning_on_racks() -> None:
    members = {"x": member(["t", "u"], rack="a"), "y": member(["t", "u"], rack="b")}
    racks = {"t": (A, B, A, B), "u": (A, B, B, A)}
    result = server_range(GroupSpec(topics={"t": 4, "u": 4}, members=members, partition_racks=racks))
    # partition p goes where p of both topics is on the member's rack (0 and 1), the rest in range order
    assert result == {"x": {"t": [0, 2], "u": [0, 2]}, "y": {"t": [1, 3], "u": [1, 3]}}


def test_server_range_one_broker_rack_gives_the_plain_ranges() -> None:
    # every partition on the one rack: racks cannot change anything, as in Kafka's range
    members = {"x": member(["t"], rack="b"), "y": member(["t"], rack="a")}
    spec = GroupSpec(topics={"t": 5}, members=members, partition_racks={"t": (A,) * 5})
    assert server_range(spec) == {"x": {"t": [0, 1, 2]}, "y": {"t": [3, 4]}}
