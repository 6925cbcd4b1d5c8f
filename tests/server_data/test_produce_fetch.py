"""Produce and Fetch handlers, called directly with kio entities (after a wire round trip) on a real store."""

from __future__ import annotations

import asyncio
import time

import pytest
from kio.records.readers import read_batch
from kio.schema.errors import ErrorCode

from regroup.server.handlers.data import SPECS, handle_fetch, handle_produce
from regroup.server.topics import TopicStore
from tests.server_data.batches import make_batch
from tests.server_data.helpers import FakeBroker, acall, call, fetch_request, produce_request

PRODUCE_VERSIONS = range(3, 14)
FETCH_VERSIONS = range(4, 19)


def decode(data: bytes | None) -> list[tuple[int, bytes | None]]:
    out, pos = [], 0
    while data and pos < len(data):
        batch, size = read_batch(data, pos)
        out += [(r.offset, r.value) for r in batch.records]
        pos += size
    return out


def test_specs_match_the_kio_versions() -> None:
    assert {(s.api_key, s.min_version, s.max_version) for s in SPECS} == {
        (0, 3, 13),
        (1, 4, 18),
        (2, 1, 11),
    }  # InitProducerId (22) is the transaction coordinator's: handlers/transactions.py


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_produce_then_fetch(broker: FakeBroker, store: TopicStore, version: int) -> None:
    info = store.create_topic("t", 2)
    topic = info if version >= 13 else "t"
    first = call(handle_produce, broker, "produce", produce_request(version, topic, {0: make_batch([b"a", b"b"])}))
    second = call(
        handle_produce,
        broker,
        "produce",
        produce_request(version, topic, {0: make_batch([b"c"]), 1: make_batch([b"z"])}),
    )
    [topic_response] = first.responses
    assert [(p.index, p.error_code, p.base_offset) for p in topic_response.partition_responses] == [
        (0, ErrorCode.none, 0)
    ]
    assert [(p.index, p.base_offset) for p in second.responses[0].partition_responses] == [(0, 2), (1, 0)]
    if version >= 13:
        assert topic_response.topic_id == info.topic_id
    else:
        assert topic_response.name == "t"
    fetched = call(handle_fetch, broker, "fetch", fetch_request(18, info, {0: 0, 1: 0}))
    parts = {p.partition_index: p for p in fetched.responses[0].partitions}
    assert decode(parts[0].records) == [(0, b"a"), (1, b"b"), (2, b"c")] and parts[0].high_watermark == 3
    assert decode(parts[1].records) == [(0, b"z")]


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_fetch_versions(broker: FakeBroker, store: TopicStore, version: int) -> None:
    info = store.create_topic("t", 1)
    call(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"a", b"b"])}))
    call(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"c"])}))
    response = call(handle_fetch, broker, "fetch", fetch_request(version, info, {0: 2}))
    assert getattr(response, "error_code", ErrorCode.none) == ErrorCode.none  # (v7+)
    assert getattr(response, "session_id", 0) == 0  # no fetch sessions
    [topic] = response.responses
    assert (topic.topic_id if version >= 13 else topic.topic) == (info.topic_id if version >= 13 else "t")
    [part] = topic.partitions
    assert (part.error_code, part.high_watermark, part.last_stable_offset, getattr(part, "log_start_offset", 0)) == (
        ErrorCode.none,
        3,
        3,
        0,
    )
    assert decode(part.records) == [(2, b"c")]
    committed = call(handle_fetch, broker, "fetch", fetch_request(version, info, {0: 2}, isolation_level=1))
    [part] = committed.responses[0].partitions
    assert decode(part.records) == [(2, b"c")] and part.aborted_transactions == ()
    at_end = call(handle_fetch, broker, "fetch", fetch_request(version, info, {0: 3}))
    assert at_end.responses[0].partitions[0].records in (b"", None)
    beyond = call(handle_fetch, broker, "fetch", fetch_request(version, info, {0: 4}))
    assert beyond.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range


def test_fetch_errors(broker: FakeBroker, store: TopicStore) -> None:
    info = store.create_topic("t", 1)
    missing = call(handle_fetch, broker, "fetch", fetch_request(12, info, {5: 0}))
    assert missing.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    store.delete_topic("t")
    by_id = call(handle_fetch, broker, "fetch", fetch_request(13, info, {0: 0}))
    assert by_id.responses[0].partitions[0].error_code == ErrorCode.unknown_topic_id
    incremental = call(handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0}, session_epoch=3))
    assert incremental.error_code == ErrorCode.fetch_session_id_not_found and incremental.responses == ()


def test_fetch_size_limits(broker: FakeBroker, store: TopicStore) -> None:
    info = store.create_topic("t", 2)
    big = make_batch([b"x" * 500])
    call(handle_produce, broker, "produce", produce_request(9, "t", {0: big, 1: make_batch([b"y" * 500])}))
    call(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"more"])}))
    response = call(
        handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0, 1: 0}, max_bytes=100, partition_max_bytes=100)
    )
    parts = {p.partition_index: p for p in response.responses[0].partitions}
    assert decode(parts[0].records) == [(0, b"x" * 500)]  # the first batch always comes, whatever the limit
    assert decode(parts[1].records) == []  # but only for the first partition with data
    per_partition = call(
        handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0, 1: 0}, partition_max_bytes=len(big))
    )
    parts = {p.partition_index: p for p in per_partition.responses[0].partitions}
    assert [o for o, _ in decode(parts[0].records)] == [0] and [o for o, _ in decode(parts[1].records)] == [0]


