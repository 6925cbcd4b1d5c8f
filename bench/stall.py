"""Expensive requests beside healthy group members: how long do the healthy members wait while other connections
ask ``regroup serve`` for big answers?

Usage::

    .venv/bin/python bench/stall.py                                   # every case, full size, this tree's server
    .venv/bin/python bench/stall.py --quick                           # smoke run: small sizes, short windows
    .venv/bin/python bench/stall.py --before /tmp/before/src          # and another tree's server, side by side
    .venv/bin/python bench/stall.py --cases metadata-100k,offset-commit-10k --window 20
    .venv/bin/python bench/stall.py --json /tmp/bench-stall.json
    .venv/bin/python bench/stall.py --micro --before /tmp/before/src  # the CPU of one Metadata answer, in-process

For each case and each server tree (``--before DIR`` first, then this tree; alternated before, after, after,
before, ... over ``--rounds``) the harness starts ``python -m regroup serve`` (``--fsync`` as given, default
never: a healthy member's heartbeat waits behind its own commit on their connection, as in Kafka, so with
``always`` the disk's fsync times show in the heartbeat latencies too; ``--metrics-port 0``; ``--max-partitions``
raised so the largest layout fits) and:

1. creates the case's topics (``--max-partitions-per-topic`` 10,000 each at most, 10,000 per CreateTopics),
   then the healthy members: ``--members`` connections, each a one-member classic group (JoinGroup v9 twice,
   SyncGroup v5) that sends Heartbeat v4 every ``--hb-interval-ms`` and commits 10 partitions (OffsetCommit
   v9, as a consumer with auto-commit) every ``--commit-interval-ms``, on a fixed schedule: a request is sent
   when due even if earlier ones are unanswered, so a stalled server shows as the whole queue of late answers
   (no coordinated omission). Latency is from writing a request to reading its answer;
2. measures the healthy members alone for ``--quiet`` seconds (the baseline);
3. starts ``--heavy`` heavy connections in a child process (blocking sockets, responses read whole but not
   decoded, so the healthy members' measurement in this process does not pay for them), each sending the
   case's request as soon as the previous answer is read, for ``--window`` seconds;
4. reads the stall watchdog's metrics (``regroup_event_loop_stalls_total`` during the window,
   ``regroup_event_loop_longest_turn_seconds`` since start; a server without the watchdog shows ``n/a``).

Cases (``--cases``; ``--quick`` runs the first three at a tenth of the size):

- ``metadata-10k`` / ``metadata-100k``: Metadata v12 for all topics; 100 topics of 100 / 1,000 partitions;
- ``describe-topic-partitions``: DescribeTopicPartitions v0, all topics (the first page, 2,000 partitions) of
  the 100 x 100 layout;
- ``create-topics-10k``: CreateTopics v7 of one topic of 10,000 partitions, then DeleteTopics v6 of it, again;
- ``delete-topics-10k``: CreateTopics v7 of one topic of 10,000 partitions, Produce v9 of one record to each,
  DeleteTopics v6 of it, again (the topic deleted has 10,000 partitions' files);
- ``create-topics-3000``: CreateTopics v7 of 3,000 topics of one partition each (names no topic has when it is
  sent), then DeleteTopics v6 of the 3,000 by name, again (the stalls column tells the two APIs apart);
- ``offset-commit-10k``: OffsetCommit v9 of the 10,000 partitions of one topic (a group with no members);
- ``list-offsets-10k``: ListOffsets v8 (latest) of the 10,000 partitions of one topic;
- ``fetch-10k``: Fetch v12 without a fetch session of the 10,000 partitions of one topic from offset 0 (one
  record of 100 bytes in each, produced once before the window), answered at once (max_wait 0);
- ``produce-10k``: Produce v9 (acks=all) of one record to each of the 10,000 partitions of one topic (the first
  request creates every partition's files, the later ones append to open logs);
- ``delete-records-10k``: that Produce, then DeleteRecords v2 of the same 10,000 partitions up to their high
  watermark, in turn (every partition's new log start offset written durably each round);
- ``offset-fetch-10k``: OffsetFetch v9 of every partition the group of ``offset-commit-10k`` committed (10,000).
- ``offset-fetch-named-10k``: OffsetFetch v9 of the same 10,000 partitions, each named in the request.
- ``list-groups-10k``: ListGroups v5 of 10,000 groups (5,000 classic, 5,000 KIP-848 consumer groups, one member
  each, loaded from the coordinator log at start: ``bench/kip848.py``'s records): every group, then the Stable
  ones (states filter), then the consumer ones (types filter), in turn;
- ``describe-groups-10k-members``: DescribeGroups v5 of one Stable classic group of 10,000 members (loaded);
- ``describe-groups-1000x10``: DescribeGroups v5 of 1,000 Stable classic groups of 10 members, in one request;
- ``consumer-group-describe-10k``: ConsumerGroupDescribe v1 of one consumer group of 10,000 members owning the
  10,000 partitions of ``bench/kip848.py``'s topics (loaded).
- ``kip848-joins-10k``: ConsumerGroupHeartbeat v1 into a consumer group of 10,000 members like that one (loaded):
  one member (re)joining on five of the ten topics, another joining on the other five, then leaving, in turn;
  each heartbeat bumps the group epoch, and the group's subscriptions differ, so each new target is a full
  computation over the 10,000 members (on the coordinator's worker thread where the tree has one);
- ``kip848-joins-10k-paced``: the same, each heavy connection waiting 250 ms after each answer (members coming
  and going as in a rolling restart, rather than as fast as the server answers);
- ``kip848-joins-10k-batched``: the flood of ``kip848-joins-10k`` against a server with an assignment interval
  of 1,000 ms (``--consumer-assignment-interval-ms``, KIP-1263; Kafka 4.3's default): one target a second at
  most, the changes meanwhile taken together.
- ``classic-joins-10k``: classic groups of 10,000 members formed one after another, 50 members to a connection
  (``--heavy`` does not apply: one process forms them): every member's two-phase JoinGroup v9, the join phase
  completing for all 10,000 at once (10,000 JoinGroup answers, the leader's with every subscription), the
  leader's range assignment, 10,000 SyncGroup v5 answered when the leader's arrives, then one LeaveGroup of
  all; the heavy latency is each group's rebalance (``bench/server.py``'s join case).
- ``list-offsets-by-time-10k``: ListOffsets v8 by timestamp of the same 10,000 partitions, one record in each
  (produced once before the window): each a lookup in the partition's time index and a batch read;
- ``describe-configs-1000``: DescribeConfigs v4 of 1,000 topics, every entry with synonyms and documentation;
- ``alter-configs-1000``: IncrementalAlterConfigs v1 setting ``retention.ms`` of the same 1,000 topics;
- ``describe-producers-10k``: DescribeProducers v0 of the 10,000 partitions of one topic;
- ``find-coordinator-10k``: FindCoordinator v4 of 10,000 group ids in one request;
- ``share-offsets-10k``: DescribeShareGroupOffsets v1 of the 10,000 partitions of one topic, named;
- ``share-groups-10k``: share groups (KIP-932) over the same 10,000 partitions, one record in each (produced once
  before the window), one after another (``--heavy`` does not apply): a new group's member joining (every
  partition assigned and initialized), a ShareFetch opening a session of every partition (every record
  acquired), a ShareAcknowledge accepting them all, the session closed and the member leaving; the heavy latency
  is one such cycle;
- ``add-partitions-to-txn-10k``: AddPartitionsToTxn v3 of the 10,000 partitions of one topic to a transaction
  (InitProducerId once before the window);
- ``metadata-auto-create-500``: Metadata v12 naming 500 missing topics (auto-created), then DeleteTopics v6 of
  them, in turn;
- ``create-partitions-1000``: CreateTopics v7 of 1,000 one-partition topics, CreatePartitions v3 growing each to
  11, DeleteTopics v6 of them, in turn.
- ``txn-offsets-10k``: a transaction over the 10,000 partitions of one topic committing an offset for each
  (InitProducerId once before the window): AddPartitionsToTxn v3, AddOffsetsToTxn v3, TxnOffsetCommit v3 of the
  10,000 partitions, EndTxn v3 (commit: markers to the 10,000 partitions, most never written before, then the
  offsets made the group's), in turn;
- ``groups-1000``: ConsumerGroupDescribe v1, ShareGroupDescribe v1, OffsetFetch v9 (every offset) and
  DeleteGroups v2 naming the 1,000 classic groups of ``describe-groups-1000x10`` (loaded), in turn;
- ``regex-10k-topics``: 200 members each joining a consumer group of its own (ConsumerGroupHeartbeat v1) with a
  regular expression of its own matching 10 of 10,000 topics, so each group's first resolution matches its
  expression against 10,000 names; later rounds rejoin, resolved already.

``--micro`` measures instead what one all-topics Metadata v12 answer costs the server, in process CPU time
(handler and encoding, the way the dispatcher runs them, with no network), for each tree in a child process of
its own: over a topic store (``--fsync never``, a temporary directory) of 10,000 partitions (100 topics of 100,
and 10,000 topics of 1) and 100,000 (100 of 1,000, and 10,000 of 10); the first answer after the topics were
created ("cold": what follows any change) and the median of 20 more ("warm").

Reported per run: heavy requests answered (and the median time each took), the healthy heartbeat and commit
latencies (p50, p99, max) in the baseline and in the window, stalls counted in the window, the longest turn,
and the server's CPU in the window. Bounds: every phase has a deadline, the server is stopped (SIGTERM, then
SIGKILL) even on failure, only 127.0.0.1 is used. Run one benchmark at a time: the load generator and the
server share the machine's cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib.util
import json
import multiprocessing
import re
import socket
import struct
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from group_commit import record_batch
from server_loader import load_server_bench

sb = load_server_bench()

PRODUCE, FETCH, METADATA, LIST_OFFSETS, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 3, 2, 8, 9
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, DESCRIBE_TOPIC_PARTITIONS = 19, 20, 21, 75
COMMIT_TOPIC = "bench-stall-commits"
HEAVY_GROUP = "bench-stall-heavy"
CREATED_TOPIC = "bench-stall-created"
MAX_PARTITIONS_PER_REQUEST = 10_000
TOPICS_PER_REQUEST = 10
PHASE_TIMEOUT_S = 300.0
_METRICS = re.compile(rb"metrics=http://[^:]+:(\d+)/metrics")
_SAMPLE = re.compile(r"^([a-z_]+)(?:\{(.*)\})? (\S+)$", re.MULTILINE)


# ---------------------------------------------------------------------------------------------------------------
# the cases


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    #: topics to create first: name -> partitions
    topics: dict[str, int]
    #: the heavy requests, sent in turn (each a framed request; the correlation id is patched per send)
    requests: Callable[[int], list[bytes]]
    #: a request sent once before the window (OffsetFetch needs committed offsets), or None
    prepare: Callable[[int], list[bytes]] | None = None
    #: writes the server's data directory before it starts (groups loaded from the coordinator log), or None
    preload: Callable[[Path], None] | None = None
    #: seconds each heavy connection waits after an answer before its next request (0: none)
    pace_s: float = 0.0
    #: more ``regroup serve`` flags for this case
    server_args: tuple[str, ...] = ()
    #: the heavy side when it is not ``--heavy`` connections sending ``requests`` in turn: one child process
    #: running ``worker(port, seconds, out)`` (``classic_rebalances``), or None
    worker: Callable[[int, float, Connection], None] | None = None


def layout(topics: int, partitions: int, prefix: str = "bench-stall") -> dict[str, int]:
    return {f"{prefix}-{i:03d}": partitions for i in range(topics)}


def metadata_all(size: int) -> list[bytes]:
    request = sb.encode_request(
        METADATA, 12, 0, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    return [bytes(request)]


def describe_all(size: int) -> list[bytes]:
    request = sb.encode_request(DESCRIBE_TOPIC_PARTITIONS, 0, 0, topics=[], response_partition_limit=2000, cursor=None)
    return [bytes(request)]


def create_and_delete(size: int) -> list[bytes]:
    topic = {"name": CREATED_TOPIC, "num_partitions": size, "replication_factor": 1, "assignments": [], "configs": []}
    create = sb.encode_request(CREATE_TOPICS, 7, 0, topics=[topic], timeout=30_000, validate_only=False)
    delete = sb.encode_request(
        DELETE_TOPICS, 6, 0, topics=[{"name": CREATED_TOPIC, "topic_id": uuid.UUID(int=0)}], timeout=30_000
    )
    return [bytes(create), bytes(delete)]


def create_and_delete_many(count: int) -> list[bytes]:
    names = [f"bench-stall-many-{i:05d}" for i in range(count)]
    one = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    topics = [{"name": n, **one} for n in names]
    create = sb.encode_request(CREATE_TOPICS, 7, 0, topics=topics, timeout=30_000, validate_only=False)
    wanted = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    delete = sb.encode_request(DELETE_TOPICS, 6, 0, topics=wanted, timeout=30_000)
    return [bytes(create), bytes(delete)]


def offset_commit(size: int) -> list[bytes]:
    partitions = [
        {"partition_index": p, "committed_offset": p, "committed_leader_epoch": -1, "committed_metadata": None}
        for p in range(size)
    ]
    request = sb.encode_request(
        OFFSET_COMMIT,
        9,
        0,
        group_id=HEAVY_GROUP,
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=[{"name": "bench-stall-big", "partitions": partitions}],
    )
    return [bytes(request)]


def produce_all(size: int, topic: str = "bench-stall-big") -> list[bytes]:
    """Produce v9 (acks=all) of one record of 100 bytes to each of ``size`` partitions of one topic: the first
    appends to partitions never written (their directories and segments made), the next to open logs."""
    batch = record_batch(1, 100)
    partitions = [{"index": p, "records": batch} for p in range(size)]
    request = sb.encode_request(
        PRODUCE,
        9,
        0,
        transactional_id=None,
        acks=-1,
        timeout=30_000,
        topic_data=[{"name": topic, "partition_data": partitions}],
    )
    return [bytes(request)]


def create_produce_delete(size: int) -> list[bytes]:
    """``create_and_delete`` with a Produce to every partition in between: the topic deleted has data (a file
    and a directory per partition to remove, a log per partition to close)."""
    create, delete = create_and_delete(size)
    return [create, *produce_all(size, CREATED_TOPIC), delete]


def produce_then_delete_records(size: int) -> list[bytes]:
    """``produce_all``, then DeleteRecords v2 of the same partitions up to their high watermark (offset -1): each
    round writes every partition's new log start offset durably, and takes its older segments out."""
    partitions = [{"partition_index": p, "offset": -1} for p in range(size)]
    delete = sb.encode_request(
        DELETE_RECORDS, 2, 0, topics=[{"name": "bench-stall-big", "partitions": partitions}], timeout=30_000
    )
    return [*produce_all(size), bytes(delete)]


