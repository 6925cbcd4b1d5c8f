"""The classic group's ``has_all_members_joined`` (a cursor over the members, not a walk of them all on every
JoinGroup) against the plain definition, after any sequence of members added, removed, replaced (a static
member's new id: a new members dict), parking a JoinGroup or having it answered, and pending member ids; and the
next leader when the leader leaves (another cursor) against the first member in the group's order."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupMember

OPS = ("add", "add-parked", "remove", "park", "answer", "replace", "pending", "unpend", "answer-all")
operations = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 6)), max_size=60)


def member(member_id: str, parked: bool) -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id=member_id,
        group_instance_id=None,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=1000,
        session_timeout_ms=1000,
        protocol_type="consumer",
        protocols=(("range", b""),),
        awaiting_join_key=1 if parked else None,
    )


def plainly(group: ClassicGroup) -> bool:
    return not group.pending_join_members and all(m.awaiting_join_key is not None for m in group.members.values())


@settings(max_examples=400, deadline=None)
@given(operations)
def test_all_members_joined_matches_the_plain_definition(ops: list[tuple[str, int]]) -> None:
    group = ClassicGroup(group_id="g")
    for op, index in ops:
        member_id = f"m{index}"
        known = group.members.get(member_id)
        if op in ("add", "add-parked") and known is None:
            group.add(member(member_id, op == "add-parked"))
        elif op == "remove":
            group.remove(member_id)
        elif op == "park" and known is not None:
            known.awaiting_join_key = index + 100
        elif op == "answer" and known is not None:
            known.awaiting_join_key = None
        elif op == "replace" and known is not None:  # the same id, a new member object, in a new dict
            group.members = {mid: (member(mid, False) if mid == member_id else m) for mid, m in group.members.items()}
        elif op == "pending":
            group.pending_join_members.add(member_id)
        elif op == "unpend":
            group.pending_join_members.discard(member_id)
        elif op == "answer-all":  # a join phase completed: everyone answered
            for m in group.members.values():
                m.awaiting_join_key = None
        assert group.has_all_members_joined() == plainly(group), (op, member_id)


def test_members_rejoining_in_the_groups_order_move_the_cursor_forward() -> None:
    group = ClassicGroup(group_id="g")
    for i in range(50):
        group.add(member(f"m{i:02}", False))
    for i, m in enumerate(group.members.values()):
        assert not group.has_all_members_joined()
        assert group._join_scan_at == i  # (stopped at the first member not rejoined, not walked from the start)
        m.awaiting_join_key = i
    assert group.has_all_members_joined()


LEADER_OPS = ("add", "remove", "remove-leader", "replace")


@settings(max_examples=600, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LEADER_OPS), st.integers(0, 3)), max_size=40))
@example([("add", 0), ("add", 1), ("add", 2), ("remove-leader", 0), ("replace", 2), ("remove-leader", 0)])
def test_the_next_leader_is_the_first_member_in_the_groups_order(ops: list[tuple[str, int]]) -> None:
    """When the leader leaves, the first member in the group's order leads (as Kafka picks it), whatever members
    were added, removed or replaced before (the cursor that finds it is never fooled by a member gone, nor by a
    members dict replaced)."""
    group = ClassicGroup(group_id="g")
    for op, index in ops:
        member_id = f"m{index}"
        known = group.members.get(member_id)
        if op == "add" and known is None:
            group.add(member(member_id, False))
        elif op == "remove":
            group.remove(member_id)
        elif op == "remove-leader" and group.leader_id is not None:
            group.remove(group.leader_id)
            assert group.leader_id == next(iter(group.members), None), op
        elif op == "replace" and known is not None:
            group.members = {mid: (member(mid, False) if mid == member_id else m) for mid, m in group.members.items()}
        assert group.leader_id is None or group.leader_id in group.members or not group.members


def test_members_leaving_in_the_groups_order_move_the_leader_cursor_forward() -> None:
    group = ClassicGroup(group_id="g")
    for i in range(50):
        group.add(member(f"m{i:02}", False))
    for i in range(49):
        assert group.leader_id == f"m{i:02}"
        group.remove(f"m{i:02}")
        assert group._leader_scan_at == i  # (the next member found from where the last one stood)
    assert group.leader_id == "m49"
    group.remove("m49")
    assert group.leader_id is None and not group.members
