"""KIP-932 share groups over the Kafka wire, against real ``regroup serve`` processes: the advertised versions,
ShareGroupHeartbeat (joining, Kafka's validation errors and messages, epochs, leaving, group ids of another
type), ShareGroupDescribe and the classic group APIs on a share group, share sessions of ShareFetch and
ShareAcknowledge (acquiring, acknowledging, the owner check, closing and releasing), the offsets admin APIs and
``--no-share-groups``. Their ACLs are in the authorization matrix (``test_authorization_matrix.py``).

Expectations are Kafka 4.2's (``docs/share-groups.md``), with regroup's documented difference that a new
member's partitions are initialized (and assigned) by its first heartbeat, where Kafka assigns them one
heartbeat later; MaxRecords is used only where Kafka's soft bound gives the same records (whole batches).
Every server's log is checked for tracebacks and errors at its end."""

from __future__ import annotations

import datetime
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode as E

from tests.server.conftest import ServerProcess, served
from tests.server.test_transactions_wire import add as txn_add
from tests.server.test_transactions_wire import end as txn_end
from tests.server.test_transactions_wire import init as txn_init
from tests.server.test_transactions_wire import latest as txn_latest
from tests.server.test_transactions_wire import txn_batch
from tests.server.wire import API_VERSIONS, DELETE, DESCRIBE, JOIN, LIST, WireClient, create_topics
from tests.server_data.batches import make_batch

PRODUCE, METADATA, DESCRIBE_CONFIGS, SASL_HANDSHAKE, SASL_AUTHENTICATE, INCREMENTAL_ALTER = 0, 3, 32, 17, 36, 44
CG_HEARTBEAT = 68
SHARE_HEARTBEAT, SHARE_DESCRIBE, SHARE_FETCH, SHARE_ACK = 76, 77, 78, 79
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
SHARE_API_VERSIONS = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}
GROUP_RESOURCE = 32
#: the attribute bit of a control batch (a transaction marker)
CONTROL_BATCH = 0x20
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4
#: the broker's record lock in these tests (not Kafka's 30 s default, so the response's value is the server's)
LOCK_MS = 45_000
ZERO_UUID = uuid.UUID(int=0)
MS = datetime.timedelta(milliseconds=1)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def member_id() -> str:
    """A member id as the Java client makes it (a UUID as text: 36 characters)."""
    return str(uuid.uuid4())


