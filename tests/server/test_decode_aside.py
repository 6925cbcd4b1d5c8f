"""Large frames are decoded off the event loop (``network/connection.py``, ``DECODE_ASIDE_BYTES``) without
changing what a client sees: requests pipelined behind a large one on the same connection are handled after
it and answered in order, a large frame that does not decode closes the connection before anything behind it
is handled, and many large requests in a row are all answered. A large OffsetCommit's records are planned on
the decoding thread (``handlers/offsets._plan_commit``): its answers and offsets are those of a commit without a
plan, with partitions refused beside it and with the group refusing it; a large TxnOffsetCommit's pending
records likewise (``handlers/transactions._plan_txn_commit``), refused until the group is in the transaction,
materialised by its commit marker and rebuilt so after a restart. A leader's SyncGroup large enough to be
decoded aside (its assignments made there: ``handlers/groups._plan_sync``) hands every member its own."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from regroup.model.errors import ErrorCode
from regroup.network.connection import DECODE_ASIDE_BYTES
from tests.server.conftest import ServerProcess
from tests.server.wire import JOIN, SYNC, WireClient, create_topics, encode_request

MakeServer = Callable[..., ServerProcess]
OFFSET_COMMIT, OFFSET_FETCH, API_VERSIONS = 8, 9, 18
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
TOPIC, PARTITIONS = "aside", 6_000


def commit_fields(group: str, offset_of: Callable[[int], int]) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": TOPIC,
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": offset_of(p),
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in range(PARTITIONS)
                ],
            }
        ],
    }


def fetch_fields(group: str) -> dict[str, Any]:
    return {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": None}]}


def test_the_commit_frame_is_large_enough_to_be_decoded_aside() -> None:
    assert len(encode_request(OFFSET_COMMIT, 9, 1, "c", **commit_fields("g", lambda p: p))) >= DECODE_ASIDE_BYTES


def test_requests_behind_a_large_one_are_handled_after_it(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=60) as client:
        create_topics(client, {TOPIC: PARTITIONS})
        # pipelined without reading: small fetch, large commit, small fetch, large commit, small fetch
        client.send(OFFSET_FETCH, 9, **fetch_fields("order"), require_stable=False)
        client.send(OFFSET_COMMIT, 9, **commit_fields("order", lambda p: p + 1))
        client.send(OFFSET_FETCH, 9, **fetch_fields("order"), require_stable=False)
        client.send(OFFSET_COMMIT, 9, **commit_fields("order", lambda p: 2 * p + 7))
        client.send(OFFSET_FETCH, 9, **fetch_fields("order"), require_stable=False)
        answers = [client.receive() for _ in range(5)]

    def offsets(fetch: Any) -> dict[int, int]:
        (group,) = fetch.groups
        return {p.partition_index: p.committed_offset for t in group.topics for p in t.partitions}

    assert offsets(answers[0]) == {}
    for commit in (answers[1], answers[3]):
        (topic,) = commit.topics
        assert [p.error_code for p in topic.partitions] == [0] * PARTITIONS
    assert offsets(answers[2]) == {p: p + 1 for p in range(PARTITIONS)}
    assert offsets(answers[4]) == {p: 2 * p + 7 for p in range(PARTITIONS)}


def test_a_large_frame_that_does_not_decode_closes_before_what_follows(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    good = encode_request(OFFSET_COMMIT, 9, 1, "c", **commit_fields("bad", lambda p: p))
    # the same frame cut short inside its partitions array: its header is fine, its body is not
    body = bytearray(good[4 : 4 + DECODE_ASIDE_BYTES + 100])
    broken = len(body).to_bytes(4, "big") + bytes(body)
    with WireClient(server.port, timeout=30) as client:
        client.send(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        client.send_raw(broken)
        client.send(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        assert client.receive().error_code == 0  # the one in front is answered
        assert client.is_closed_by_server(timeout=10)
    with WireClient(server.port, timeout=30) as other:  # the server goes on; nothing of the broken commit landed
        answer = other.call(OFFSET_FETCH, 9, **fetch_fields("bad"), require_stable=False)
        (group,) = answer.groups
        assert [p for t in group.topics for p in t.partitions] == []


def test_many_large_requests_in_a_row_are_all_answered(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    with WireClient(server.port, timeout=60) as client:
        create_topics(client, {TOPIC: PARTITIONS})
        for round_ in range(20):
            client.send(OFFSET_COMMIT, 9, **commit_fields("many", lambda p, r=round_: p + r))
        for _ in range(20):
            (topic,) = client.receive().topics
            assert len(topic.partitions) == PARTITIONS
        answer = client.call(OFFSET_FETCH, 9, **fetch_fields("many"), require_stable=False)
        (group,) = answer.groups
        assert {p.partition_index: p.committed_offset for t in group.topics for p in t.partitions} == {
            p: p + 19 for p in range(PARTITIONS)
        }


def test_a_large_commit_planned_aside_commits_what_a_small_one_would(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    fields = commit_fields("mixed", lambda p: p + 3)
    small = {
        "name": "small",
        "partitions": [
            {"partition_index": p, "committed_offset": 10 + p, "committed_leader_epoch": 2, "committed_metadata": "m"}
            for p in range(5)  # 3 and 4 are beyond the topic's 3 partitions: the topic's plan is not used
        ],
    }
    unknown = {"name": "nosuch", "partitions": [dict(small["partitions"][0])]}
    fields["topics"] += [small, unknown]
    with WireClient(server.port, timeout=60) as client:
        create_topics(client, {TOPIC: PARTITIONS, "small": 3})
        answer = client.call(OFFSET_COMMIT, 9, **fields)
        codes = {t.name: [(p.partition_index, p.error_code) for p in t.partitions] for t in answer.topics}
        assert codes[TOPIC] == [(p, 0) for p in range(PARTITIONS)]
        assert sorted(codes["small"]) == [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3)]
        assert codes["nosuch"] == [(0, 3)]
        # a commit by a member the group does not have: refused on every partition as a small one is, nothing
        # written
        refused = dict(commit_fields("mixed", lambda p: 999), generation_id_or_member_epoch=5, member_id="m")
        (topic,) = client.call(OFFSET_COMMIT, 9, **refused).topics
        refused["topics"][0]["partitions"] = refused["topics"][0]["partitions"][:1]
        (one,) = client.call(OFFSET_COMMIT, 9, **refused).topics
        assert one.partitions[0].error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert {p.error_code for p in topic.partitions} == {ErrorCode.UNKNOWN_MEMBER_ID}
        fetched = client.call(OFFSET_FETCH, 9, **fetch_fields("mixed"), require_stable=False)
    server.kill()  # the records planned ahead (and encoded there) rebuild the same offsets
    server.restart()
    with WireClient(server.port, timeout=60) as client:
        refetched = client.call(OFFSET_FETCH, 9, **fetch_fields("mixed"), require_stable=False)
    assert refetched.groups == fetched.groups
    (group,) = fetched.groups
    offsets = {
        (t.name, p.partition_index): (p.committed_offset, p.metadata) for t in group.topics for p in t.partitions
    }
    expected = {(TOPIC, p): (p + 3, "") for p in range(PARTITIONS)}
    expected.update({("small", p): (10 + p, "m") for p in range(3)})
    assert offsets == expected


def test_a_large_transactional_commit_planned_aside_is_pending_until_its_marker(make_server: MakeServer) -> None:
    server = make_server("--fsync", "never")
    group, tid = "txg", "tx-aside"
    with WireClient(server.port, timeout=60) as client:
        create_topics(client, {TOPIC: PARTITIONS, "small": 3})
        init = client.call(INIT_PRODUCER_ID, 4, transactional_id=tid, transaction_timeout=60_000)
        pid, epoch = init.producer_id, init.producer_epoch
        ids = {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch}
        added = client.call(
            ADD_PARTITIONS,
            3,
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[{"name": "small", "partitions": [0]}],
        )
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        fields = commit_fields(group, lambda p: 2 * p + 1)
        fields["topics"].append(
            {
                "name": "small",  # partitions 3 and 4 are out of range: the topic's plan is narrowed
                "partitions": [
                    {
                        "partition_index": p,
                        "committed_offset": 7,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                    for p in range(5)
                ],
            }
        )
        txn_fields = dict(ids, group_id=group, generation_id=-1, member_id="", group_instance_id=None)
        txn_fields["topics"] = fields["topics"]

        def commit() -> dict[str, list[tuple[int, int]]]:
            answer = client.call(TXN_OFFSET_COMMIT, 4, **txn_fields)
            return {t.name: sorted((p.partition_index, p.error_code) for p in t.partitions) for t in answer.topics}

        refused = commit()  # the group is not in the transaction yet: every partition refused, nothing written
        assert {code for _, code in refused[TOPIC]} == {ErrorCode.TRANSACTION_ABORTABLE}
        assert refused["small"][3:] == [(3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), (4, 3)]
        assert client.call(ADD_OFFSETS, 3, **ids, group_id=group).error_code == 0
        codes = commit()
        assert codes[TOPIC] == [(p, 0) for p in range(PARTITIONS)]
        assert codes["small"] == [(0, 0), (1, 0), (2, 0), (3, 3), (4, 3)]
        named = {"groups": [{"group_id": group, "member_id": None, "member_epoch": -1, "topics": [
            {"name": "small", "partition_indexes": [0]}]}], "require_stable": True}  # fmt: skip

        def small_0() -> tuple[int, int]:
            (partition,) = client.call(OFFSET_FETCH, 9, **named).groups[0].topics[0].partitions
            return partition.error_code, partition.committed_offset

        assert small_0() == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
        plain = client.call(OFFSET_FETCH, 9, **fetch_fields(group), require_stable=False)
        assert plain.groups[0].topics == ()  # pending offsets are not shown until the transaction commits
        assert client.call(END_TXN, 3, **ids, committed=True).error_code == 0
        deadline = time.monotonic() + 30
        while small_0()[0] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # (the marker reaches the group coordinator after EndTxn answers)
        assert small_0() == (0, 7)
        fetched = client.call(OFFSET_FETCH, 9, **fetch_fields(group), require_stable=True)
    server.kill()
    server.restart()
    with WireClient(server.port, timeout=60) as client:
        refetched = client.call(OFFSET_FETCH, 9, **fetch_fields(group), require_stable=True)
    assert refetched.groups == fetched.groups
    (answer,) = fetched.groups
    offsets = {(t.name, p.partition_index): p.committed_offset for t in answer.topics for p in t.partitions}
    expected = {(TOPIC, p): 2 * p + 1 for p in range(PARTITIONS)}
    expected.update({("small", p): 7 for p in range(3)})
    assert offsets == expected


def test_a_leaders_sync_group_decoded_aside_hands_every_member_its_assignment(make_server: MakeServer) -> None:
    server = make_server()
    join = {
        "group_id": "aside-sync",
        "session_timeout": 30_000,
        "rebalance_timeout": 30_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
    }
    with (
        WireClient(server.port, client_id="a", timeout=30) as a,
        WireClient(server.port, client_id="b", timeout=30) as b,
    ):
        a_id = a.call(JOIN, 5, member_id="", **join).member_id
        assert a.call(JOIN, 5, member_id=a_id, **join).generation_id == 1
        b_id = b.call(JOIN, 5, member_id="", **join).member_id
        b.send(JOIN, 5, member_id=b_id, **join)  # parks until a rejoins
        rejoined = a.call(JOIN, 5, member_id=a_id, **join)
        assert (rejoined.error_code, rejoined.generation_id, rejoined.leader) == (0, 2, a_id)
        assert b.receive().generation_id == 2
        sync = {"group_id": "aside-sync", "generation_id": 2, "group_instance_id": None}
        b.send(SYNC, 3, member_id=b_id, assignments=[], **sync)  # parks until the leader's
        assigned = {a_id: bytes(range(256)) * 160, b_id: b"b" * 50_000}
        assert sum(map(len, assigned.values())) >= DECODE_ASIDE_BYTES
        leaders = [{"member_id": m, "assignment": data} for m, data in assigned.items()]
        answer = a.call(SYNC, 3, member_id=a_id, assignments=leaders, **sync)
        assert (answer.error_code, answer.assignment) == (0, assigned[a_id])
        answer = b.receive()
        assert (answer.error_code, answer.assignment) == (0, assigned[b_id])


def test_a_consumer_groups_assignments_are_read_where_the_sync_group_is_decoded() -> None:
    """``handlers/groups._plan_sync``: the assignments as the core takes them, and each one's partitions read
    there (kept by ``assigned_partitions``: the generation's ``group_assignment`` rows find them read); another
    protocol's opaque bytes are not read."""
    from types import SimpleNamespace

    from regroup.assignors.consumer_protocol import ConsumerProtocolAssignment, encode_assignment
    from regroup.client import embedded
    from regroup.server.handlers.groups import _plan_sync

    data = {f"m{i}": encode_assignment(ConsumerProtocolAssignment(partitions={"t": (i, i + 7)})) for i in range(3)}
    entries = [SimpleNamespace(member_id=m, assignment=d) for m, d in data.items()]
    embedded._ASSIGNED.clear()
    other = SimpleNamespace(protocol_type="other", assignments=entries)
    assert _plan_sync(None, 5, other) == tuple(data.items())  # type: ignore[arg-type]
    assert not embedded._ASSIGNED
    consumer = SimpleNamespace(protocol_type="consumer", assignments=entries)
    assert _plan_sync(None, 5, consumer) == tuple(data.items())  # type: ignore[arg-type]
    assert {d: embedded._ASSIGNED.get(d) for d in data.values()} == {
        d: frozenset({("t", i), ("t", i + 7)}) for i, d in enumerate(data.values())
    }
