"""ConsumerGroupHeartbeat (v0-1) and ConsumerGroupDescribe (v0-1) over the wire: the advertised versions, a
join that gets partitions of the topic ids Metadata reports, Kafka's errors with their messages, topics
created later reaching the coordinator's image, the group's type in ListGroups/DescribeGroups, member
epochs checked by OffsetCommit/OffsetFetch, and bad input answered with an error (never a crash)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ServerProcess, assert_clean_log
from tests.server.test_groups import SUB
from tests.server.wire import (
    API_VERSIONS,
    DESCRIBE,
    JOIN,
    LIST,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    WireClient,
    create_topics,
)

METADATA, DELETE_TOPICS, HEARTBEAT_848, DESCRIBE_848 = 3, 20, 68, 69
NONE, INVALID_GROUP_ID, INVALID_REQUEST, GROUP_ID_NOT_FOUND = 0, 24, 42, 69
INVALID_REGULAR_EXPRESSION = 128
FENCED_MEMBER_EPOCH, UNSUPPORTED_ASSIGNOR, STALE_MEMBER_EPOCH = 110, 112, 113
INT32_MIN = -(2**31)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("regroup-kip848")
    proc = ServerProcess(base / "data", base / "server.log", ["--consumer-heartbeat-interval-ms", "700"])
    proc.start()
    try:
        yield proc
    finally:
        proc.kill()
    assert_clean_log(proc)


def topic_ids(client: WireClient, *names: str) -> dict[str, uuid.UUID]:
    resp = client.call(
        METADATA,
        12,
        topics=[{"name": n, "topic_id": None} for n in names],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    return {t.name: t.topic_id for t in resp.topics}


def heartbeat(client: WireClient, version: int = 1, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "group_id": "g",
        "member_id": "",
        "member_epoch": 0,
        "rebalance_timeout": 30_000,
        "subscribed_topic_names": None,
        "topic_partitions": None,
    }
    values.update(fields)
    return client.call(HEARTBEAT_848, version, **values)


def owned(resp: Any) -> dict[uuid.UUID, list[int]]:
    assert resp.assignment is not None
    return {t.topic_id: sorted(t.partitions) for t in resp.assignment.topic_partitions}


def test_api_versions_advertises_exactly_what_is_served(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        resp = client.call(API_VERSIONS, 3, client_software_name="regroup-tests", client_software_version="1")
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised[HEARTBEAT_848] == (0, 1)
    assert advertised[DESCRIBE_848] == (0, 1)


def test_join_heartbeat_describe_and_leave(server: ServerProcess) -> None:
    with WireClient(server.port, client_id="c1") as client:
        create_topics(client, {"k1": 3})
        ids = topic_ids(client, "k1")
        join = heartbeat(client, group_id="j", member_id="m-1", subscribed_topic_names=["k1"], topic_partitions=[])
        assert (join.error_code, join.error_message, join.member_id) == (NONE, None, "m-1")
        assert join.member_epoch == 1 and join.heartbeat_interval.total_seconds() == 0.7
        assert owned(join) == {ids["k1"]: [0, 1, 2]}

        again = heartbeat(client, group_id="j", member_id="m-1", member_epoch=1)
        assert (again.error_code, again.member_epoch, again.assignment) == (NONE, 1, None)

        described = client.call(DESCRIBE_848, 0, group_ids=["j", "nope"], include_authorized_operations=False)
        group, missing = described.groups
        assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (
            NONE,
            "Stable",
            1,
            1,
        )
        assert group.assignor_name == "uniform" and group.authorized_operations == INT32_MIN
        (member,) = group.members
        assert (member.member_id, member.member_epoch, member.client_id) == ("m-1", 1, "c1")
        assert member.client_host == "/127.0.0.1" and member.subscribed_topic_names == ("k1",)
        rows = [(t.topic_id, t.topic_name, sorted(t.partitions)) for t in member.assignment.topic_partitions]
        assert rows == [(ids["k1"], "k1", [0, 1, 2])]
        assert member.target_assignment == member.assignment
        assert (missing.error_code, missing.error_message) == (GROUP_ID_NOT_FOUND, "Group nope not found.")
        with_ops = client.call(DESCRIBE_848, 0, group_ids=["j"], include_authorized_operations=True)
        assert with_ops.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)

        # the group is a consumer group for the classic APIs too
        listed = client.call(LIST, 5, states_filter=[], types_filter=["consumer"])
        assert ("j", "consumer", "Stable") in {(g.group_id, g.group_type, g.group_state) for g in listed.groups}
        classic = client.call(DESCRIBE, 5, groups=["j"], include_authorized_operations=False)
        assert classic.groups[0].group_state == "Dead"
        newest = client.call(DESCRIBE, 6, groups=["j", "nope"], include_authorized_operations=False)
        assert [(g.error_code, g.error_message) for g in newest.groups] == [
            (GROUP_ID_NOT_FOUND, "Group j is not a classic group."),
            (GROUP_ID_NOT_FOUND, "Group nope not found."),
        ]

        left = heartbeat(client, group_id="j", member_id="m-1", member_epoch=-1)
        assert (left.error_code, left.member_epoch) == (NONE, -1)
        empty = client.call(DESCRIBE_848, 0, group_ids=["j"], include_authorized_operations=False)
        assert (empty.groups[0].group_state, empty.groups[0].members) == ("Empty", ())


def test_v0_gets_a_member_id_from_the_coordinator_and_v1_must_bring_one(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"k2": 1})
        v0 = heartbeat(client, 0, group_id="v0", subscribed_topic_names=["k2"], topic_partitions=[])
        assert v0.error_code == NONE and v0.member_id
        v1 = heartbeat(client, 1, group_id="v1", subscribed_topic_names=["k2"], topic_partitions=[])
        assert (v1.error_code, v1.error_message) == (INVALID_REQUEST, "MemberId can't be empty.")


def test_errors_carry_kafkas_messages(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"k3": 2})
        bad_assignor = heartbeat(
            client, group_id="e", member_id="a", subscribed_topic_names=["k3"], topic_partitions=[], server_assignor="x"
        )
        assert bad_assignor.error_code == UNSUPPORTED_ASSIGNOR
        assert bad_assignor.error_message.startswith("ServerAssignor x is not supported")
        no_timeout = heartbeat(
            client,
            group_id="e",
            member_id="a",
            subscribed_topic_names=["k3"],
            topic_partitions=[],
            rebalance_timeout=-1,
        )
        assert (no_timeout.error_code, no_timeout.error_message) == (
            INVALID_REQUEST,
            "RebalanceTimeoutMs must be provided in first request.",
        )
        unknown_group = heartbeat(client, group_id="nobody", member_id="a", member_epoch=3)
        assert unknown_group.error_code == GROUP_ID_NOT_FOUND and unknown_group.error_message
        joined = heartbeat(client, group_id="e", member_id="a", subscribed_topic_names=["k3"], topic_partitions=[])
        fenced = heartbeat(client, group_id="e", member_id="a", member_epoch=joined.member_epoch + 5)
        assert fenced.error_code == FENCED_MEMBER_EPOCH and "greater member epoch" in fenced.error_message
        bad_epoch = heartbeat(client, group_id="e", member_id="a", member_epoch=-7)
        assert bad_epoch.error_code == INVALID_REQUEST
        # a null topic id in the owned partitions is not a crash
        odd = heartbeat(
            client, group_id="e", member_id="a", member_epoch=joined.member_epoch,
            topic_partitions=[{"topic_id": None, "partitions": [0]}],
        )  # fmt: skip
        assert odd.error_code in (NONE, FENCED_MEMBER_EPOCH)


def test_topics_created_later_reach_the_coordinator(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"late-a": 1})
        join = heartbeat(
            client, group_id="late", member_id="m", subscribed_topic_names=["late-a", "late-b"], topic_partitions=[]
        )
        assert join.error_code == NONE
        ids = topic_ids(client, "late-a", "late-b")  # Metadata auto-creates late-b (1 partition)
        assert owned(join) == {ids["late-a"]: [0]}

        def poll() -> dict[uuid.UUID, list[int]] | None:
            resp = heartbeat(client, group_id="late", member_id="m", member_epoch=join.member_epoch)
            return owned(resp) if resp.assignment is not None else None

        got = None
        for _ in range(5):
            got = poll() or got
            if got is not None:
                break
        assert got == {ids["late-a"]: [0], ids["late-b"]: [0]}


def test_offset_commit_and_fetch_check_member_epochs(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"k4": 1})
        join = heartbeat(client, group_id="o", member_id="m", subscribed_topic_names=["k4"], topic_partitions=[])
        epoch = join.member_epoch

        def commit(member_epoch: int) -> int:
            resp = client.call(
                OFFSET_COMMIT,
                9,
                group_id="o",
                generation_id_or_member_epoch=member_epoch,
                member_id="m",
                group_instance_id=None,
                topics=[
                    {
                        "name": "k4",
                        "partitions": [{"partition_index": 0, "committed_offset": 4, "committed_metadata": ""}],
                    }
                ],
            )
            return int(resp.topics[0].partitions[0].error_code)

        assert commit(epoch + 1) == STALE_MEMBER_EPOCH
        assert commit(epoch) == NONE

        def fetch(member_epoch: int) -> int:
            resp = client.call(
                OFFSET_FETCH,
                9,
                groups=[{"group_id": "o", "member_id": "m", "member_epoch": member_epoch, "topics": None}],
                require_stable=False,
            )
            return int(resp.groups[0].error_code)

        assert fetch(epoch + 1) == STALE_MEMBER_EPOCH
        assert fetch(epoch) == NONE


def test_serve_flags_are_validated(tmp_path: Path) -> None:
    import subprocess
    import sys

    base = [sys.executable, "-m", "regroup", "serve", "--port", "0", "--data-dir", str(tmp_path)]
    for extra, words in (
        (["--consumer-heartbeat-interval-ms", "5000", "--consumer-session-timeout-ms", "5000"], "must be less"),
        (["--consumer-assignors", "uniform,sticky"], "--consumer-assignors"),
        (["--migration-policy", "sideways"], "invalid choice"),
        (["--consumer-heartbeat-interval-ms", "0"], "outside"),
        (["--consumer-assignment-interval-ms", "20000"], "must be within"),
        (["--consumer-assignment-interval-ms", "-1"], "outside"),
        (["--consumer-min-assignment-interval-ms", "500"], "must be within"),
        (["--share-assignment-interval-ms", "16000"], "must be within"),
    ):
        done = subprocess.run(base + extra, capture_output=True, text=True, timeout=30)
        assert done.returncode == 2, (extra, done.stderr)
        assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_odd_input_is_answered_with_an_error_or_ignored(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"k5": 2})
        join = heartbeat(client, group_id="odd", member_id="m", subscribed_topic_names=["k5", ""], topic_partitions=[])
        assert join.error_code == NONE
        epoch = join.member_epoch
        for partitions in ([-1, 7, 2**31 - 1], [0, 0, 0], []):
            resp = heartbeat(
                client,
                group_id="odd",
                member_id="m",
                member_epoch=epoch,
                topic_partitions=[{"topic_id": uuid.uuid4(), "partitions": partitions}],
            )
            assert resp.error_code in (NONE, FENCED_MEMBER_EPOCH), resp
        regex = heartbeat(
            client, group_id="odd2", member_id="r", subscribed_topic_regex="(unclosed", topic_partitions=[]
        )
        assert regex.error_code == INVALID_REGULAR_EXPRESSION and regex.error_message
        empty_group = heartbeat(client, group_id="", member_id="x", subscribed_topic_names=["k5"], topic_partitions=[])
        assert (empty_group.error_code, empty_group.error_message) == (INVALID_REQUEST, "GroupId can't be empty.")
        described = client.call(DESCRIBE_848, 0, group_ids=[""], include_authorized_operations=False)
        assert described.groups[0].error_code == INVALID_GROUP_ID
        # the connection is still served
        assert heartbeat(client, group_id="odd", member_id="m", member_epoch=-1).error_code in (NONE, 25)


def test_deleted_topics_leave_the_assignment(server: ServerProcess) -> None:
    with WireClient(server.port) as client:
        create_topics(client, {"gone-a": 1, "gone-b": 2})
        ids = topic_ids(client, "gone-a", "gone-b")
        join = heartbeat(
            client, group_id="gone", member_id="m", subscribed_topic_names=["gone-a", "gone-b"], topic_partitions=[]
        )
        assert owned(join) == {ids["gone-a"]: [0], ids["gone-b"]: [0, 1]}
        deleted = client.call(DELETE_TOPICS, 6, topics=[{"name": "gone-b", "topic_id": None}], timeout=5000)
        assert deleted.responses[0].error_code == NONE
        owned_now = [{"topic_id": t, "partitions": ps} for t, ps in owned(join).items()]
        resp = heartbeat(
            client, group_id="gone", member_id="m", member_epoch=join.member_epoch, topic_partitions=owned_now
        )
        assert resp.error_code == NONE and owned(resp) == {ids["gone-a"]: [0]}


def join_fields(member_id: str, group: str = "mig-group") -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 10_000,
        "rebalance_timeout": 10_000,
        "member_id": member_id,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": SUB}],
        "reason": None,
    }


def test_migration_policy_flag_reaches_the_coordinator(make_server: Callable[..., ServerProcess]) -> None:
    server = make_server("--migration-policy", "disabled")
    with WireClient(server.port) as client:
        create_topics(client, {"mig": 1})
        client.send(JOIN, 9, **join_fields(""))
        required = client.receive()
        client.send(JOIN, 9, **join_fields(required.member_id))
        assert client.receive().error_code == NONE  # a classic group with one member
        resp = heartbeat(
            client, group_id="mig-group", member_id="m", subscribed_topic_names=["mig"], topic_partitions=[]
        )
        assert resp.error_code == GROUP_ID_NOT_FOUND and resp.error_message, resp


def test_describe_v1_tells_classic_members_from_consumer_members(server: ServerProcess) -> None:
    with WireClient(server.port, client_id="old") as old, WireClient(server.port, client_id="new") as new:
        create_topics(old, {"t": 1})  # the topic the classic member's subscription names
        old.send(JOIN, 9, **join_fields("", "mixed"))
        required = old.receive()
        old.send(JOIN, 9, **join_fields(required.member_id, "mixed"))
        assert old.receive().error_code == NONE
        joined = heartbeat(new, group_id="mixed", member_id="n", subscribed_topic_names=["t"], topic_partitions=[])
        assert joined.error_code == NONE  # the classic group became a consumer group
        described = new.call(DESCRIBE_848, 1, group_ids=["mixed"], include_authorized_operations=False)
        types = {m.client_id: m.member_type for m in described.groups[0].members}
        assert types == {"old": 0, "new": 1}


def test_an_assignment_interval_holds_the_next_target_back_over_the_wire(tmp_path: Path) -> None:
    """``--consumer-assignment-interval-ms`` (KIP-1263): a member joining within the interval of the group's
    last target is answered at once, at that target's epoch and with nothing; the target that gives it
    partitions is computed when the interval ends, without a heartbeat asking, and reaches it at its next one."""
    import time

    interval_ms = 1_500
    proc = ServerProcess(tmp_path / "data", tmp_path / "server.log", ["--consumer-assignment-interval-ms", "1500"])
    proc.start()
    try:
        with WireClient(proc.port) as client:
            create_topics(client, {"paced": 4})
            join = {"group_id": "paced", "subscribed_topic_names": ["paced"], "topic_partitions": []}
            first = heartbeat(client, member_id="m-1", **join)
            started = time.monotonic()
            assert (first.error_code, first.member_epoch) == (NONE, 1)
            assert sum(len(ps) for ps in owned(first).values()) == 4
            second = heartbeat(client, member_id="m-2", **join)
            assert (second.error_code, second.member_epoch) == (NONE, 1)
            assert owned(second) == {}
            described = client.call(DESCRIBE_848, 1, group_ids=["paced"], include_authorized_operations=False)
            group = described.groups[0]
            assert (group.group_epoch, group.assignment_epoch) == (2, 1)
            time.sleep(max(0.0, started + interval_ms / 1000 + 0.3 - time.monotonic()))
            described = client.call(DESCRIBE_848, 1, group_ids=["paced"], include_authorized_operations=False)
            assert described.groups[0].assignment_epoch == 2  # (computed when the interval ended)
            again = heartbeat(client, group_id="paced", member_id="m-2", member_epoch=1)
            assert (again.error_code, again.member_epoch) == (NONE, 2)
            # (its partitions come once m-1, told to give up half of its four, has done so)
            shrunk = heartbeat(client, group_id="paced", member_id="m-1", member_epoch=1)
            assert shrunk.error_code == NONE and sum(len(ps) for ps in owned(shrunk).values()) == 2
    finally:
        proc.kill()
    assert_clean_log(proc)