# ------------------------------------------------------------------------------------------------- servers
@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One server for the share-group tests that need no security (tests use their own groups and topics)."""
    with served(tmp_path_factory.mktemp("share"), "--share-record-lock-duration-ms", str(LOCK_MS)) as proc:
        yield proc


@pytest.fixture
def client(server: ServerProcess) -> Iterator[WireClient]:
    with WireClient(server.port) as c:
        yield c


# ------------------------------------------------------------------------------------------------- helpers
def topic_id(client: WireClient, name: str) -> uuid.UUID:
    response = client.call(
        METADATA,
        12,
        topics=[{"name": name, "topic_id": ZERO_UUID}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = response.topics
    assert topic.error_code == E.none and topic.topic_id not in (None, ZERO_UUID), topic
    found: uuid.UUID = topic.topic_id
    return found


def new_topic(client: WireClient, name: str, partitions: int = 1) -> uuid.UUID:
    create_topics(client, {name: partitions})
    return topic_id(client, name)


def produce(client: WireClient, topic: str, batch: bytes) -> int:
    """Append ``batch`` to partition 0 of ``topic`` (acks=all); its base offset."""
    response = client.call(
        PRODUCE,
        9,
        transactional_id=None,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    )
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == E.none, partition
    return int(partition.base_offset)


def set_group_config(client: WireClient, group: str, key: str, value: str) -> None:
    response = client.call(
        INCREMENTAL_ALTER,
        1,
        resources=[
            {
                "resource_type": GROUP_RESOURCE,
                "resource_name": group,
                "configs": [{"name": key, "config_operation": 0, "value": value}],
            }
        ],
        validate_only=False,
    )
    assert response.responses[0].error_code == E.none, response


def heartbeat(
    client: WireClient, group: str, member: str, epoch: int, topics: list[str] | None = None, rack: str | None = None
) -> Any:
    return client.call(
        SHARE_HEARTBEAT,
        1,
        group_id=group,
        member_id=member,
        member_epoch=epoch,
        rack_id=rack,
        subscribed_topic_names=topics,
    )


def assignment(response: Any) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {t.topic_id: sorted(t.partitions) for t in response.assignment.topic_partitions}


def batches(*ranges: tuple[int, int, int]) -> list[dict[str, Any]]:
    """Acknowledgement batches from (first offset, last offset, type)."""
    return [{"first_offset": f, "last_offset": last, "acknowledge_types": [t]} for f, last, t in ranges]


def share_fetch(
    client: WireClient,
    group: str,
    member: str,
    epoch: int,
    partitions: dict[tuple[uuid.UUID, int], list[dict[str, Any]]],
    *,
    max_wait_ms: int = 0,
    max_records: int = 500,
    version: int = 1,
    max_bytes: int = 1 << 20,
) -> Any:
    """ShareFetch naming ``partitions`` (with their acknowledgement batches)."""
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (tid, index), acks in partitions.items():
        by_topic.setdefault(tid, []).append({"partition_index": index, "acknowledgement_batches": acks})
    return client.call(
        SHARE_FETCH,
        version,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        max_wait=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        max_records=max_records,
        batch_size=max_records,
        topics=[{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
        forgotten_topics_data=[],
    )


def share_ack(
    client: WireClient,
    group: str,
    member: str,
    epoch: int,
    partitions: dict[tuple[uuid.UUID, int], list[dict[str, Any]]],
    *,
    version: int = 1,
) -> Any:
    by_topic: dict[uuid.UUID, list[dict[str, Any]]] = {}
    for (tid, index), acks in partitions.items():
        by_topic.setdefault(tid, []).append({"partition_index": index, "acknowledgement_batches": acks})
    return client.call(
        SHARE_ACK,
        version,
        group_id=group,
        member_id=member,
        share_session_epoch=epoch,
        topics=[{"topic_id": t, "partitions": ps} for t, ps in by_topic.items()],
    )


def fetched(response: Any) -> dict[tuple[uuid.UUID, int], Any]:
    """The partitions of a successful ShareFetch response, by (topic id, partition)."""
    assert response.error_code == E.none, response
    return {(t.topic_id, p.partition_index): p for t in response.responses for p in t.partitions}


def ranges(partition: Any) -> list[tuple[int, int, int]]:
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in partition.acquired_records]


def acked(response: Any) -> dict[tuple[uuid.UUID, int], E]:
    """Each partition's error of a ShareAcknowledge whose top level succeeded."""
    assert response.error_code == E.none, response
    return {(t.topic_id, p.partition_index): p.error_code for t in response.responses for p in t.partitions}


def described(client: WireClient, group: str) -> Any:
    (found,) = client.call(SHARE_DESCRIBE, 1, group_ids=[group], include_authorized_operations=False).groups
    return found


def listed(client: WireClient, types: list[str]) -> dict[str, Any]:
    response = client.call(LIST, 5, states_filter=[], types_filter=types)
    assert response.error_code == E.none
    return {g.group_id: g for g in response.groups}


def share_offsets(
    client: WireClient, group: str, topics: dict[str, list[int]] | None = None
) -> tuple[E, dict[tuple[str, int], tuple[int, int, E]]]:
    """DescribeShareGroupOffsets v1: the group's error and (topic, partition) -> (start offset, lag, error)."""
    wanted = None if topics is None else [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]
    (found,) = client.call(DESCRIBE_OFFSETS, 1, groups=[{"group_id": group, "topics": wanted}]).groups
    assert found.group_id == group
    rows = {
        (t.topic_name, p.partition_index): (p.start_offset, p.lag, p.error_code)
        for t in found.topics
        for p in t.partitions
    }
    return found.error_code, rows


def alter_offsets(client: WireClient, group: str, topic: str, starts: dict[int, int]) -> Any:
    partitions = [{"partition_index": p, "start_offset": o} for p, o in starts.items()]
    return client.call(ALTER_OFFSETS, 0, group_id=group, topics=[{"topic_name": topic, "partitions": partitions}])


def delete_offsets(client: WireClient, group: str, topics: list[str]) -> Any:
    return client.call(DELETE_OFFSETS, 0, group_id=group, topics=[{"topic_name": t} for t in topics])


def records_in(data: bytes) -> list[tuple[int, int]]:
    """(base offset, record count) of each record batch in ``data``."""
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((base, struct.unpack_from(">i", data, pos + 57)[0]))
        pos += 12 + length
    return out


