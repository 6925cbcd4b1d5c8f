"""OffsetCommit/OffsetFetch across versions (v8+ batched fetch), and DescribeGroups/ListGroups/DeleteGroups."""

from __future__ import annotations

from tests.server.conftest import ServerProcess
from tests.server.test_groups import join_v9
from tests.server.wire import DELETE, DESCRIBE, LIST, OFFSET_COMMIT, OFFSET_FETCH, WireClient, create_topics

NONE, UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 0, 3, 12, 22, 25
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, MEMBER_ID_REQUIRED = 68, 69, 79


def commit(client: WireClient, version: int, group: str, offsets: dict[tuple[str, int], int], **extra: object):
    topics: dict[str, list[dict[str, object]]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            {"partition_index": partition, "committed_offset": offset, "committed_metadata": extra.get("metadata", "")}
        )
    fields = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None}
    fields |= {k: v for k, v in extra.items() if k != "metadata"}
    resp = client.call(
        OFFSET_COMMIT, version, topics=[{"name": t, "partitions": p} for t, p in topics.items()], **fields
    )
    return {(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}


def test_commit_and_fetch_across_versions(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"t": 2, "u": 2})
        assert commit(client, 2, "off", {("t", 0): 5, ("t", 1): 7}) == {("t", 0): NONE, ("t", 1): NONE}
        assert commit(client, 8, "off", {("u", 0): 11}) == {("u", 0): NONE}
        too_big = commit(client, 9, "off", {("u", 1): 1}, metadata="x" * 5000)
        assert too_big == {("u", 1): OFFSET_METADATA_TOO_LARGE}

        v1 = client.call(OFFSET_FETCH, 1, group_id="off", topics=[{"name": "t", "partition_indexes": [0, 1, 2]}])
        assert [(p.partition_index, p.committed_offset, p.error_code) for p in v1.topics[0].partitions] == [
            (0, 5, NONE),
            (1, 7, NONE),
            (2, -1, NONE),
        ]
        everything = client.call(OFFSET_FETCH, 7, group_id="off", topics=None, require_stable=True)
        assert everything.error_code == NONE
        assert {(t.name, p.partition_index): p.committed_offset for t in everything.topics for p in t.partitions} == {
            ("t", 0): 5,
            ("t", 1): 7,
            ("u", 0): 11,
        }
        batched = client.call(
            OFFSET_FETCH,
            9,
            require_stable=False,
            groups=[
                {
                    "group_id": "off",
                    "member_id": None,
                    "member_epoch": -1,
                    "topics": [{"name": "u", "partition_indexes": [0, 1]}],
                },
                {"group_id": "never-committed", "member_id": None, "member_epoch": -1, "topics": None},
            ],
        )
        by_group = {g.group_id: g for g in batched.groups}
        assert [(p.partition_index, p.committed_offset) for p in by_group["off"].topics[0].partitions] == [
            (0, 11),
            (1, -1),
        ]
        assert by_group["never-committed"].topics == () and by_group["never-committed"].error_code == NONE


def test_commit_errors_land_on_every_partition(server: ServerProcess) -> None:
    with WireClient(server.port, client_id="c") as client:
        create_topics(client, {"t": 2})
        join_v9(client, "busy")
        member_id = client.receive().member_id
        join_v9(client, "busy", member_id)
        assert client.receive().generation_id == 1
        # a member commit with a stale generation, and an anonymous commit to a non-empty group
        stale = commit(
            client, 8, "busy", {("t", 0): 1, ("t", 1): 1}, generation_id_or_member_epoch=7, member_id=member_id
        )
        assert stale == {("t", 0): ILLEGAL_GENERATION, ("t", 1): ILLEGAL_GENERATION}
        assert commit(client, 8, "busy", {("t", 0): 1}) == {("t", 0): UNKNOWN_MEMBER_ID}