def test_long_poll_wakes_on_append(broker: FakeBroker, store: TopicStore) -> None:
    info = store.create_topic("t", 1)

    async def scenario() -> tuple[float, object]:
        start = time.monotonic()
        fetch = asyncio.create_task(
            acall(handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0}, max_wait_ms=10_000))
        )
        await asyncio.sleep(0.05)
        assert not fetch.done()
        await acall(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"wake"])}))
        response = await asyncio.wait_for(fetch, 5)
        return time.monotonic() - start, response

    elapsed, response = asyncio.run(scenario())
    assert elapsed < 2
    assert decode(response.responses[0].partitions[0].records) == [(0, b"wake")]  # type: ignore[attr-defined]


def test_long_poll_times_out(broker: FakeBroker, store: TopicStore) -> None:
    info = store.create_topic("t", 1)
    start = time.monotonic()
    response = call(handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0}, max_wait_ms=150))
    assert 0.1 <= time.monotonic() - start < 2
    assert response.responses[0].partitions[0].records in (b"", None)
    call(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"a"])}))
    start = time.monotonic()  # min_bytes larger than what is there: waits, then answers with what there is
    response = call(handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0}, max_wait_ms=150, min_bytes=10_000))
    assert time.monotonic() - start >= 0.1 and decode(response.responses[0].partitions[0].records) == [(0, b"a")]


def test_produce_errors(broker: FakeBroker, store: TopicStore) -> None:
    store.create_topic("t", 1)

    def produce(records: bytes, **kwargs: object) -> tuple[ErrorCode, int]:
        [p] = (
            call(
                handle_produce,
                broker,
                "produce",
                produce_request(9, kwargs.pop("topic", "t"), {int(kwargs.pop("partition", 0)): records}, **kwargs),
            )
            .responses[0]
            .partition_responses
        )  # type: ignore[arg-type]
        return p.error_code, p.base_offset

    good = make_batch([b"v"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    assert produce(good, topic="nope") == (ErrorCode.unknown_topic_or_partition, -1)
    assert produce(good, partition=1) == (ErrorCode.unknown_topic_or_partition, -1)
    assert produce(bytes(corrupt)) == (ErrorCode.corrupt_message, -1)
    assert produce(make_batch([b"v"], magic=1)) == (ErrorCode.invalid_record, -1)
    assert produce(good, acks=2) == (ErrorCode.invalid_required_acks, -1)
    # transactional records need a transactional id (and the coordinator's say: this broker has none, retriable)
    transactional = make_batch([b"v"], attributes=0x10, producer_id=1, producer_epoch=0, base_sequence=0)
    assert produce(transactional) == (ErrorCode.transactional_id_authorization_failed, -1)
    assert produce(transactional, transactional_id="tx") == (ErrorCode.not_enough_replicas, -1)
    assert produce(b"") == (ErrorCode.invalid_record, -1)
    assert produce(good) == (ErrorCode.none, 0)
    assert produce(good, acks=0) == (ErrorCode.none, 1)
    assert produce(good, transactional_id="tx") == (ErrorCode.none, 2)  # plain records: the id does not matter


def test_zstd_needs_produce_v7(broker: FakeBroker, store: TopicStore) -> None:
    store.create_topic("t", 1)
    zstd = make_batch([b"v"], attributes=4)  # (the payload is not really compressed; the log does not care)
    old = call(handle_produce, broker, "produce", produce_request(6, "t", {0: zstd}))
    assert old.responses[0].partition_responses[0].error_code == ErrorCode.unsupported_compression_type
    new = call(handle_produce, broker, "produce", produce_request(7, "t", {0: zstd}))
    assert new.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_idempotent_retry_gets_the_first_offsets(broker: FakeBroker, store: TopicStore) -> None:
    store.create_topic("t", 1)
    batch = make_batch([b"a", b"b"], producer_id=42, producer_epoch=0, base_sequence=0)
    first = call(handle_produce, broker, "produce", produce_request(9, "t", {0: batch}))
    retry = call(handle_produce, broker, "produce", produce_request(9, "t", {0: batch}))
    for response in (first, retry):
        assert (
            response.responses[0].partition_responses[0].error_code,
            response.responses[0].partition_responses[0].base_offset,
        ) == (ErrorCode.none, 0)
    gap = make_batch([b"c"], producer_id=42, producer_epoch=0, base_sequence=5)
    out_of_order = call(handle_produce, broker, "produce", produce_request(9, "t", {0: gap}))
    assert out_of_order.responses[0].partition_responses[0].error_code == ErrorCode.out_of_order_sequence_number
    assert store.partition("t", 0).log_end_offset == 2  # type: ignore[union-attr]


def test_disk_errors_become_kafka_storage_error(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = store.create_topic("t", 1)
    plog = store.partition("t", 0)
    assert plog is not None

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(plog, "append", broken)
    monkeypatch.setattr(plog, "read", broken)
    produced = call(handle_produce, broker, "produce", produce_request(9, "t", {0: make_batch([b"a"])}))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.kafka_storage_error
    fetched = call(handle_fetch, broker, "fetch", fetch_request(12, info, {0: 0}))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.kafka_storage_error