# ---------------------------------------------------------------------------------------------- ApiVersions
def test_api_versions_list_the_share_apis(client: WireClient) -> None:
    """ApiVersions advertises Kafka 4.2's versions of the seven share-group APIs."""
    response = client.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    assert response.error_code == E.none
    versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: versions.get(key) for key in SHARE_API_VERSIONS} == SHARE_API_VERSIONS


# --------------------------------------------------------------------------------------- ShareGroupHeartbeat
def test_join_gets_epoch_one_and_every_partition(client: WireClient) -> None:
    """A first member (epoch 0) gets member epoch 1, the heartbeat interval and all partitions of its topic; a
    heartbeat at its epoch with nothing changed carries no assignment."""
    group, topic, member = unique("hb"), unique("hb-t"), member_id()
    tid = new_topic(client, topic, 3)
    joined = heartbeat(client, group, member, 0, [topic])
    assert (joined.error_code, joined.error_message, joined.member_id, joined.member_epoch) == (
        E.none,
        None,
        member,
        1,
    )
    assert joined.heartbeat_interval == 5000 * MS
    assert assignment(joined) == {tid: [0, 1, 2]}
    again = heartbeat(client, group, member, 1)
    assert (again.error_code, again.member_epoch, again.assignment) == (E.none, 1, None)


@pytest.mark.parametrize(
    ("member", "epoch", "topics", "code", "message"),
    [
        # Kafka's KafkaApis.isMemberIdValid: empty or longer than 36 characters
        ("", 0, ["t"], E.invalid_request, "Invalid member id in the request."),
        ("m" * 37, 0, ["t"], E.invalid_request, "Invalid member id in the request."),
        # the coordinator's validation: a blank (whitespace) member id
        ("   ", 0, ["t"], E.invalid_request, "MemberId can't be empty."),
        ("m-1", 0, None, E.invalid_request, "SubscribedTopicNames must be set in first request."),
        ("m-1", 0, [], E.invalid_request, "SubscribedTopicNames must be set in first request."),
        ("m-1", -2, ["t"], E.invalid_request, "MemberEpoch is invalid."),
        ("m-1", 1, None, E.group_id_not_found, "Share group {group} not found."),
        ("m-1", -1, None, E.group_id_not_found, "Group {group} not found."),
    ],
    ids=["empty-member", "long-member", "blank-member", "no-topics", "empty-topics", "epoch-2", "unknown", "leave"],
)
def test_heartbeat_validation(
    client: WireClient, member: str, epoch: int, topics: list[str] | None, code: E, message: str
) -> None:
    """Invalid heartbeats are INVALID_REQUEST, and a heartbeat to an unknown group at a non-zero epoch is
    GROUP_ID_NOT_FOUND, each with Kafka's message; none of them creates the group."""
    group = unique("hb-bad")
    response = heartbeat(client, group, member, epoch, topics)
    assert (response.error_code, response.error_message) == (code, message.format(group=group))
    assert response.assignment is None
    assert described(client, group).error_code == E.group_id_not_found


def test_heartbeat_epochs_and_leave(client: WireClient) -> None:
    """An unknown member id is UNKNOWN_MEMBER_ID, an epoch above the member's is FENCED_MEMBER_EPOCH (Kafka's
    message), the epoch just before the member's is accepted (a lost response); leaving (-1) answers epoch -1
    with no assignment and the member is gone."""
    group, topic, a, b = unique("hb-ep"), unique("hb-ep-t"), member_id(), member_id()
    tid = new_topic(client, topic, 3)
    assert heartbeat(client, group, a, 0, [topic]).member_epoch == 1
    stranger = heartbeat(client, group, b, 1)
    assert (stranger.error_code, stranger.error_message) == (
        E.unknown_member_id,
        f"Member {b} is not a member of group {group}.",
    )
    fenced = heartbeat(client, group, a, 7)
    assert (fenced.error_code, fenced.error_message) == (
        E.fenced_member_epoch,
        "The share group member has a greater member epoch (7) than the one known by the group coordinator (1). "
        "The member must abandon all its partitions and rejoin.",
    )
    # b joins: the group epoch moves to 2; a takes its new target at its next heartbeat
    second = heartbeat(client, group, b, 0, [topic])
    assert (second.error_code, second.member_epoch) == (E.none, 2)
    moved = heartbeat(client, group, a, 1)
    assert (moved.error_code, moved.member_epoch) == (E.none, 2)
    mine, theirs = assignment(moved), assignment(second)
    assert mine is not None and theirs is not None
    assert sorted(mine[tid] + theirs[tid]) == [0, 1, 2] and sorted([len(mine[tid]), len(theirs[tid])]) == [1, 2]
    lost = heartbeat(client, group, a, 1)  # the response of epoch 2 was lost: epoch 1 is still accepted
    assert (lost.error_code, lost.member_epoch) == (E.none, 2)
    left = heartbeat(client, group, a, -1)
    assert (left.error_code, left.member_id, left.member_epoch, left.heartbeat_interval, left.assignment) == (
        E.none,
        a,
        -1,
        0 * MS,
        None,
    )
    assert [m.member_id for m in described(client, group).members] == [b]
    assert heartbeat(client, group, a, 2).error_code == E.unknown_member_id