def test_unknown_topics_and_partitions_are_refused_and_the_rest_committed(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"known": 2})
        mixed = {("known", 0): 3, ("known", 2): 4, ("known", -1): 4, ("missing", 0): 5, ("", 0): 6, ("known", 1): 7}
        for version in (2, 8, 9):
            assert commit(client, version, f"mixed-{version}", mixed) == {
                ("known", 0): NONE,
                ("known", 1): NONE,
                ("known", 2): UNKNOWN_TOPIC_OR_PARTITION,
                ("known", -1): UNKNOWN_TOPIC_OR_PARTITION,
                ("missing", 0): UNKNOWN_TOPIC_OR_PARTITION,
                ("", 0): UNKNOWN_TOPIC_OR_PARTITION,
            }
            fetched = client.call(OFFSET_FETCH, 7, group_id=f"mixed-{version}", topics=None, require_stable=True)
            committed = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics for p in t.partitions}
            assert committed == {("known", 0): 3, ("known", 1): 7}
        # nothing valid: the coordinator is not asked, so neither the group nor a group error appears
        join_v9(client, "refused-only")
        member_id = client.receive().member_id
        join_v9(client, "refused-only", member_id)
        assert client.receive().generation_id == 1
        stale = commit(client, 8, "refused-only", {("missing", 0): 1}, generation_id_or_member_epoch=9, member_id="x")
        assert stale == {("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert commit(client, 8, "never-created", {("missing", 0): 1}) == {("missing", 0): UNKNOWN_TOPIC_OR_PARTITION}
        listed = {g.group_id for g in client.call(LIST, 5, states_filter=[], types_filter=[]).groups}
        assert "never-created" not in listed


def test_list_describe_and_delete_groups(server: ServerProcess) -> None:
    with WireClient(server.port, client_id="admin") as client:
        create_topics(client, {"t": 2})
        commit(client, 8, "simple-a", {("t", 0): 1})
        join_v9(client, "active-b")
        member_id = client.receive().member_id
        join_v9(client, "active-b", member_id)
        assert client.receive().error_code == NONE  # CompletingRebalance until a SyncGroup

        listed = {g.group_id: g for g in client.call(LIST, 5, states_filter=[], types_filter=[]).groups}
        assert (listed["simple-a"].group_state, listed["simple-a"].protocol_type, listed["simple-a"].group_type) == (
            "Empty",
            "",
            "classic",
        )
        assert (listed["active-b"].group_state, listed["active-b"].protocol_type) == ("CompletingRebalance", "consumer")
        assert {g.group_id for g in client.call(LIST, 0).groups} >= {"simple-a", "active-b"}
        empty_only = client.call(LIST, 4, states_filter=[" EMPTY "]).groups
        assert "simple-a" in {g.group_id for g in empty_only} and "active-b" not in {g.group_id for g in empty_only}
        assert client.call(LIST, 5, states_filter=[], types_filter=["consumer"]).groups == ()

        described = client.call(DESCRIBE, 0, groups=["active-b", "no-such-group"]).groups
        assert [(g.group_id, g.group_state) for g in described] == [
            ("active-b", "CompletingRebalance"),
            ("no-such-group", "Dead"),
        ]
        assert [m.member_id for m in described[0].members] == [member_id]
        assert described[0].members[0].member_metadata == b""  # only Stable groups show the metadata

        deleted = client.call(DELETE, 2, groups_names=["simple-a", "active-b", "no-such-group"])
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            ("simple-a", NONE),
            ("active-b", NON_EMPTY_GROUP),
            ("no-such-group", GROUP_ID_NOT_FOUND),
        ]
        gone = client.call(OFFSET_FETCH, 5, group_id="simple-a", topics=None)
        assert gone.topics == ()
        assert (
            client.call(DESCRIBE, 5, groups=["simple-a"], include_authorized_operations=False).groups[0].group_state
            == "Dead"
        )


def test_a_delete_groups_of_more_groups_than_one_core_call_takes(server: ServerProcess) -> None:
    """1,100 groups (three of the handler's chunks of 500), unknown names among them and a group named twice
    across a chunk boundary: every group deleted, each answered in the request's order, the twice-named one alike
    both times."""
    from regroup.server.handlers.admin import DELETE_GROUPS_CHUNK

    groups = [f"bulk-{i:04d}" for i in range(1_100)]
    assert len(groups) > 2 * DELETE_GROUPS_CHUNK
    with WireClient(server.port, client_id="admin") as client:
        create_topics(client, {"t": 1})
        for group in groups:
            assert commit(client, 8, group, {("t", 0): 1}) == {("t", 0): NONE}
        named = [*groups[:600], "no-such-1", groups[0], *groups[600:], "no-such-2"]
        deleted = client.call(DELETE, 2, groups_names=named)
        expected = [(g, GROUP_ID_NOT_FOUND if g.startswith("no-such") else NONE) for g in named]
        assert [(r.group_id, r.error_code) for r in deleted.results] == expected
        left = {g.group_id for g in client.call(LIST, 5, states_filter=[], types_filter=[]).groups}
        assert not left & set(groups)
