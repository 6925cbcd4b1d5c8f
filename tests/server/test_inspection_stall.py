"""Group inspection at its sizes does not hold the event loop: a server loaded with 10,000 groups (classic and
KIP-848 consumer groups), a classic group of 10,000 members and a consumer group of 10,000 members answers
ListGroups (all groups, and with a states and a types filter), DescribeGroups (the big group; 1,000 groups of 10
members in one request) and ConsumerGroupDescribe (the big group) in a loop, and the stall watchdog counts no
turn over ``STALL_MS`` held by any of those APIs.

Before these answers were read from the core as rows and encoded a chunk at a time
(``server/inspection_answers.py``), each held the loop for its whole answer: ListGroups of 10,000 groups about
100 ms, DescribeGroups of 10,000 members about 120 ms, ConsumerGroupDescribe of 10,000 members about 550 ms
(docs/benchmarks.md, "Server: stalls"). The threshold is generous against a loaded machine: what it catches is a
request holding the loop for a whole answer again. The groups are written to the coordinator log before the
server starts, the way it would have written them."""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from regroup.records.builders import (
    new_consumer_group_current_assignment_record,
    new_consumer_group_epoch_record,
    new_consumer_group_member_metadata_record,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_record,
    new_group_metadata_record,
)
from regroup.records.consumer import ConsumerGroupMemberMetadataValue
from regroup.records.model import GroupMetadataValue, MemberMetadata, Record
from regroup.storage.coordinator_log import CoordinatorLog
from regroup.storage.record_log import FsyncPolicy
from tests.server.conftest import ServerProcess, free_port
from tests.server.test_metrics import scrape, value
from tests.server.test_stall import read_frame
from tests.server.wire import encode_request

#: latency-bound: run alone, after the parallel run (`make unit`)
pytestmark = pytest.mark.serial

MakeServer = Callable[..., ServerProcess]
LIST_GROUPS, DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE = 16, 15, 69
STALL_MS = 50
LOOP_S = 4.0
LONG_MS = 3_600_000
BIG, TOPIC_ID = "inspected-big", uuid.UUID(int=0xC0FFEE)
SMALL_CLASSIC, SMALL_CONSUMER, TEN_MEMBER = 5_000, 5_000, 1_000


def _classic(group_id: str, members: int) -> Record:
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=1,
        protocol_name="range",
        leader=f"{group_id}-m0",
        current_state_timestamp_ms=0,
        members=tuple(
            MemberMetadata(
                member_id=f"{group_id}-m{i}",
                group_instance_id=None,
                client_id="client",
                client_host="/127.0.0.1",
                rebalance_timeout_ms=LONG_MS,
                session_timeout_ms=LONG_MS,
                subscription=b"\x00\x01\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff",
                assignment=b"\x00\x01\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01" + struct.pack(">i", i),
            )
            for i in range(members)
        ),
    )
    return new_group_metadata_record(group_id, value)


def _consumer(group_id: str, members: int) -> list[Record]:
    """A consumer group whose members each own (and are targeted) one partition of one topic."""
    records = [new_consumer_group_epoch_record(group_id, 3)]
    member = ConsumerGroupMemberMetadataValue(
        instance_id=None,
        rack_id=None,
        client_id="client",
        client_host="/127.0.0.1",
        subscribed_topic_names=("t",),
        subscribed_topic_regex=None,
        server_assignor=None,
        rebalance_timeout_ms=LONG_MS,
    )
    for i in range(members):
        records.append(new_consumer_group_member_metadata_record(group_id, f"{group_id}-m{i}", member))
        records.append(new_consumer_group_target_assignment_record(group_id, f"{group_id}-m{i}", ((TOPIC_ID, (i,)),)))
    records.append(new_consumer_group_target_assignment_epoch_record(group_id, 3))
    for i in range(members):
        records.append(
            new_consumer_group_current_assignment_record(
                group_id,
                f"{group_id}-m{i}",
                member_epoch=3,
                previous_member_epoch=2,
                state="stable",
                assigned=((TOPIC_ID, (i,)),),
                pending_revocation=(),
            )
        )
    return records