def test_group_ids_of_another_type(client: WireClient) -> None:
    """A share group's id is GROUP_ID_NOT_FOUND for ConsumerGroupHeartbeat and INCONSISTENT_GROUP_PROTOCOL for
    JoinGroup; a consumer group's id is GROUP_ID_NOT_FOUND for ShareGroupHeartbeat (Kafka's messages)."""
    share, consumer, topic = unique("x-share"), unique("x-consumer"), unique("x-t")
    new_topic(client, topic)
    assert heartbeat(client, share, member_id(), 0, [topic]).error_code == E.none
    beat = {"member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None, "rebalance_timeout": 10_000,
            "subscribed_topic_names": [topic], "server_assignor": None, "topic_partitions": []}  # fmt: skip
    refused = client.call(CG_HEARTBEAT, 0, group_id=share, **beat)
    assert (refused.error_code, refused.error_message) == (
        E.group_id_not_found,
        f"Group {share} is not a consumer group.",
    )
    joined = client.call(
        JOIN,
        5,
        group_id=share,
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id="",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )
    assert (joined.error_code, joined.member_id) == (E.inconsistent_group_protocol, "")
    assert client.call(CG_HEARTBEAT, 0, group_id=consumer, **beat).error_code == E.none
    other = heartbeat(client, consumer, member_id(), 0, [topic])
    assert (other.error_code, other.error_message) == (E.group_id_not_found, f"Group {consumer} is not a share group.")
    assert listed(client, ["share"]).keys() & {share, consumer} == {share}


