"""The metrics' views of the groups (``GroupCoordinator.group_counts``, ``share_group_ids``): read from the core's
state directly, they count and name exactly what ListGroups lists, whatever the mix of group types and states."""

from __future__ import annotations

import uuid
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.cluster import ClusterImage, TopicImage
from regroup.protocol.admin import ListGroupsRequest
from regroup.protocol.share import ShareGroupHeartbeatRequest
from tests.server.test_inspection_stall import _classic, _consumer


def _listed(c: GroupCoordinator, types: tuple[str, ...] = ()) -> list[tuple[str, str, str, str]]:
    response = c.list_groups(ListGroupsRequest(types=types), "list", 50).response_for("list")
    return [(g.group_id, g.state, g.group_type, g.protocol_type) for g in response.groups]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["classic-1", "classic-0", "consumer", "share"]), max_size=12))
def test_the_counts_and_share_ids_are_what_list_groups_lists(kinds: list[str]) -> None:
    records = []
    for i, kind in enumerate(kinds):
        if kind.startswith("classic"):
            records.append(_classic(f"g{i}", int(kind[-1])))
        elif kind == "consumer":
            records += _consumer(f"g{i}", 1 + i % 3)
    c = GroupCoordinator.from_records(records, 0)
    c.update_metadata(ClusterImage.of([TopicImage(topic_id=uuid.UUID(int=1), name="orders", partitions=3)]), 0)
    for i, kind in enumerate(kinds):
        if kind == "share":
            request = ShareGroupHeartbeatRequest(
                group_id=f"g{i}", member_id=f"m{i}", member_epoch=0, subscribed_topic_names=("orders",)
            )
            c.share_group_heartbeat(request, ("share", i), 10)
    listed = _listed(c)
    assert c.group_counts() == Counter((state, kind, protocol) for _, state, kind, protocol in listed)
    assert c.share_group_ids() == [group_id for group_id, *_ in _listed(c, ("share",))]