def preload(data: Path) -> None:
    records: list[Record] = [_classic(BIG, 10_000)]
    records += _consumer(BIG + "-consumer", 10_000)
    records += [_classic(f"ten-{i:04d}", 10) for i in range(TEN_MEMBER)]
    records += [_classic(f"classic-{i:05d}", 1) for i in range(SMALL_CLASSIC)]
    for i in range(SMALL_CONSUMER):
        records += _consumer(f"consumer-{i:05d}", 1)
    data.mkdir(parents=True)
    log = CoordinatorLog.open(data / "coordinator", fsync=FsyncPolicy.NEVER)
    try:
        for first in range(0, len(records), 5_000):
            log.append(records[first : first + 5_000])
        log.log.sync()
    finally:
        log.close()


def requests() -> list[bytes]:
    """The inspection requests, in turn (correlation id 0, patched per send)."""
    ten = [f"ten-{i:04d}" for i in range(TEN_MEMBER)]
    return [
        encode_request(LIST_GROUPS, 5, 0, "inspect", states_filter=[], types_filter=[]),
        encode_request(LIST_GROUPS, 5, 0, "inspect", states_filter=["Stable"], types_filter=[]),
        encode_request(LIST_GROUPS, 5, 0, "inspect", states_filter=[], types_filter=["consumer"]),
        encode_request(DESCRIBE_GROUPS, 5, 0, "inspect", groups=[BIG], include_authorized_operations=False),
        encode_request(DESCRIBE_GROUPS, 5, 0, "inspect", groups=ten, include_authorized_operations=False),
        encode_request(
            CONSUMER_GROUP_DESCRIBE, 1, 0, "inspect", group_ids=[BIG + "-consumer"], include_authorized_operations=True
        ),
    ]


def test_group_inspection_at_its_sizes_does_not_stall_the_loop(make_server: MakeServer, tmp_path: Path) -> None:
    data = tmp_path / "preloaded"
    preload(data)
    metrics_port = free_port()
    server = make_server(
        "--fsync",
        "never",
        "--metrics-port",
        str(metrics_port),
        "--stall-warn-ms",
        str(STALL_MS),
        "--consumer-session-timeout-ms",
        str(LONG_MS),
        data_dir=data,
    )
    templates = requests()
    sizes: list[list[int]] = [[] for _ in templates]
    with socket.create_connection(("127.0.0.1", server.port), timeout=120) as sock:
        deadline = time.monotonic() + LOOP_S
        correlation_id = 0
        while time.monotonic() < deadline or correlation_id < len(templates):
            which = correlation_id % len(templates)
            correlation_id += 1
            request = bytearray(templates[which])
            struct.pack_into(">i", request, 8, correlation_id)
            sock.sendall(request)
            frame = read_frame(sock)
            assert struct.unpack_from(">i", frame)[0] == correlation_id
            sizes[which].append(len(frame))
    # every answer held what it was asked for (about 40 bytes a listed group, 50 a classic member, more a consumer
    # member with its two assignments)
    assert min(sizes[0]) > (SMALL_CLASSIC + SMALL_CONSUMER) * 30
    assert min(sizes[3]) > 10_000 * 40
    assert min(sizes[4]) > TEN_MEMBER * 10 * 40
    assert min(sizes[5]) > 10_000 * 80
    _, samples = scrape(metrics_port)
    assert value(samples, "regroup_event_loop_stall_threshold_seconds") == STALL_MS / 1000
    held = {
        api: value(samples, "regroup_event_loop_stalls_total", api=api)
        for api in ("ListGroups", "DescribeGroups", "ConsumerGroupDescribe")
    }
    assert held == dict.fromkeys(held, 0.0), (
        f"stalls over {STALL_MS} ms: {held} in {correlation_id} requests\n"
        + "\n".join(line for line in server.log().splitlines() if "watchdog" in line)[-3000:]
    )