def fetch_all(size: int) -> list[bytes]:
    """Fetch v12 (no fetch session: every partition named, as a consumer of that many partitions sends when the
    server gives no session) of ``size`` partitions of one topic from offset 0, answered at once."""
    partitions = [
        {
            "partition": p,
            "current_leader_epoch": -1,
            "fetch_offset": 0,
            "last_fetched_epoch": -1,
            "log_start_offset": -1,
            "partition_max_bytes": 1 << 20,
        }
        for p in range(size)
    ]
    request = sb.encode_request(
        FETCH,
        12,
        0,
        cluster_id=None,
        replica_id=-1,
        max_wait=0,
        min_bytes=1,
        max_bytes=50 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[{"topic": "bench-stall-big", "partitions": partitions}],
        forgotten_topics_data=[],
        rack_id="",
    )
    return [bytes(request)]


def list_offsets(size: int, timestamp: int = -1) -> list[bytes]:
    """ListOffsets v8 of ``size`` partitions of one topic: the latest offsets (-1), or the first at or after
    ``timestamp`` (a lookup in each partition's time index and a batch read)."""
    partitions = [{"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp} for p in range(size)]
    request = sb.encode_request(
        LIST_OFFSETS,
        8,
        0,
        replica_id=-1,
        isolation_level=0,
        topics=[{"name": "bench-stall-big", "partitions": partitions}],
    )
    return [bytes(request)]


def offset_fetch_all(size: int) -> list[bytes]:
    group = {"group_id": HEAVY_GROUP, "member_id": None, "member_epoch": -1, "topics": None}
    return [bytes(sb.encode_request(OFFSET_FETCH, 9, 0, groups=[group], require_stable=False))]


def offset_fetch_named(size: int) -> list[bytes]:
    topics = [{"name": "bench-stall-big", "partition_indexes": list(range(size))}]
    group = {"group_id": HEAVY_GROUP, "member_id": None, "member_epoch": -1, "topics": topics}
    return [bytes(sb.encode_request(OFFSET_FETCH, 9, 0, groups=[group], require_stable=False))]


DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_PRODUCERS, FIND_COORDINATOR = 32, 44, 61, 10
DESCRIBE_SHARE_GROUP_OFFSETS, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, CREATE_PARTITIONS = 90, 22, 24, 37
CONFIGURED = "bench-stall-conf"
TRANSACTION = "bench-stall-txn"


def describe_configs_all(count: int) -> list[bytes]:
    """DescribeConfigs v4 of ``count`` topics, every entry with its synonyms and documentation (an admin tool or a
    UI listing every topic's configuration)."""
    resources = [
        {"resource_type": 2, "resource_name": name, "configuration_keys": None} for name in layout(count, 1, CONFIGURED)
    ]
    request = sb.encode_request(
        DESCRIBE_CONFIGS, 4, 0, resources=resources, include_synonyms=True, include_documentation=True
    )
    return [bytes(request)]


def alter_configs_all(count: int) -> list[bytes]:
    """IncrementalAlterConfigs v1 setting ``retention.ms`` of ``count`` topics: each one's file written and
    fsynced, then applied."""
    resources = [
        {
            "resource_type": 2,
            "resource_name": name,
            "configs": [{"name": "retention.ms", "config_operation": 0, "value": "86400000"}],
        }
        for name in layout(count, 1, CONFIGURED)
    ]
    return [bytes(sb.encode_request(INCREMENTAL_ALTER_CONFIGS, 1, 0, resources=resources, validate_only=False))]


def describe_producers(size: int) -> list[bytes]:
    topics = [{"name": "bench-stall-big", "partition_indexes": list(range(size))}]
    return [bytes(sb.encode_request(DESCRIBE_PRODUCERS, 0, 0, topics=topics))]


def find_coordinators(count: int) -> list[bytes]:
    """FindCoordinator v4 of ``count`` groups in one request (an admin client batching its lookups)."""
    keys = [f"bench-stall-group-{i:05d}" for i in range(count)]
    return [bytes(sb.encode_request(FIND_COORDINATOR, 4, 0, key_type=0, coordinator_keys=keys))]


def share_offsets(size: int) -> list[bytes]:
    """DescribeShareGroupOffsets v1 of ``size`` named partitions of a share group."""
    topics = [{"topic_name": "bench-stall-big", "partitions": list(range(size))}]
    groups = [{"group_id": "bench-stall-share", "topics": topics}]
    return [bytes(sb.encode_request(DESCRIBE_SHARE_GROUP_OFFSETS, 1, 0, groups=groups))]


def init_transaction(size: int) -> list[bytes]:
    """InitProducerId of the case's transactional id: on a fresh server, producer id 0 at epoch 0."""
    request = sb.encode_request(
        INIT_PRODUCER_ID, 4, 0, transactional_id=TRANSACTION, transaction_timeout=600_000, producer_id=-1,
        producer_epoch=-1,
    )  # fmt: skip
    return [bytes(request)]


def add_partitions_to_txn(size: int) -> list[bytes]:
    """AddPartitionsToTxn v3 of ``size`` partitions to the transaction ``init_transaction`` began (added once;
    the same request again is answered from the transaction as it stands)."""
    request = sb.encode_request(
        ADD_PARTITIONS_TO_TXN,
        3,
        0,
        v3_and_below_transactional_id=TRANSACTION,
        v3_and_below_producer_id=0,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=[{"name": "bench-stall-big", "partitions": list(range(size))}],
    )
    return [bytes(request)]


ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 25, 26, 28
#: the group whose offsets the case's transaction commits (``transactional_offsets``)
TXN_GROUP = "bench-stall-txn-group"


def transactional_offsets(size: int) -> list[bytes]:
    """A transaction over ``size`` partitions of one topic (``init_transaction`` began it) that commits an
    offset for each of them: AddPartitionsToTxn v3, AddOffsetsToTxn v3, TxnOffsetCommit v3 of the ``size``
    partitions, EndTxn v3 (commit): its markers to every partition, then its offsets made the group's."""
    ids = {"transactional_id": TRANSACTION, "producer_id": 0, "producer_epoch": 0}
    partitions = [
        {"partition_index": p, "committed_offset": p, "committed_leader_epoch": -1, "committed_metadata": ""}
        for p in range(size)
    ]
    commit = sb.encode_request(
        TXN_OFFSET_COMMIT, 3, 0, **ids, group_id=TXN_GROUP, generation_id=-1, member_id="", group_instance_id=None,
        topics=[{"name": "bench-stall-big", "partitions": partitions}],
    )  # fmt: skip
    return [
        *add_partitions_to_txn(size),
        bytes(sb.encode_request(ADD_OFFSETS_TO_TXN, 3, 0, **ids, group_id=TXN_GROUP)),
        bytes(commit),
        bytes(sb.encode_request(END_TXN, 3, 0, **ids, committed=True)),
    ]


SHARE_GROUP_DESCRIBE, DELETE_GROUPS = 77, 42


def many_groups(groups: list[str]) -> list[bytes]:
    """Requests naming ``groups`` each: ConsumerGroupDescribe v1 and ShareGroupDescribe v1 (classic groups: each
    answered GROUP_ID_NOT_FOUND), OffsetFetch v9 of every offset of each, DeleteGroups v2 (groups with members:
    each answered NON_EMPTY_GROUP)."""
    fetched = [{"group_id": g, "member_id": None, "member_epoch": -1, "topics": None} for g in groups]
    return [
        bytes(sb.encode_request(CONSUMER_GROUP_DESCRIBE, 1, 0, group_ids=groups, include_authorized_operations=True)),
        bytes(sb.encode_request(SHARE_GROUP_DESCRIBE, 1, 0, group_ids=groups, include_authorized_operations=True)),
        bytes(sb.encode_request(OFFSET_FETCH, 9, 0, groups=fetched, require_stable=False)),
        bytes(sb.encode_request(DELETE_GROUPS, 2, 0, groups_names=groups)),
    ]


def regex_joins(count: int) -> list[bytes]:
    """``count`` members each joining a consumer group of its own with a regular expression of its own that
    matches 10 of the case's topics: each group's first resolution matches its expression against every topic
    name, none of which it has seen (the later rounds rejoin, resolved already)."""
    return [
        bytes(
            sb.encode_request(
                CONSUMER_GROUP_HEARTBEAT,
                1,
                0,
                group_id=f"bench-stall-regex-{i:04d}",
                member_id=f"bench-regex-{i:04d}",
                member_epoch=0,
                instance_id=None,
                rack_id=None,
                rebalance_timeout=3_600_000,
                subscribed_topic_names=[],
                subscribed_topic_regex=f"bench-stall-00[0-9]|never-{i}",
                server_assignor=None,
                topic_partitions=[],
            )
        )
        for i in range(count)
    ]


def auto_create_and_delete(count: int) -> list[bytes]:
    """Metadata v12 naming ``count`` missing topics (auto-created), then DeleteTopics of them."""
    names = [f"bench-stall-auto-{i:04d}" for i in range(count)]
    metadata = sb.encode_request(
        METADATA,
        12,
        0,
        topics=[{"topic_id": uuid.UUID(int=0), "name": n} for n in names],
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    wanted = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    return [bytes(metadata), bytes(sb.encode_request(DELETE_TOPICS, 6, 0, topics=wanted, timeout=30_000))]


def grow_and_delete(count: int) -> list[bytes]:
    """CreateTopics of ``count`` one-partition topics, CreatePartitions growing each to 11, DeleteTopics."""
    names = [f"bench-stall-grown-{i:04d}" for i in range(count)]
    one = {"num_partitions": 1, "replication_factor": 1, "assignments": [], "configs": []}
    create = sb.encode_request(
        CREATE_TOPICS, 7, 0, topics=[{"name": n, **one} for n in names], timeout=30_000, validate_only=False
    )
    grow = sb.encode_request(
        CREATE_PARTITIONS,
        3,
        0,
        topics=[{"name": n, "count": 11, "assignments": None} for n in names],
        timeout=30_000,
        validate_only=False,
    )
    wanted = [{"name": n, "topic_id": uuid.UUID(int=0)} for n in names]
    delete = sb.encode_request(DELETE_TOPICS, 6, 0, topics=wanted, timeout=30_000)
    return [bytes(create), bytes(grow), bytes(delete)]


LIST_GROUPS, DESCRIBE_GROUPS, CONSUMER_GROUP_DESCRIBE = 16, 15, 69
BIG_GROUP = "bench-stall-inspected"
_KIP848: list[Any] = []


def kip848() -> Any:
    """``bench/kip848.py`` (its group records), loaded once when a case preloads groups."""
    if not _KIP848:
        spec = importlib.util.spec_from_file_location("bench_kip848", Path(__file__).with_name("kip848.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench_kip848"] = module
        spec.loader.exec_module(module)
        _KIP848.append(module)
    return _KIP848[0]


def preload_groups(classic: dict[str, int], consumer: dict[str, int]) -> Callable[[Path], None]:
    """Groups (id -> members) written to a data directory's coordinator log: classic groups Stable, consumer
    groups with every member Stable and owning its target (``bench/kip848.py``)."""

    def write(data: Path) -> None:
        k = kip848()

        def records(topics: Any) -> list[Any]:
            def owned(members: int) -> Any:
                """A group of 1,000 members or more shares out the topics' 10,000 partitions; a smaller one as
                many partitions of one topic as it has members (one each)."""
                return topics if members >= 1_000 else {"topic-0": (topics["topic-0"][0], members)}

            out: list[Any] = []
            for group, members in classic.items():
                out += k.classic_group_records(group, k.member_ids(f"{group}-m", members), owned(members))
            for group, members in consumer.items():
                out += k.consumer_group_records(group, k.member_ids(f"{group}-m", members), owned(members))
            return out

        k.prepare_data_dir(data, [records])

    return write


def list_groups_requests(size: int) -> list[bytes]:
    return [
        bytes(sb.encode_request(LIST_GROUPS, 5, 0, states_filter=states, types_filter=types))
        for states, types in (([], []), (["Stable"], []), ([], ["consumer"]))
    ]


def describe_groups(groups: list[str]) -> list[bytes]:
    request = sb.encode_request(DESCRIBE_GROUPS, 5, 0, groups=groups, include_authorized_operations=False)
    return [bytes(request)]


def consumer_group_describe(size: int) -> list[bytes]:
    request = sb.encode_request(
        CONSUMER_GROUP_DESCRIBE, 1, 0, group_ids=[BIG_GROUP], include_authorized_operations=False
    )
    return [bytes(request)]


CONSUMER_GROUP_HEARTBEAT = 68
#: the preloaded consumer group members join and leave (``kip848_joins``)
JOINED_GROUP = "bench-stall-joined"


def kip848_joins(size: int) -> list[bytes]:
    """Members joining and leaving a preloaded KIP-848 group (everyone on ``bench/kip848.py``'s ten topics) with
    other topics, so that every heartbeat here bumps the group epoch and needs a full target computation: one
    member (re)joins on five topics, another joins on the other five, then leaves."""
    names = [f"topic-{i}" for i in range(10)]

    def heartbeat(member: str, epoch: int, topics: list[str] | None) -> bytes:
        joining = epoch == 0
        request = sb.encode_request(
            CONSUMER_GROUP_HEARTBEAT,
            1,
            0,
            group_id=JOINED_GROUP,
            member_id=member,
            member_epoch=epoch,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=3_600_000 if joining else -1,
            subscribed_topic_names=topics,
            subscribed_topic_regex=None,
            server_assignor=None,
            topic_partitions=[] if joining else None,
        )
        return bytes(request)

    stays, goes = "bench-stall-stays-0000000000", "bench-stall-comes-and-goes"
    return [heartbeat(stays, 0, names[:5]), heartbeat(goes, 0, names[5:]), heartbeat(goes, -1, None)]


def cases(scale: float) -> list[Case]:
    """Every case at ``scale`` (1 full size; ``--quick`` a tenth)."""

    def n(value: int) -> int:
        return max(1, round(value * scale))

    big = {"bench-stall-big": n(10_000)}
    return [
        Case("metadata-10k", layout(100, n(100)), lambda _: metadata_all(0)),
        Case("describe-topic-partitions", layout(100, n(100)), lambda _: describe_all(0)),
        Case("offset-commit-10k", big, lambda _: offset_commit(n(10_000))),
        Case("metadata-100k", layout(100, n(1_000)), lambda _: metadata_all(0)),
        Case("create-topics-10k", {}, lambda _: create_and_delete(n(10_000))),
        Case("create-topics-3000", {}, lambda _: create_and_delete_many(n(3_000))),
        Case("delete-topics-10k", {}, lambda _: create_produce_delete(n(10_000))),
        Case("list-offsets-10k", big, lambda _: list_offsets(n(10_000))),
        Case(
            "list-offsets-by-time-10k",
            big,
            lambda _: list_offsets(n(10_000), timestamp=1),
            prepare=lambda _: produce_all(n(10_000)),
        ),
        Case("fetch-10k", big, lambda _: fetch_all(n(10_000)), prepare=lambda _: produce_all(n(10_000))),
        Case("produce-10k", big, lambda _: produce_all(n(10_000))),
        Case("delete-records-10k", big, lambda _: produce_then_delete_records(n(10_000))),
        Case("offset-fetch-10k", big, lambda _: offset_fetch_all(0), prepare=lambda _: offset_commit(n(10_000))),
        Case(
            "offset-fetch-named-10k",
            big,
            lambda _: offset_fetch_named(n(10_000)),
            prepare=lambda _: offset_commit(n(10_000)),
        ),
        Case(
            "list-groups-10k",
            {},
            list_groups_requests,
            preload=preload_groups(
                {f"bench-stall-classic-{i:05d}": 1 for i in range(n(5_000))},
                {f"bench-stall-consumer-{i:05d}": 1 for i in range(n(5_000))},
            ),
        ),
        Case(
            "describe-groups-10k-members",
            {},
            lambda _: describe_groups([BIG_GROUP]),
            preload=preload_groups({BIG_GROUP: n(10_000)}, {}),
        ),
        Case(
            "describe-groups-1000x10",
            {},
            lambda _: describe_groups([f"bench-stall-ten-{i:04d}" for i in range(n(1_000))]),
            preload=preload_groups({f"bench-stall-ten-{i:04d}": 10 for i in range(n(1_000))}, {}),
        ),
        Case(
            "consumer-group-describe-10k",
            {},
            consumer_group_describe,
            preload=preload_groups({}, {BIG_GROUP: n(10_000)}),
        ),
        Case("kip848-joins-10k", {}, kip848_joins, preload=preload_groups({}, {JOINED_GROUP: n(10_000)})),
        Case(
            "kip848-joins-10k-paced",
            {},
            kip848_joins,
            preload=preload_groups({}, {JOINED_GROUP: n(10_000)}),
            pace_s=0.25,
        ),
        Case(
            "classic-joins-10k",
            {},
            lambda _: [],
            worker=functools.partial(classic_rebalances, n(10_000), max(1, n(10_000) // MEMBERS_PER_CONNECTION)),
        ),
        Case("describe-configs-1000", layout(n(1_000), 1, CONFIGURED), lambda _: describe_configs_all(n(1_000))),
        Case("alter-configs-1000", layout(n(1_000), 1, CONFIGURED), lambda _: alter_configs_all(n(1_000))),
        Case("describe-producers-10k", big, lambda _: describe_producers(n(10_000))),
        Case("find-coordinator-10k", {}, lambda _: find_coordinators(n(10_000))),
        Case("share-offsets-10k", big, lambda _: share_offsets(n(10_000))),
        Case(
            "add-partitions-to-txn-10k",
            big,
            lambda _: add_partitions_to_txn(n(10_000)),
            prepare=init_transaction,
        ),
        Case("metadata-auto-create-500", {}, lambda _: auto_create_and_delete(n(500))),
        Case("txn-offsets-10k", big, lambda _: transactional_offsets(n(10_000)), prepare=init_transaction),
        Case(
            "groups-1000",
            {"bench-stall-000": 1},
            lambda _: many_groups([f"bench-stall-ten-{i:04d}" for i in range(n(1_000))]),
            preload=preload_groups({f"bench-stall-ten-{i:04d}": 10 for i in range(n(1_000))}, {}),
        ),
        Case("regex-10k-topics", layout(n(10_000), 1, "bench-stall"), lambda _: regex_joins(200)),
        Case("create-partitions-1000", {}, lambda _: grow_and_delete(n(1_000))),
        Case(
            "share-groups-10k",
            big,
            lambda _: [],
            prepare=lambda _: produce_all(n(10_000)),
            worker=functools.partial(share_cycles, n(10_000)),
        ),
        Case(
            "kip848-joins-10k-batched",
            {},
            kip848_joins,
            preload=preload_groups({}, {JOINED_GROUP: n(10_000)}),
            server_args=("--consumer-assignment-interval-ms", "1000"),
        ),
    ]


# ---------------------------------------------------------------------------------------------------------------
# the heavy connections (a child process)


def heavy_worker(port: int, requests: list[bytes], seconds: float, out: Connection, pace_s: float = 0.0) -> None:
    """Send ``requests`` in turn, each as soon as the previous answer is read, until ``seconds`` pass; send back
    the time each took. (A child process: blocking sockets, nothing decoded.)"""
    latencies: list[float] = []
    try:
        with socket.create_connection((sb.HOST, port), timeout=PHASE_TIMEOUT_S) as sock:
            deadline = time.monotonic() + seconds
            correlation_id = 0
            while time.monotonic() < deadline:
                template = requests[correlation_id % len(requests)]
                correlation_id += 1
                data = bytearray(template)
                struct.pack_into(">i", data, 8, correlation_id)
                began = time.perf_counter()
                sock.sendall(data)
                frame = _read_frame(sock)
                latencies.append(time.perf_counter() - began)
                if struct.unpack_from(">i", frame)[0] != correlation_id:
                    raise RuntimeError(f"response to {correlation_id} has another correlation id")
                if pace_s:
                    time.sleep(pace_s)
        out.send(("ok", latencies))
    except Exception as exc:  # reported, not raised: the parent decides
        out.send(("error", f"{type(exc).__name__}: {exc}"))


#: members of a ``classic_rebalances`` group per connection (below the server's 64 requests in flight on one)
MEMBERS_PER_CONNECTION = 50


def classic_rebalances(members: int, connections: int, port: int, seconds: float, out: Connection) -> None:
    """Classic groups of ``members`` members formed one after another until ``seconds`` pass, each as
    ``bench/server.py``'s join case forms one (the two-phase JoinGroup v9 of every member, the join phase
    completing for all of them at once, the leader's range assignment over ten topics of 1,000 partitions and
    every member's SyncGroup v5), its members sharing ``connections`` connections, then left with one LeaveGroup
    of them all; sends back the time each rebalance took (last JoinGroup written to last SyncGroup answer)."""

    class NoProcess:
        def cpu_seconds(self) -> float:
            return 0.0

    async def run() -> list[float]:
        conns = [await sb.bounded(sb.KafkaConnection.open(port), "connect") for _ in range(connections + 1)]
        admin, per_member = conns[-1], [conns[i % connections] for i in range(members)]
        took: list[float] = []
        deadline = time.monotonic() + seconds
        round_ = 0
        while time.monotonic() < deadline:
            round_ += 1
            run, joined = await sb.join_case(NoProcess(), per_member, admin, f"bench-stall-classic-{round_}")
            took.append(run.seconds)
            await sb.leave_all(admin, joined)
        for conn in conns:
            conn.close()
        return took

    send_outcome(out, run)


SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE = 76, 78, 79
SHARE_TOPIC = "bench-stall-big"
#: the share group config resource type (IncrementalAlterConfigs) and ShareAcknowledge's ACCEPT
GROUP_RESOURCE, ACCEPT = 32, 1


def share_cycles(partitions: int, port: int, seconds: float, out: Connection) -> None:
    """Share groups (KIP-932) over every partition of ``SHARE_TOPIC`` (one record in each, produced before the
    window), one after another until ``seconds`` pass: a new group (``share.auto.offset.reset`` earliest), its
    member's join (ShareGroupHeartbeat v1, every partition assigned and initialized), a ShareFetch v1 opening a
    session of every partition (every record acquired), a ShareAcknowledge v1 accepting them all, the session
    closed (ShareAcknowledge -1) and the member's leave; sends back the time each cycle took."""

    async def call(conn: Any, api_key: int, version: int, **fields: Any) -> Any:
        return await sb.bounded(sb._request(conn, api_key, version, **fields), f"api {api_key}", 120)

    async def run() -> list[float]:
        conn = await sb.bounded(sb.KafkaConnection.open(port), "connect")
        meta = await call(
            conn,
            METADATA,
            12,
            topics=[{"name": SHARE_TOPIC, "topic_id": uuid.UUID(int=0)}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        topic_id = meta.topics[0].topic_id
        every = [{"partition_index": p, "acknowledgement_batches": []} for p in range(partitions)]
        accept = [
            {
                "partition_index": p,
                "acknowledgement_batches": [{"first_offset": 0, "last_offset": 0, "acknowledge_types": [ACCEPT]}],
            }
            for p in range(partitions)
        ]
        took: list[float] = []
        deadline = time.monotonic() + seconds
        cycle = 0
        while time.monotonic() < deadline:
            cycle += 1
            group, member = f"bench-stall-share-{cycle}", str(uuid.uuid4())
            reset = [{"name": "share.auto.offset.reset", "config_operation": 0, "value": "earliest"}]
            await call(
                conn,
                INCREMENTAL_ALTER_CONFIGS,
                1,
                resources=[{"resource_type": GROUP_RESOURCE, "resource_name": group, "configs": reset}],
                validate_only=False,
            )
            began = time.perf_counter()
            joined = await call(
                conn,
                SHARE_GROUP_HEARTBEAT,
                1,
                group_id=group,
                member_id=member,
                member_epoch=0,
                rack_id=None,
                subscribed_topic_names=[SHARE_TOPIC],
            )
            sb.expect(joined.error_code == 0, f"ShareGroupHeartbeat: {joined.error_code}")
            fetched = await call(
                conn,
                SHARE_FETCH,
                1,
                group_id=group,
                member_id=member,
                share_session_epoch=0,
                max_wait=0,
                min_bytes=1,
                max_bytes=64 << 20,
                max_records=10 * partitions,
                batch_size=10 * partitions,
                topics=[{"topic_id": topic_id, "partitions": every}],
                forgotten_topics_data=[],
            )
            sb.expect(fetched.error_code == 0, f"ShareFetch: {fetched.error_code}")
            for epoch, acks in ((1, accept), (-1, [])):
                acked = await call(
                    conn,
                    SHARE_ACKNOWLEDGE,
                    1,
                    group_id=group,
                    member_id=member,
                    share_session_epoch=epoch,
                    topics=[{"topic_id": topic_id, "partitions": acks}] if acks else [],
                )
                sb.expect(acked.error_code == 0, f"ShareAcknowledge: {acked.error_code}")
            await call(
                conn,
                SHARE_GROUP_HEARTBEAT,
                1,
                group_id=group,
                member_id=member,
                member_epoch=-1,
                rack_id=None,
                subscribed_topic_names=None,
            )
            took.append(time.perf_counter() - began)
        conn.close()
        return took

    send_outcome(out, run)


def send_outcome(out: Connection, run: Callable[[], Coroutine[Any, Any, list[float]]]) -> None:
    """(A worker child's end) Send the parent what ``run`` returned, or its failure: reported, not raised (the
    parent decides)."""
    try:
        out.send(("ok", asyncio.run(run())))
    except Exception as exc:
        out.send(("error", f"{type(exc).__name__}: {exc}"))


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read(sock, 4))[0]
    return _read(sock, size)


def _read(sock: socket.socket, n: int) -> bytes:
    buffer = bytearray(n)
    view, got = memoryview(buffer), 0
    while got < n:
        received = sock.recv_into(view[got:], n - got)
        if not received:
            raise ConnectionError(f"connection closed after {got} of {n} bytes")
        got += received
    return bytes(buffer)


# ---------------------------------------------------------------------------------------------------------------
# the healthy members


class Paced:
    """One request every ``interval`` seconds on ``conn`` on a fixed schedule; latencies by send time."""

    def __init__(self, conn: Any, template: bytes, interval: float) -> None:
        self.conn = conn
        self.template = template
        self.interval = interval
        self.latencies: list[tuple[float, float]] = []  # (sent at, latency s)
        self.lost = 0
        self.outstanding = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        deadline = time.monotonic() + PHASE_TIMEOUT_S
        while self.outstanding and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    async def _run(self) -> None:
        next_at = time.perf_counter()
        while True:
            correlation_id = self.conn.next_correlation_id()
            data = bytearray(self.template)
            struct.pack_into(">i", data, 8, correlation_id)
            self.outstanding += 1
            self.conn.send(data, correlation_id, self._on_frame, time.perf_counter())
            next_at += self.interval
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

    def _on_frame(self, frame: bytes, sent: float) -> None:
        self.outstanding -= 1
        if not frame:
            self.lost += 1
            return
        self.latencies.append((sent, time.perf_counter() - sent))

    def between(self, start: float, end: float) -> list[float]:
        return sorted(lat for sent, lat in self.latencies if start <= sent < end)


async def healthy_member(conn: Any, index: int, hb_interval: float, commit_interval: float) -> tuple[Paced, Paced]:
    """A one-member classic group on ``conn`` and its paced heartbeats and commits (not started)."""
    group = f"bench-stall-healthy-{index}"
    metadata = sb.encode_subscription(sb.ConsumerProtocolSubscription(topics=(COMMIT_TOPIC,)))
    fields = sb._join_fields(group, "", metadata)
    first = await sb.bounded(sb._request(conn, sb.JOIN, sb.JOIN_V, **fields), "JoinGroup")
    member_id = first.member_id
    joined = await sb.bounded(sb._request(conn, sb.JOIN, sb.JOIN_V, **{**fields, "member_id": member_id}), "rejoin")
    sb.expect(joined.error_code == 0, f"JoinGroup error {joined.error_code}")
    sync = sb._sync_fields(group, joined.generation_id, member_id, [{"member_id": member_id, "assignment": b""}])
    synced = await sb.bounded(sb._request(conn, sb.SYNC, sb.SYNC_V, **sync), "SyncGroup")
    sb.expect(synced.error_code == 0, f"SyncGroup error {synced.error_code}")
    heartbeat = sb.encode_request(
        sb.HEARTBEAT,
        sb.HEARTBEAT_V,
        0,
        group_id=group,
        generation_id=joined.generation_id,
        member_id=member_id,
        group_instance_id=None,
    )
    partitions = [
        {"partition_index": p, "committed_offset": 1000 + p, "committed_leader_epoch": -1, "committed_metadata": None}
        for p in range(10)
    ]
    commit = sb.encode_request(
        OFFSET_COMMIT,
        9,
        0,
        group_id=group,
        generation_id_or_member_epoch=joined.generation_id,
        member_id=member_id,
        group_instance_id=None,
        topics=[{"name": COMMIT_TOPIC, "partitions": partitions}],
    )
    return Paced(conn, bytes(heartbeat), hb_interval), Paced(conn, bytes(commit), commit_interval)


class LoopLag:
    """How late this process's own event loop wakes from a 10 ms sleep: a load generator that cannot keep up
    shows here, not as the server's latency."""

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []  # (woke at, seconds late)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            now = time.perf_counter()
            self.lags.append((now, now - before - 0.01))

    def max_between(self, start: float, end: float) -> float:
        return max((lag for at, lag in self.lags if start <= at < end), default=0.0)


# ---------------------------------------------------------------------------------------------------------------
# one run


def percentiles(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"n": 0, "p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3

    return {"n": len(latencies), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": latencies[-1] * 1e3}


@dataclass(slots=True)
class StallRun:
    case: str
    tree: str
    heavy_answered: int
    heavy_p50_ms: float
    heavy_max_ms: float
    heartbeat_quiet: dict[str, float]
    heartbeat: dict[str, float]
    commit_quiet: dict[str, float]
    commit: dict[str, float]
    stalls_in_window: dict[str, float] | None  # None: the server has no watchdog
    longest_turn_ms: float | None  # since the server started
    longest_in_window: bool  # the longest turn happened in the window (else before it: set-up)
    generator_lag_max_ms: float  # this process's own event loop, late by at most this in the window
    server_cpu_s: float
    lost: int
    error: str | None = None
    notes: list[str] = field(default_factory=list)


class StallServer(sb.ServerProcess):  # type: ignore[misc,name-defined]
    """``regroup serve`` with its metrics endpoint on a port of its choosing and room for the largest layout."""

    #: the watchdog's threshold (``--stall-warn-ms``), None for the server's default
    stall_warn_ms: int | None = None
    #: the case's own flags
    extra_args: tuple[str, ...] = ()

    def command(self) -> list[str]:
        long_session = ["--consumer-session-timeout-ms", "3600000"]  # loaded groups' members are never fenced
        stall = [] if self.stall_warn_ms is None else ["--stall-warn-ms", str(self.stall_warn_ms)]
        more = [*long_session, *stall, *self.extra_args]
        return [*super().command(), "--metrics-port", "0", "--max-partitions", "250000", *more]

    def metrics_port(self) -> int:
        match = _METRICS.search(self.log_path.read_bytes())
        if match is None:
            raise RuntimeError("the server did not name its metrics port")
        return int(match.group(1))


def scrape(port: int) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://{sb.HOST}:{port}/metrics", timeout=60) as response:
        text = response.read().decode()
    return {(m.group(1), m.group(2) or ""): float(m.group(3)) for m in _SAMPLE.finditer(text)}


async def create_topics(conn: Any, topics: dict[str, int]) -> None:
    """Create ``topics``, at most 10,000 partitions and ``TOPICS_PER_REQUEST`` topics per CreateTopics (so that
    the set-up holds the server's loop as little as it can)."""
    batch: list[dict[str, Any]] = []
    total = 0
    pending = list(topics.items())
    while pending or batch:
        fits = total + (pending[0][1] if pending else 0) <= MAX_PARTITIONS_PER_REQUEST
        if pending and fits and len(batch) < TOPICS_PER_REQUEST:
            name, count = pending.pop(0)
            batch.append(
                {"name": name, "num_partitions": count, "replication_factor": 1, "assignments": [], "configs": []}
            )
            total += count
            continue
        created = await sb.bounded(
            sb._request(conn, CREATE_TOPICS, 7, topics=batch, timeout=30_000, validate_only=False), "CreateTopics"
        )
        sb.expect(all(t.error_code == 0 for t in created.topics), f"CreateTopics failed: {created.topics[:3]}")
        batch, total = [], 0


async def stall_case(args: argparse.Namespace, server: StallServer, tree: str, case: Case) -> StallRun:
    metrics_port = server.metrics_port()
    admin = await sb.bounded(sb.KafkaConnection.open(server.port), "connect")
    await create_topics(admin, {COMMIT_TOPIC: 10, **case.topics})
    for request in case.prepare(0) if case.prepare else ():
        await sb.bounded(_raw(admin, request), "prepare")
    members = []
    for i in range(args.members):
        conn = await sb.bounded(sb.KafkaConnection.open(server.port), "connect")
        members.append(await healthy_member(conn, i, args.hb_interval_ms / 1e3, args.commit_interval_ms / 1e3))
    paced = [p for pair in members for p in pair]
    lag = LoopLag()
    lag.start()
    for p in paced:
        p.start()
    quiet_start = time.perf_counter()
    await asyncio.sleep(args.quiet)
    before = scrape(metrics_port)
    cpu_before = server.cpu_seconds()
    window_start = time.perf_counter()
    receiver, sender = multiprocessing.Pipe(duplex=False)
    if case.worker is not None:
        workers = [multiprocessing.Process(target=case.worker, args=(server.port, args.window, sender))]
    else:
        workers = [
            multiprocessing.Process(
                target=heavy_worker, args=(server.port, case.requests(0), args.window, sender, case.pace_s)
            )
            for _ in range(args.heavy)
        ]
    for worker in workers:
        worker.start()
    results = []
    loop = asyncio.get_running_loop()
    for _ in workers:
        results.append(await sb.bounded(loop.run_in_executor(None, receiver.recv), "heavy worker", PHASE_TIMEOUT_S))
    window_end = time.perf_counter()
    for worker in workers:
        worker.join(timeout=30)
    cpu = server.cpu_seconds() - cpu_before
    after = scrape(metrics_port)
    for p in paced:
        await p.stop()
    lag.stop()
    errors = [detail for kind, detail in results if kind == "error"]
    heavy = sorted(lat for kind, detail in results if kind == "ok" for lat in detail)
    hb = [p for p, _ in members]
    commits = [c for _, c in members]

    def window(items: list[Paced], start: float, end: float) -> dict[str, float]:
        return percentiles(sorted(lat for p in items for lat in p.between(start, end)))

    stalls = None
    if any(name == "regroup_event_loop_stalls_total" for name, _ in after):
        stalls = {
            labels.removeprefix('api="').removesuffix('"'): value
            - before.get(("regroup_event_loop_stalls_total", labels), 0)
            for (name, labels), value in after.items()
            if name == "regroup_event_loop_stalls_total" and value - before.get((name, labels), 0) > 0
        }
    longest = after.get(("regroup_event_loop_longest_turn_seconds", ""))
    longest_before = before.get(("regroup_event_loop_longest_turn_seconds", ""))
    admin.close()
    for p in hb:
        p.conn.close()
    return StallRun(
        case=case.name,
        tree=tree,
        heavy_answered=len(heavy),
        heavy_p50_ms=heavy[len(heavy) // 2] * 1e3 if heavy else float("nan"),
        heavy_max_ms=heavy[-1] * 1e3 if heavy else float("nan"),
        heartbeat_quiet=window(hb, quiet_start, window_start),
        heartbeat=window(hb, window_start, window_end),
        commit_quiet=window(commits, quiet_start, window_start),
        commit=window(commits, window_start, window_end),
        stalls_in_window=stalls,
        longest_turn_ms=None if longest is None else longest * 1e3,
        longest_in_window=longest is not None and longest_before is not None and longest > longest_before,
        generator_lag_max_ms=lag.max_between(window_start, window_end) * 1e3,
        server_cpu_s=cpu,
        lost=sum(p.lost for p in paced),
        error="; ".join(errors) or None,
    )


def _raw(conn: Any, request: bytes) -> asyncio.Future[bytes]:
    """Send a pre-encoded request; the future resolves to its response frame."""
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    correlation_id = conn.next_correlation_id()
    data = bytearray(request)
    struct.pack_into(">i", data, 8, correlation_id)

    def on_frame(frame: bytes, _: Any) -> None:
        if not future.done():
            future.set_result(frame)

    conn.send(data, correlation_id, on_frame, None)
    return future


# ---------------------------------------------------------------------------------------------------------------
# reporting


def _lat(p: dict[str, float]) -> str:
    return f"{p['p50_ms']:.1f} / {p['p99_ms']:.1f} / {p['max_ms']:.1f}"


def _stalls(run: StallRun) -> str:
    if run.stalls_in_window is None:
        return "n/a"
    by_api = ", ".join(f"{api} {n:.0f}" for api, n in sorted(run.stalls_in_window.items()))
    return f"{sum(run.stalls_in_window.values()):.0f}" + (f" ({by_api})" if by_api else "")


def _longest(run: StallRun) -> str:
    if run.longest_turn_ms is None:
        return "n/a"
    return f"{run.longest_turn_ms:.0f} ms" + ("" if run.longest_in_window else " (set-up)")


def describe(run: StallRun) -> str:
    return (
        f"{run.case} [{run.tree}]: heavy {run.heavy_answered} answered (p50 {run.heavy_p50_ms:.1f} ms, "
        f"max {run.heavy_max_ms:.1f} ms); heartbeat p50/p99/max {_lat(run.heartbeat)} ms "
        f"(quiet {_lat(run.heartbeat_quiet)}); commit {_lat(run.commit)} ms (quiet {_lat(run.commit_quiet)}); "
        f"stalls {_stalls(run)}, longest turn {_longest(run)}; server cpu {run.server_cpu_s:.1f} s; "
        f"generator lag max {run.generator_lag_max_ms:.0f} ms" + (f"; ERROR {run.error}" if run.error else "")
    )


def table(runs: list[StallRun]) -> str:
    lines = [
        "| case | server | heavy answered (p50) | heartbeat p50 / p99 / max ms | commit p50 / p99 / max ms "
        "| stalls in window | longest turn | server CPU |",
        "|---|---|---|---|---|---|---|---|",
    ]
    order = {case: i for i, case in enumerate(dict.fromkeys(r.case for r in runs))}
    for run in sorted(runs, key=lambda r: (order[r.case], r.tree != "before")):
        lines.append(
            f"| {run.case} | {run.tree} | {run.heavy_answered} ({run.heavy_p50_ms:.1f} ms) | {_lat(run.heartbeat)} "
            f"| {_lat(run.commit)} | {_stalls(run)} | {_longest(run)} | {run.server_cpu_s:.1f} s |"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# --micro: one Metadata answer's CPU, in process

MICRO_LAYOUTS = ((100, 100), (10_000, 1), (100, 1_000), (10_000, 10))


def micro_child(out: str) -> None:
    """Child mode (``--micro-child``): time all-topics Metadata v12 answers of this process's regroup; JSON to
    ``out``."""
    import importlib
    import statistics
    import tempfile

    from regroup.network.codec import encode_response
    from regroup.server.api import RequestContext
    from regroup.server.handlers.topics import build, handle_metadata
    from regroup.server.topics import TopicStore
    from regroup.storage.record_log import FsyncPolicy

    dispatch = importlib.import_module("regroup.server.dispatch")
    encode = getattr(dispatch, "_encode", encode_response)  # (a tree whose handlers return entities only)

    class Broker:
        auto_create_topics, default_partitions, host, port = False, 1, "127.0.0.1", 9092

        def __init__(self, store: Any) -> None:
            self.topic_store = store

        def endpoint(self, listener: str) -> tuple[str, int]:
            return self.host, self.port

    mod = importlib.import_module("kio.schema.metadata.v12.request")
    request = build(
        mod,
        "MetadataRequest",
        topics=None,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    ctx = RequestContext(METADATA, 12, 1, "bench", "127.0.0.1", 1)

    def answer(broker: Broker) -> tuple[float, int]:
        began = time.process_time()
        coroutine = handle_metadata(broker, ctx, request)
        try:
            coroutine.send(None)
            raise RuntimeError("the Metadata handler suspended")
        except StopIteration as stop:
            data = encode(1, stop.value)
        return time.process_time() - began, len(data)

    results = []
    for topics, partitions in MICRO_LAYOUTS:
        with tempfile.TemporaryDirectory() as tmp:
            store = TopicStore.open(tmp, fsync=FsyncPolicy.NEVER, max_partitions=1_000_000)
            try:
                for i in range(topics):
                    store.create_topic(f"t-{i:05d}", partitions)
                broker = Broker(store)
                cold, size = answer(broker)
                warm = statistics.median(answer(broker)[0] for _ in range(20))
            finally:
                store.close()
        row = {"topics": topics, "partitions": partitions, "cold_ms": cold * 1e3, "warm_ms": warm * 1e3}
        results.append({**row, "bytes": size})
    Path(out).write_text(json.dumps(results))


def micro(trees: list[tuple[str, str | None]]) -> str:
    """Run ``micro_child`` for each tree; the table."""
    import os
    import subprocess
    import tempfile

    rows: dict[str, list[dict[str, Any]]] = {}
    for tree, source in trees:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            env = dict(os.environ)
            if source is not None:
                env["PYTHONPATH"] = os.pathsep.join(p for p in (source, env.get("PYTHONPATH")) if p)
            subprocess.run([sys.executable, __file__, "--micro-child", out.name], env=env, check=True)
            rows[tree] = json.loads(Path(out.name).read_text())
    lines = [
        "| partitions (topics x partitions) | answer | " + " | ".join(f"{t} cold / warm ms" for t, _ in trees) + " |",
        "|---|---|" + "---|" * len(trees),
    ]
    for i, (topics, partitions) in enumerate(MICRO_LAYOUTS):
        size = rows[trees[-1][0]][i]["bytes"]
        cells = " | ".join(f"{rows[t][i]['cold_ms']:.1f} / {rows[t][i]['warm_ms']:.2f}" for t, _ in trees)
        lines.append(f"| {topics * partitions:,} ({topics:,} x {partitions:,}) | {size / 1e6:.2f} MB | {cells} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--before", metavar="DIR", help="also run the server from the regroup package under DIR")
    parser.add_argument("--rounds", type=int, default=1, help="alternate the trees this many times (default 1)")
    parser.add_argument("--quick", action="store_true", help="smoke run: three cases at a tenth, 3 s windows")
    parser.add_argument("--cases", help="comma-separated case names (default: every case; see the module doc)")
    parser.add_argument("--members", type=int, default=10, help="healthy members, one connection each (10)")
    parser.add_argument("--heavy", type=int, default=1, help="heavy connections (default 1)")
    parser.add_argument("--window", type=float, default=10.0, help="seconds the heavy connections run (10)")
    parser.add_argument("--quiet", type=float, default=3.0, help="baseline seconds before them (3)")
    parser.add_argument("--hb-interval-ms", type=float, default=100.0, help="healthy heartbeat period (100 ms)")
    parser.add_argument("--commit-interval-ms", type=float, default=200.0, help="healthy commit period (200 ms)")
    parser.add_argument(
        "--fsync", default="never", choices=("always", "interval", "never"), help="the server's policy (never)"
    )
    parser.add_argument(
        "--stall-warn-ms", type=int, help="the server's stall watchdog threshold (default: the server's own)"
    )
    parser.add_argument("--data-root", help="where the temporary data directories go (default: the system tmp)")
    parser.add_argument("--json", metavar="OUT", help="write machine-readable results to OUT")
    parser.add_argument("--micro", action="store_true", help="one Metadata answer's CPU per tree (see the doc)")
    parser.add_argument("--micro-child", metavar="OUT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.micro_child:
        micro_child(args.micro_child)
        return 0
    chosen = cases(0.1 if args.quick else 1.0)
    if args.quick:
        chosen = chosen[:3]
        args.window, args.quiet = min(args.window, 3.0), min(args.quiet, 1.0)
    if args.cases:
        wanted = args.cases.split(",")
        unknown = set(wanted) - {c.name for c in chosen}
        if unknown:
            parser.error(f"unknown case(s): {', '.join(sorted(unknown))}")
        chosen = [c for c in chosen if c.name in wanted]
    trees: list[tuple[str, str | None]] = [("after", None)]
    if args.before:
        trees.insert(0, ("before", args.before))
    if args.data_root is not None and not Path(args.data_root).is_dir():
        parser.error(f"--data-root {args.data_root}: no such directory")
    facts = sb.machine_facts(args.data_root)
    print("machine: " + ", ".join(f"{k}={v}" for k, v in facts.items()), flush=True)
    if args.micro:
        print(micro(trees))
        return 0
    runs: list[StallRun] = []
    for round_ in range(1, args.rounds + 1):
        for case in chosen:
            for tree, source in trees if round_ % 2 else trees[::-1]:  # ABBA: a drifting load hits both alike
                server = StallServer(args.fsync, args.data_root, source=source)
                server.stall_warn_ms = args.stall_warn_ms
                server.extra_args = case.server_args
                if case.preload is not None:
                    case.preload(server.dir / "data")
                with sb.running(server, keep=False):
                    run = asyncio.run(stall_case(args, server, tree, case))
                runs.append(run)
                print("  " + describe(run), flush=True)
    print(table(runs))
    if args.json:
        payload = {"machine": facts, "args": vars(args), "runs": [asdict(r) for r in runs]}
        Path(args.json).write_text(json.dumps(payload, indent=2))
    return 0 if all(r.error is None and r.lost == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
