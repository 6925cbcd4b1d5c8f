"""The classic group's cached protocol intersection (``candidate_protocols``) against a fresh one, after
any sequence of joins, leaves, protocol changes and member replacements."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupMember

NAMES = ("range", "roundrobin", "sticky", "cooperative-sticky")
protocol_lists = st.lists(st.sampled_from(NAMES), unique=True, max_size=4).map(
    lambda names: tuple((name, name.encode()) for name in names)
)
operations = st.lists(
    st.tuples(st.sampled_from(("add", "remove", "change", "replace")), st.integers(0, 5), protocol_lists),
    max_size=30,
)


def member(member_id: str, protocols: tuple[tuple[str, bytes], ...]) -> ClassicGroupMember:
    return ClassicGroupMember(
        member_id=member_id,
        group_instance_id=None,
        client_id="c",
        client_host="h",
        rebalance_timeout_ms=1000,
        session_timeout_ms=1000,
        protocol_type="consumer",
        protocols=protocols,
    )


def fresh(group: ClassicGroup, extra: tuple[str, ...] | None) -> set[str]:
    sets = [{name for name, _ in m.protocols} for m in group.members.values()]
    if extra is not None:
        sets.append(set(extra))
    return set.intersection(*sets) if sets else set()


@settings(max_examples=300, deadline=None)
@given(operations, st.none() | st.lists(st.sampled_from(NAMES), max_size=3).map(tuple))
def test_cached_candidate_protocols_match_a_fresh_intersection(
    ops: list[tuple[str, int, tuple[tuple[str, bytes], ...]]], extra: tuple[str, ...] | None
) -> None:
    group = ClassicGroup(group_id="g")
    for op, index, protocols in ops:
        member_id = f"m{index}"
        if op == "add":
            group.add(member(member_id, protocols))
        elif op == "remove":
            group.remove(member_id)
        elif op == "change" and member_id in group.members:
            group.set_protocols(group.members[member_id], protocols)  # a known member rejoining
        elif op == "replace":  # a static member's id replaced: a new members dict
            group.members = {**group.members, member_id: member(member_id, protocols)}
        assert group.candidate_protocols(extra) == fresh(group, extra)
        assert group.candidate_protocols() == fresh(group, None)
