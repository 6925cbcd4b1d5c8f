"""Share groups over more partitions than one core call takes (``handlers/share_fetch.py``'s
``PARTITIONS_PER_CALL``, ``share_groups.INITIALIZE_CHUNK``, ``share_offsets.DESCRIBE_PARTITIONS_PER_CALL`` and
``ALTER_PARTITIONS_PER_CALL``, ``scrape.LAG_PARTITIONS_PER_CALL``), against a real ``regroup serve``: a share
session of 1,200 partitions with a record in each is initialized, fetched (every partition's record acquired
once; MaxRecords a bound over the whole request, not per call), acknowledged and described, and the share lag
metric sums it; a closed session gives back what its member held in every partition; the offsets of 1,200
partitions are altered and deleted; a fetch naming partitions the group has no state for yet still delivers the
records of those it has (they were acquired and then dropped, held by the member until their lock expired)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode as E

from regroup.server.handlers.share_fetch import PARTITIONS_PER_CALL
from regroup.server.handlers.share_groups import INITIALIZE_CHUNK
from regroup.server.handlers.share_offsets import ALTER_PARTITIONS_PER_CALL, DESCRIBE_PARTITIONS_PER_CALL
from regroup.server.scrape import LAG_PARTITIONS_PER_CALL
from tests.server.conftest import ServerProcess, free_port, served
from tests.server.test_metrics import scrape, value
from tests.server.test_share_wire import (
    ACCEPT,
    LOCK_MS,
    PRODUCE,
    acked,
    alter_offsets,
    batches,
    delete_offsets,
    fetched,
    heartbeat,
    member_id,
    new_topic,
    produce,
    ranges,
    records_in,
    set_group_config,
    share_ack,
    share_fetch,
    share_offsets,
    unique,
)
from tests.server.wire import WireClient
from tests.server_data.batches import make_batch

PARTITIONS = 1_200


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, metrics_port: int) -> Iterator[ServerProcess]:
    args = ("--share-record-lock-duration-ms", str(LOCK_MS), "--metrics-port", str(metrics_port))
    with served(tmp_path_factory.mktemp("share-sizes"), *args) as proc:
        yield proc


def test_the_sizes_span_several_calls() -> None:
    sizes = (
        PARTITIONS_PER_CALL,
        INITIALIZE_CHUNK,
        DESCRIBE_PARTITIONS_PER_CALL,
        ALTER_PARTITIONS_PER_CALL,
        LAG_PARTITIONS_PER_CALL,
    )
    for per_call in sizes:
        assert per_call < PARTITIONS  # (the paths below run over more than one call each)


def _produce_everywhere(client: WireClient, topic: str) -> None:
    """One record in each partition of ``topic``."""
    data = [{"index": p, "records": make_batch([f"v{p}".encode()])} for p in range(PARTITIONS)]
    response = client.call(
        PRODUCE, 9, transactional_id=None, acks=-1, timeout=10_000, topic_data=[{"name": topic, "partition_data": data}]
    )
    errors = {p.error_code for t in response.responses for p in t.partition_responses}
    assert errors == {E.none}


def test_a_session_of_many_partitions(server: ServerProcess, metrics_port: int) -> None:
    group, topic, a = unique("many"), unique("many-t"), member_id()
    with WireClient(server.port) as client:
        tid = new_topic(client, topic, PARTITIONS)
        _produce_everywhere(client, topic)
        set_group_config(client, group, "share.auto.offset.reset", "earliest")
        assert heartbeat(client, group, a, 0, [topic]).error_code == E.none  # (initializes every partition)
        every = {(tid, p): [] for p in range(PARTITIONS)}

        first = fetched(share_fetch(client, group, a, 0, every, max_records=10 * PARTITIONS, max_wait_ms=2000))
        assert set(first) == set(every)
        assert {tp: ranges(row) for tp, row in first.items()} == {tp: [(0, 0, 1)] for tp in every}
        assert all(records_in(row.records) == [(0, 1)] for row in first.values())
        _, samples = scrape(metrics_port)
        assert value(samples, "regroup_share_group_lag", group=group, topic=topic) == PARTITIONS

        assert acked(share_ack(client, group, a, 1, {tp: batches((0, 0, ACCEPT)) for tp in every})) == {
            tp: E.none for tp in every
        }
        error, rows = share_offsets(client, group)
        assert error == E.none
        assert rows == {(topic, p): (1, 0, E.none) for p in range(PARTITIONS)}
        error, named = share_offsets(client, group, {topic: list(range(PARTITIONS))})
        assert (error, named) == (E.none, rows)
        _, samples = scrape(metrics_port)
        assert value(samples, "regroup_share_group_lag", group=group, topic=topic) == 0


def test_max_records_bounds_the_whole_fetch(server: ServerProcess) -> None:
    """MaxRecords of 250 over 1,200 partitions of one record each: 250 partitions one after another in the
    session's order (which starts at a different partition from one fetch to the next), however many core calls
    the fetch takes."""
    group, topic, a = unique("bound"), unique("bound-t"), member_id()
    with WireClient(server.port) as client:
        tid = new_topic(client, topic, PARTITIONS)
        _produce_everywhere(client, topic)
        set_group_config(client, group, "share.auto.offset.reset", "earliest")
        assert heartbeat(client, group, a, 0, [topic]).error_code == E.none
        every = {(tid, p): [] for p in range(PARTITIONS)}
        rows = fetched(share_fetch(client, group, a, 0, every, max_records=250, max_wait_ms=2000))
        got = {tp[1] for tp, row in rows.items() if ranges(row)}
        assert len(got) == 250
        assert any(got == {(first + i) % PARTITIONS for i in range(250)} for first in got)


def test_a_fetch_naming_partitions_without_state_delivers_the_others(server: ServerProcess) -> None:
    """The member's topic has state (its heartbeat initialized it) and records; the other topic's partition has
    no state until this fetch initializes it: the records of the first are delivered in the same answer, and are
    the member's to acknowledge."""
    group, known, other, a = unique("mixed"), unique("mixed-k"), unique("mixed-o"), member_id()
    with WireClient(server.port) as client:
        tk, to = new_topic(client, known), new_topic(client, other)
        set_group_config(client, group, "share.auto.offset.reset", "earliest")
        assert produce(client, known, make_batch([b"k0", b"k1", b"k2"])) == 0
        assert heartbeat(client, group, a, 0, [known]).error_code == E.none
        rows = fetched(share_fetch(client, group, a, 0, {(tk, 0): [], (to, 0): []}, max_wait_ms=2000))
        assert ranges(rows[(tk, 0)]) == [(0, 2, 1)]
        assert ranges(rows[(to, 0)]) == []
        assert acked(share_ack(client, group, a, 1, {(tk, 0): batches((0, 2, ACCEPT))})) == {(tk, 0): E.none}