# ------------------------------------------------------------------------ ShareGroupDescribe and group APIs
def test_describe_list_and_delete_a_share_group(client: WireClient) -> None:
    """ShareGroupDescribe shows the state, epochs, the ``simple`` assignor and the members with topic names;
    ListGroups lists the group as type ``share``; DescribeGroups answers it GROUP_ID_NOT_FOUND from v6 and
    ``Dead`` before; DeleteGroups refuses it while it has a member and deletes it once empty."""
    group, topic, member = unique("desc"), unique("desc-t"), member_id()
    tid = new_topic(client, topic, 2)
    assert heartbeat(client, group, member, 0, [topic]).error_code == E.none
    stable = described(client, group)
    assert (stable.error_code, stable.group_id, stable.group_state, stable.group_epoch, stable.assignment_epoch) == (
        E.none,
        group,
        "Stable",
        1,
        1,
    )
    assert stable.assignor_name == "simple"
    (m,) = stable.members
    assert (m.member_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == (member, 1, "wire-test", (topic,))
    assert [(t.topic_id, t.topic_name, sorted(t.partitions)) for t in m.assignment.topic_partitions] == [
        (tid, topic, [0, 1])
    ]
    unknown = described(client, "desc-no-such-group")
    assert (unknown.error_code, unknown.error_message) == (E.group_id_not_found, "Group desc-no-such-group not found.")

    row = listed(client, ["share"])[group]
    assert (row.group_type, row.protocol_type, row.group_state) == ("share", "share", "Stable")
    assert group not in listed(client, ["consumer", "classic"])
    assert listed(client, [])[group].group_type == "share"

    (v6,) = client.call(DESCRIBE, 6, groups=[group], include_authorized_operations=False).groups
    assert (v6.error_code, v6.group_state, v6.error_message) == (
        E.group_id_not_found,
        "Dead",
        f"Group {group} is not a classic group.",
    )
    (v5,) = client.call(DESCRIBE, 5, groups=[group], include_authorized_operations=False).groups
    assert (v5.error_code, v5.group_state) == (E.none, "Dead")

    (busy,) = client.call(DELETE, 2, groups_names=[group]).results
    assert busy.error_code == E.non_empty_group
    assert described(client, group).group_state == "Stable"
    assert heartbeat(client, group, member, -1).error_code == E.none
    empty = described(client, group)
    assert (empty.group_state, empty.group_epoch, empty.assignment_epoch, empty.members) == ("Empty", 2, 1, ())
    (deleted,) = client.call(DELETE, 2, groups_names=[group]).results
    assert deleted.error_code == E.none
    assert group not in listed(client, [])
    assert described(client, group).error_code == E.group_id_not_found


# ------------------------------------------------------------------------------------------- share sessions
def test_share_session_errors(client: WireClient) -> None:
    """Acknowledgements when opening a session are INVALID_REQUEST and open nothing; a later epoch without a
    session is SHARE_SESSION_NOT_FOUND; an epoch other than the one expected is INVALID_SHARE_SESSION_EPOCH
    and does not move the session on."""
    group, topic, member = unique("sess"), unique("sess-t"), member_id()
    tid = new_topic(client, topic)
    assert heartbeat(client, group, member, 0, [topic]).error_code == E.none
    tp = (tid, 0)
    with_acks = share_fetch(client, group, member, 0, {tp: batches((0, 0, ACCEPT))})
    assert (with_acks.error_code, with_acks.responses) == (E.invalid_request, ())
    assert share_fetch(client, group, member, 1, {tp: []}).error_code == E.share_session_not_found
    assert share_fetch(client, group, member, -1, {}).error_code == E.share_session_not_found
    assert share_ack(client, group, member, 1, {}).error_code == E.share_session_not_found
    opened = share_fetch(client, group, member, 0, {tp: []})
    assert ranges(fetched(opened)[tp]) == []
    assert share_fetch(client, group, member, 5, {}).error_code == E.invalid_share_session_epoch
    assert share_fetch(client, group, member, 2, {}).error_code == E.invalid_share_session_epoch
    assert share_fetch(client, group, member, 1, {}).error_code == E.none
    assert share_ack(client, group, member, 2, {}).error_code == E.none
    assert share_ack(client, group, member, 2, {}).error_code == E.invalid_share_session_epoch
    assert share_fetch(client, group, member, 3, {}).error_code == E.none


def test_acquire_acknowledge_and_release(server: ServerProcess) -> None:
    """Records acquired through a share session: one range at delivery count 1 with the log's batch and the
    server's lock duration; ACCEPT succeeds once, then INVALID_RECORD_STATE; ShareAcknowledge cannot open a
    session; RENEW in v1 is INVALID_REQUEST; another member cannot acknowledge them; the final ShareAcknowledge
    (-1) applies its acknowledgements, closes the session and releases what the member still held, which
    another member then acquires at delivery count 2."""
    group, topic, a, b = unique("flow"), unique("flow-t"), member_id(), member_id()
    with WireClient(server.port) as one, WireClient(server.port) as two:
        tid = new_topic(one, topic)
        tp = (tid, 0)
        set_group_config(one, group, "share.auto.offset.reset", "earliest")
        batch = make_batch([f"r{i}".encode() for i in range(5)])
        assert produce(one, topic, batch) == 0
        assert heartbeat(one, group, a, 0, [topic]).error_code == E.none

        first = share_fetch(one, group, a, 0, {tp: []}, max_wait_ms=2000)
        assert first.acquisition_lock_timeout == LOCK_MS * MS
        row = fetched(first)[tp]
        assert (row.error_code, row.acknowledge_error_code) == (E.none, E.none)
        assert ranges(row) == [(0, 4, 1)]
        assert records_in(row.records) == [(0, 5)]
        assert len(row.records) == len(batch) and row.records[16:] == batch[16:]  # (the leader epoch aside)

        assert acked(share_ack(one, group, a, 1, {tp: batches((0, 2, ACCEPT))})) == {tp: E.none}
        assert acked(share_ack(one, group, a, 2, {tp: batches((0, 2, ACCEPT))})) == {tp: E.invalid_record_state}
        assert share_ack(one, group, a, 0, {tp: batches((3, 3, ACCEPT))}).error_code == E.invalid_share_session_epoch
        assert acked(share_ack(one, group, a, 3, {tp: batches((3, 3, RENEW))})) == {tp: E.invalid_request}

        # b: nothing to acquire (a holds 3 and 4), and it may not acknowledge a's records
        assert heartbeat(two, group, b, 0, [topic]).error_code == E.none
        assert ranges(fetched(share_fetch(two, group, b, 0, {tp: []}))[tp]) == []
        assert acked(share_ack(two, group, b, 1, {tp: batches((3, 4, ACCEPT))})) == {tp: E.invalid_record_state}

        # a's last acknowledgement closes its session: 3 is accepted (still a's), 4 goes back
        assert acked(share_ack(one, group, a, -1, {tp: batches((3, 3, ACCEPT))})) == {tp: E.none}
        assert share_ack(one, group, a, 4, {}).error_code == E.share_session_not_found
        assert share_fetch(one, group, a, 4, {}).error_code == E.share_session_not_found
        again = fetched(share_fetch(two, group, b, 2, {}, max_wait_ms=3000))
        assert ranges(again[tp]) == [(4, 4, 2)]
        assert records_in(again[tp].records) == [(0, 5)]
        assert share_offsets(one, group) == (E.none, {(topic, 0): (4, 1, E.none)})


def test_max_bytes_zero_acquires_nothing(server: ServerProcess) -> None:
    """ShareFetch with MaxBytes 0 reads nothing, so it acquires nothing (as Kafka answers it); the records stay
    available for the next fetch, at delivery count 1."""
    group, topic, a = unique("zero"), unique("zero-t"), member_id()
    with WireClient(server.port) as one:
        tid = new_topic(one, topic)
        tp = (tid, 0)
        set_group_config(one, group, "share.auto.offset.reset", "earliest")
        assert produce(one, topic, make_batch([b"z0", b"z1"])) == 0
        assert heartbeat(one, group, a, 0, [topic]).error_code == E.none
        nothing = fetched(share_fetch(one, group, a, 0, {tp: []}, max_bytes=0))
        assert ranges(nothing[tp]) == []
        assert ranges(fetched(share_fetch(one, group, a, 1, {}, max_wait_ms=2000))[tp]) == [(0, 1, 1)]


# ------------------------------------------------------------------------------------------- offsets admin
def test_share_group_offsets_apis(client: WireClient) -> None:
    """DescribeShareGroupOffsets shows each initialized partition's start offset and lag; AlterShareGroupOffsets
    needs an empty group (NON_EMPTY_GROUP, nothing changed) and creates a missing one; DeleteShareGroupOffsets
    forgets a topic's state and needs an existing group."""
    group, topic, member = unique("offs"), unique("offs-t"), member_id()
    tid = new_topic(client, topic)
    tp = (tid, 0)
    set_group_config(client, group, "share.auto.offset.reset", "earliest")
    produce(client, topic, make_batch([b"a", b"b"]))
    produce(client, topic, make_batch([b"c", b"d", b"e"]))
    assert heartbeat(client, group, member, 0, [topic]).error_code == E.none
    assert share_offsets(client, group) == (E.none, {(topic, 0): (0, 5, E.none)})
    taken = fetched(share_fetch(client, group, member, 0, {tp: []}, max_records=2, max_wait_ms=2000))
    assert ranges(taken[tp]) == [(0, 1, 1)]
    assert acked(share_ack(client, group, member, -1, {tp: batches((0, 1, ACCEPT))})) == {tp: E.none}
    assert share_offsets(client, group) == (E.none, {(topic, 0): (2, 3, E.none)})

    busy = alter_offsets(client, group, topic, {0: 3})
    assert busy.error_code == E.non_empty_group
    assert share_offsets(client, group) == (E.none, {(topic, 0): (2, 3, E.none)})
    assert heartbeat(client, group, member, -1).error_code == E.none
    altered = alter_offsets(client, group, topic, {0: 3})
    assert altered.error_code == E.none
    assert [(t.topic_name, t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in altered.responses] == [(topic, tid, [(0, E.none)])]  # fmt: skip
    assert share_offsets(client, group) == (E.none, {(topic, 0): (3, 2, E.none)})

    deleted = delete_offsets(client, group, [topic])
    assert deleted.error_code == E.none
    assert [(t.topic_name, t.topic_id, t.error_code) for t in deleted.responses] == [(topic, tid, E.none)]
    assert share_offsets(client, group, {topic: [0]}) == (E.none, {(topic, 0): (-1, -1, E.none)})
    assert share_offsets(client, group) == (E.none, {})
    assert delete_offsets(client, unique("offs-none"), [topic]).error_code == E.group_id_not_found

    created = unique("offs-new")
    assert alter_offsets(client, created, topic, {0: 4}).error_code == E.none
    row = listed(client, ["share"])[created]
    assert (row.group_type, row.group_state) == ("share", "Empty")
    assert share_offsets(client, created) == (E.none, {(topic, 0): (4, 1, E.none)})


# ------------------------------------------------------------------------------------ share.isolation.level
def describe_group_configs(client: WireClient, group: str) -> dict[str, tuple[str, int]]:
    """DescribeConfigs v4 of the GROUP resource: name -> (value, source)."""
    response = client.call(
        DESCRIBE_CONFIGS,
        4,
        resources=[{"resource_type": GROUP_RESOURCE, "resource_name": group, "configuration_keys": None}],
        include_synonyms=False,
        include_documentation=False,
    )
    (result,) = response.results
    assert result.error_code == E.none, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


def alter_group_config(client: WireClient, group: str, key: str, value: str) -> tuple[E, str | None]:
    response = client.call(
        INCREMENTAL_ALTER,
        1,
        resources=[
            {
                "resource_type": GROUP_RESOURCE,
                "resource_name": group,
                "configs": [{"name": key, "config_operation": 0, "value": value}],
            }
        ],
        validate_only=False,
    )
    (result,) = response.responses
    return result.error_code, result.error_message


def transaction(client: WireClient, topic: str, values: list[bytes]) -> tuple[str, int, int]:
    """A transactional producer that wrote ``values`` to partition 0 of ``topic`` in an open transaction:
    (transactional id, producer id, epoch)."""
    txn_id = unique("share-txn")
    started = txn_init(client, txn_id)
    pid, epoch = started.producer_id, started.producer_epoch
    assert txn_add(client, txn_id, pid, epoch, {topic: [0]}) == [(topic, 0, E.none)]
    written = client.call(
        PRODUCE,
        9,
        transactional_id=txn_id,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": txn_batch(pid, epoch, 0, values)}]}],
    )
    assert written.responses[0].partition_responses[0].error_code == E.none
    return txn_id, pid, epoch


def finish(client: WireClient, topic: str, txn: tuple[str, int, int], committed: bool, log_end: int) -> None:
    """End the transaction and wait until its marker is in the log (which then ends at ``log_end``)."""
    assert txn_end(client, *txn, committed) == E.none
    deadline = time.monotonic() + 10
    while txn_latest(client, topic, 0) < log_end:
        assert time.monotonic() < deadline, f"the marker never reached {topic}"
        time.sleep(0.02)


def data_offsets(partition: Any) -> list[int]:
    """The offsets of the records a client is handed: those of data batches inside the acquired ranges."""
    acquired = [(r.first_offset, r.last_offset) for r in partition.acquired_records]
    out, pos, data = [], 0, partition.records
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        attributes, last_delta = struct.unpack_from(">hi", data, pos + 21)
        if not attributes & CONTROL_BATCH:
            out += [o for o in range(base, base + last_delta + 1) if any(f <= o <= la for f, la in acquired)]
        pos += 12 + length
    return out


def test_share_isolation_level_is_a_group_config(client: WireClient) -> None:
    """``share.isolation.level`` is described with Kafka's default (read_uncommitted, DEFAULT_CONFIG), then the
    group's own value (GROUP_CONFIG); only Kafka's two values, in lower case, are accepted (INVALID_CONFIG
    otherwise, nothing changed)."""
    group = unique("iso-cfg")
    assert describe_group_configs(client, group)["share.isolation.level"] == ("read_uncommitted", 5)
    for bad in ("READ_COMMITTED", "committed", ""):
        error, message = alter_group_config(client, group, "share.isolation.level", bad)
        assert error == E.invalid_config, bad
        assert message == (
            f"Invalid value {bad} for configuration share.isolation.level: "
            "String must be one of: read_committed, read_uncommitted"
        )
    assert describe_group_configs(client, group)["share.isolation.level"] == ("read_uncommitted", 5)
    assert alter_group_config(client, group, "share.isolation.level", " read_committed ") == (E.none, None)
    assert describe_group_configs(client, group)["share.isolation.level"] == ("read_committed", 8)


def test_read_committed_delivers_committed_records_only(server: ServerProcess) -> None:
    """The log holds a committed transaction (0-1, COMMIT marker 2), an aborted one (3-5, ABORT marker 6) and an
    open one (7-8). A read_committed share group acquires up to the last stable offset (7) and archives the
    aborted records: it is handed 0-1 (with the markers' offsets to acknowledge as gaps), never 3-5, and 7-8
    only once their transaction commits (marker 9). A read_uncommitted group is handed every record, the open
    transaction's included."""
    committed_group, uncommitted_group, topic = unique("iso-rc"), unique("iso-ru"), unique("iso-t")
    a, b = member_id(), member_id()
    with WireClient(server.port) as one, WireClient(server.port) as two:
        tid = new_topic(one, topic)
        tp = (tid, 0)
        for group, level in ((committed_group, "read_committed"), (uncommitted_group, "read_uncommitted")):
            set_group_config(one, group, "share.auto.offset.reset", "earliest")
            set_group_config(one, group, "share.isolation.level", level)
        finish(one, topic, transaction(one, topic, [b"c0", b"c1"]), True, 3)
        finish(one, topic, transaction(one, topic, [b"x0", b"x1", b"x2"]), False, 7)
        still_open = transaction(one, topic, [b"o0", b"o1"])
        assert (txn_latest(one, topic, 0), txn_latest(one, topic, 1)) == (9, 7)

        assert heartbeat(one, committed_group, a, 0, [topic]).error_code == E.none
        first = fetched(share_fetch(one, committed_group, a, 0, {tp: []}, max_wait_ms=2000))[tp]
        assert ranges(first) == [(0, 2, 1), (6, 6, 1)]
        assert data_offsets(first) == [0, 1]
        gaps = batches((0, 1, ACCEPT), (2, 2, GAP), (6, 6, GAP))
        nothing = fetched(share_fetch(one, committed_group, a, 1, {tp: gaps}, max_wait_ms=300))[tp]
        assert (nothing.acknowledge_error_code, ranges(nothing)) == (E.none, [])
        assert share_offsets(one, committed_group) == (E.none, {(topic, 0): (7, 2, E.none)})

        assert heartbeat(two, uncommitted_group, b, 0, [topic]).error_code == E.none
        everything = fetched(share_fetch(two, uncommitted_group, b, 0, {tp: []}, max_wait_ms=2000))[tp]
        assert ranges(everything) == [(0, 8, 1)]
        assert data_offsets(everything) == [0, 1, 3, 4, 5, 7, 8]

        finish(one, topic, still_open, True, 10)
        later = fetched(share_fetch(one, committed_group, a, 2, {}, max_wait_ms=2000))[tp]
        assert ranges(later) == [(7, 9, 1)]
        assert data_offsets(later) == [7, 8]


# ---------------------------------------------------------------------------------------- --no-share-groups
def test_share_groups_disabled(tmp_path: Path) -> None:
    """With ``--no-share-groups`` the share APIs stay listed in ApiVersions and every request is
    UNSUPPORTED_VERSION (DescribeShareGroupOffsets per group); no group is created."""
    group, topic = unique("off"), unique("off-t")
    with served(tmp_path, "--no-share-groups") as proc, WireClient(proc.port) as client:
        response = client.call(API_VERSIONS, 3, client_software_name="t", client_software_version="1")
        versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert {key: versions.get(key) for key in SHARE_API_VERSIONS} == SHARE_API_VERSIONS
        tid = new_topic(client, topic)
        produce(client, topic, make_batch([b"x"]))
        assert heartbeat(client, group, member_id(), 0, [topic]).error_code == E.unsupported_version
        assert described(client, group).error_code == E.unsupported_version
        assert share_fetch(client, group, member_id(), 0, {(tid, 0): []}).error_code == E.unsupported_version
        assert share_ack(client, group, member_id(), 1, {}).error_code == E.unsupported_version
        assert alter_offsets(client, group, topic, {0: 0}).error_code == E.unsupported_version
        assert delete_offsets(client, group, [topic]).error_code == E.unsupported_version
        assert share_offsets(client, group) == (E.unsupported_version, {})
        assert group not in listed(client, [])