def test_unknown_topics_and_partitions_among_known_ones(server: ServerProcess) -> None:
    """A fetch naming an unknown topic id and a partition past its topic's end among known partitions answers
    them UNKNOWN_TOPIC_ID and UNKNOWN_TOPIC_OR_PARTITION (as Kafka answers partitions missing from its metadata)
    and serves the rest, at once (such a partition made the fetch start again for ever, at full CPU); an
    acknowledgement of either is refused the same way."""
    group, topic, a = unique("unknown"), unique("unknown-t"), member_id()
    with WireClient(server.port) as client:
        tid = new_topic(client, topic)
        set_group_config(client, group, "share.auto.offset.reset", "earliest")
        assert produce(client, topic, make_batch([b"u0"])) == 0
        assert heartbeat(client, group, a, 0, [topic]).error_code == E.none
        stranger, beyond = (uuid.uuid4(), 0), (tid, 5)
        began = time.monotonic()
        rows = fetched(share_fetch(client, group, a, 0, {(tid, 0): [], stranger: [], beyond: []}, max_wait_ms=2000))
        assert time.monotonic() - began < 1.5  # (records to deliver: the fetch does not wait out MaxWaitMs)
        assert ranges(rows[(tid, 0)]) == [(0, 0, 1)]
        assert rows[stranger].error_code == E.unknown_topic_id
        assert rows[beyond].error_code == E.unknown_topic_or_partition
        acks = {(tid, 0): batches((0, 0, ACCEPT)), stranger: batches((0, 0, ACCEPT)), beyond: batches((0, 0, ACCEPT))}
        assert acked(share_ack(client, group, a, 1, acks)) == {
            (tid, 0): E.none,
            stranger: E.unknown_topic_id,
            beyond: E.unknown_topic_or_partition,
        }


def test_a_closed_session_gives_back_every_partitions_records(server: ServerProcess) -> None:
    """The member's last ShareAcknowledge (-1) closes its session: the records it held in all 1,200 partitions
    (released over several core writes) go back, and another member acquires each at delivery count 2."""
    group, topic, a, b = unique("back"), unique("back-t"), member_id(), member_id()
    with WireClient(server.port) as one, WireClient(server.port) as two:
        tid = new_topic(one, topic, PARTITIONS)
        _produce_everywhere(one, topic)
        set_group_config(one, group, "share.auto.offset.reset", "earliest")
        assert heartbeat(one, group, a, 0, [topic]).error_code == E.none
        every = {(tid, p): [] for p in range(PARTITIONS)}
        held = fetched(share_fetch(one, group, a, 0, every, max_records=10 * PARTITIONS, max_wait_ms=2000))
        assert all(ranges(row) == [(0, 0, 1)] for row in held.values())
        assert share_ack(one, group, a, -1, {}).error_code == E.none
        assert heartbeat(two, group, b, 0, [topic]).error_code == E.none
        again = fetched(share_fetch(two, group, b, 0, every, max_records=10 * PARTITIONS, max_wait_ms=2000))
        assert {tp: ranges(row) for tp, row in again.items()} == {tp: [(0, 0, 2)] for tp in every}


def test_offsets_altered_and_deleted_over_many_calls(server: ServerProcess) -> None:
    """AlterShareGroupOffsets of 1,200 partitions (a group that does not exist is created) sets every one;
    DeleteShareGroupOffsets of the topic forgets every one (NONE), and a second finds none
    (UNKNOWN_TOPIC_OR_PARTITION)."""
    group, topic = unique("admin"), unique("admin-t")
    with WireClient(server.port) as client:
        new_topic(client, topic, PARTITIONS)
        altered = alter_offsets(client, group, topic, {p: 1 + p % 7 for p in range(PARTITIONS)})
        assert altered.error_code == E.none
        assert [(p.partition_index, p.error_code) for t in altered.responses for p in t.partitions] == [
            (p, E.none) for p in range(PARTITIONS)
        ]
        error, rows = share_offsets(client, group)
        assert error == E.none
        assert {k: v[0] for k, v in rows.items()} == {(topic, p): 1 + p % 7 for p in range(PARTITIONS)}
        deleted = delete_offsets(client, group, [topic])
        assert (deleted.error_code, [t.error_code for t in deleted.responses]) == (E.none, [E.none])
        assert share_offsets(client, group) == (E.none, {})
        again = delete_offsets(client, group, [topic])
        assert [t.error_code for t in again.responses] == [E.unknown_topic_or_partition]
