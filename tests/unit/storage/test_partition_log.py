"""The partition log: offset assignment, validation, torn-tail recovery, fetch size rules, timestamp lookup,
idempotent producers, fsync policy — and a hypothesis comparison against a plain in-memory model."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.records.readers import read_batch

import regroup.storage.partition_log as partition_log
from regroup.storage.batches import LOG_OVERHEAD
from regroup.storage.partition_log import AppendInfo, AppendRejected, OffsetOutOfRange, PartitionLog, Reject
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import BASE_TS, batch_sizes, make_batch


def open_log(path: Path, **kwargs: object) -> PartitionLog:
    kwargs.setdefault("fsync", FsyncPolicy.NEVER)
    return PartitionLog.open(path, **kwargs)  # type: ignore[arg-type]


def decode(data: bytes) -> list[tuple[int, bytes | None]]:
    """``(offset, value)`` of every record in concatenated batches, via kio's reader (which checks CRCs)."""
    out, pos = [], 0
    while pos < len(data):
        batch, size = read_batch(data, pos)
        out += [(r.offset, r.value) for r in batch.records]
        pos += size
    return out


def test_offsets_are_assigned_from_the_log_end(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first = log.append(make_batch([b"a", b"b"], base_offset=777))
    second = log.append(make_batch([b"c"]))
    assert (first.base_offset, first.last_offset, second.base_offset, second.last_offset) == (0, 1, 2, 2)
    assert log.log_end_offset == 3 and log.log_start_offset == 0
    data = log.read(0, 1 << 20)
    assert decode(data) == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert struct.unpack_from(">i", data, LOG_OVERHEAD)[0] == -1  # partition leader epoch rewritten
    assert decode(log.read(1, 1 << 20)) == [(0, b"a"), (1, b"b"), (2, b"c")]  # from the batch holding offset 1
    assert decode(log.read(2, 1 << 20)) == [(2, b"c")]
    assert log.read(3, 1 << 20) == b""
    for bad in (-1, 4):
        with pytest.raises(OffsetOutOfRange):
            log.read(bad, 100)
    log.close()


def test_several_batches_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    info = log.append(make_batch([b"a"]) + make_batch([b"b", b"c"]))
    assert (info.base_offset, info.last_offset) == (0, 2)
    assert decode(log.read(0, 1 << 20)) == [(0, b"a"), (1, b"b"), (2, b"c")]


@pytest.mark.parametrize(
    ("records", "reason"),
    [
        (b"", Reject.INVALID_RECORD),
        (make_batch([b"x"])[:-1], Reject.CORRUPT_MESSAGE),
        (make_batch([b"x"])[:30], Reject.CORRUPT_MESSAGE),
        (make_batch([b"x"]) + b"\x00" * 5, Reject.CORRUPT_MESSAGE),
        (make_batch([b"x"], magic=1), Reject.INVALID_RECORD),
        (make_batch([b"x"], attributes=0x20), Reject.INVALID_RECORD),
        (make_batch([b"x"], producer_id=5, producer_epoch=0, base_sequence=-1), Reject.INVALID_RECORD),
        (make_batch([b"x" * 2000]), Reject.MESSAGE_TOO_LARGE),
    ],
    ids=["empty", "short", "torn-header", "trailing-garbage", "magic-1", "control", "no-sequence", "too-large"],
)
def test_invalid_appends_write_nothing(tmp_path: Path, records: bytes, reason: Reject) -> None:
    log = open_log(tmp_path, max_batch_bytes=1000)
    log.append(make_batch([b"ok"]))
    size = (tmp_path / "00000000000000000000.log").stat().st_size
    with pytest.raises(AppendRejected) as err:
        log.append(records)
    assert err.value.reason is reason
    assert log.log_end_offset == 1 and (tmp_path / "00000000000000000000.log").stat().st_size == size


def test_crc_mismatch_is_corrupt_message(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batch = bytearray(make_batch([b"payload"]))
    batch[-3] ^= 0x01
    with pytest.raises(AppendRejected) as err:
        log.append(bytes(batch))
    assert err.value.reason is Reject.CORRUPT_MESSAGE and "CRC" in str(err.value)
    assert log.log_end_offset == 0
    # baseOffset and partitionLeaderEpoch are outside the CRC: any value is accepted
    assert log.append(make_batch([b"payload"], base_offset=123456)).base_offset == 0


def test_every_torn_tail_of_the_last_batch_is_cut(tmp_path: Path) -> None:
    src = tmp_path / "src"
    log = open_log(src)
    log.append(make_batch([b"one", b"two"]))
    log.append(make_batch([b"three", b"four", b"five"], keys=[b"k", None, b"z"]))
    log.close()
    data = (src / "00000000000000000000.log").read_bytes()
    first = batch_sizes(data)[0]
    for cut in range(1, len(data) - first):
        d = tmp_path / f"cut{cut}"
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(data[: first + cut])
        recovered = open_log(d)
        assert recovered.log_end_offset == 2 and recovered.truncated_bytes == cut
        assert (d / "00000000000000000000.log").stat().st_size == first
        assert recovered.append(make_batch([b"again"])).base_offset == 2
        assert decode(recovered.read(0, 1 << 20)) == [(0, b"one"), (1, b"two"), (2, b"again")]
        recovered.close()


def test_damaged_last_batch_is_cut(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch([b"one"]))
    log.append(make_batch([b"two"]))
    log.close()
    path = tmp_path / "00000000000000000000.log"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    reopened = open_log(tmp_path)
    assert reopened.log_end_offset == 1 and decode(reopened.read(0, 1 << 20)) == [(0, b"one")]


def test_restart_keeps_everything_across_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=200)
    for i in range(20):
        log.append(make_batch([f"v{i}".encode()] * 3))
    assert log.segment_count > 3
    expected = [log.read(o, 1 << 20) for o in range(60)]
    log.close()
    reopened = open_log(tmp_path, segment_bytes=200)
    assert reopened.log_end_offset == 60 and reopened.segment_count == log.segment_count
    assert [reopened.read(o, 1 << 20) for o in range(60)] == expected
    assert [v for _, v in decode(reopened.read(31, 1 << 20))][:1] == [b"v10"]
    assert reopened.append(make_batch([b"new"])).base_offset == 60


def test_a_batch_bigger_than_a_segment_sits_alone(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=100)
    log.append(make_batch([b"x"]))
    log.append(make_batch([b"y" * 300]))
    log.append(make_batch([b"z"]))
    assert log.segment_count == 3
    assert decode(log.read(1, 1 << 20)) == [(1, b"y" * 300)]


def test_fetch_size_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    batches = [make_batch([bytes([65 + i]) * 50]) for i in range(3)]
    for b in batches:
        log.append(b)
    size = len(batches[0])
    assert len(log.read(0, 1)) == size  # always at least one whole batch ...
    assert log.read(0, 1, min_one=False) == b""  # ... unless an earlier partition already returned data
    assert len(log.read(0, 2 * size)) == 2 * size  # whole batches only
    assert len(log.read(0, 2 * size + size - 1)) == 2 * size
    assert len(log.read(1, 10 * size)) == 2 * size


def test_timestamp_lookup(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch([b"a", b"b", b"c"], timestamps=[100, 300, 200]))
    log.append(make_batch([b"d", b"e"], timestamps=[400, 500], gzip_records=True))
    log.append(make_batch([b"f"], timestamps=[450]))
    assert log.offset_for_timestamp(0) == (100, 0)
    assert log.offset_for_timestamp(150) == (300, 1)
    assert log.offset_for_timestamp(300) == (300, 1)
    assert log.offset_for_timestamp(301) == (400, 3)
    assert log.offset_for_timestamp(450) == (500, 4)  # the first *offset* whose timestamp is >= 450
    assert log.offset_for_timestamp(501) is None
    assert log.max_timestamp() == (500, 4)
    assert open_log(tmp_path / "empty").max_timestamp() is None


def test_idempotent_producer_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path)

    def send(seq: int, epoch: int = 0) -> AppendInfo:
        return log.append(make_batch([b"v", b"w"], producer_id=7, producer_epoch=epoch, base_sequence=seq))

    def refused(seq: int, epoch: int) -> Reject:
        with pytest.raises(AppendRejected) as err:
            send(seq, epoch)
        return err.value.reason

    assert send(5).base_offset == 0  # an unknown producer may start at any sequence
    assert send(7).base_offset == 2
    dup = send(5)  # one of the last five batches again: not written, answered with the first offsets
    assert dup.duplicate and (dup.base_offset, dup.last_offset) == (0, 1)
    assert log.log_end_offset == 4
    assert refused(10, 0) is Reject.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert refused(3, 1) is Reject.OUT_OF_ORDER_SEQUENCE_NUMBER  # a new epoch must restart at 0
    assert send(0, epoch=1).base_offset == 4
    assert refused(9, 0) is Reject.INVALID_PRODUCER_EPOCH
    log.close()
    log = open_log(tmp_path)  # the state is rebuilt from the log: a retry after a crash is still a duplicate
    dup = send(0, epoch=1)
    assert dup.duplicate and dup.base_offset == 4
    assert send(2, epoch=1).base_offset == 6
    two = make_batch([b"x"], producer_id=7, producer_epoch=1, base_sequence=4)
    with pytest.raises(AppendRejected) as err:  # a duplicate inside a multi-batch append
        log.append(two + make_batch([b"v", b"w"], producer_id=7, producer_epoch=1, base_sequence=2))
    assert err.value.reason is Reject.DUPLICATE_SEQUENCE_NUMBER
    assert log.log_end_offset == 8


def test_sequence_wraps_around(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    top = 2**31 - 1
    log.append(make_batch([b"a", b"b"], producer_id=1, producer_epoch=0, base_sequence=top - 1))
    assert log.append(make_batch([b"c"], producer_id=1, producer_epoch=0, base_sequence=0)).base_offset == 2


def test_fsync_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(partition_log, "_fsync_file", lambda fd: calls.append(fd))
    log = open_log(tmp_path / "always", fsync=FsyncPolicy.ALWAYS)
    log.append(make_batch([b"a"]))
    assert len(calls) == 1
    log.append(make_batch([b"b"]), sync=False)  # acks=0
    assert len(calls) == 1
    log.close()  # the unsynced append is synced on close
    assert len(calls) == 2
    calls.clear()
    never = open_log(tmp_path / "never", fsync=FsyncPolicy.NEVER)
    never.append(make_batch([b"a"]))
    never.close()
    assert calls == []
    now = [0.0]
    interval = open_log(tmp_path / "interval", fsync=FsyncPolicy.INTERVAL, fsync_interval_ms=100, clock=lambda: now[0])
    interval.append(make_batch([b"a"]))
    assert calls == []
    now[0] = 0.2
    interval.append(make_batch([b"b"]))
    assert len(calls) == 1
    interval.append(make_batch([b"c"]))
    interval.sync()
    assert len(calls) == 2


def test_listener_is_called_after_each_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    seen: list[int] = []
    log.listener = lambda: seen.append(log.log_end_offset)
    log.append(make_batch([b"a", b"b"]))
    with pytest.raises(AppendRejected):
        log.append(b"junk")
    log.append(make_batch([b"c"]))
    assert seen == [2, 3]


def test_closed_log_refuses_use(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.close()
    log.close()
    with pytest.raises(partition_log.StorageError):
        log.append(make_batch([b"a"]))
    with pytest.raises(partition_log.StorageError):
        log.read(0, 10)


# ---------------------------------------------------------------------- hypothesis vs a model

batch_st = st.lists(st.integers(0, 40), min_size=1, max_size=4)  # value sizes; one record each
op_st = st.one_of(
    st.tuples(st.just("append"), batch_st, st.lists(st.integers(0, 1000), min_size=4, max_size=4)),
    st.tuples(st.just("reopen")),
    # max_bytes: the size of the first k batches the read would return, plus -1, 0 or +1
    st.tuples(st.just("read"), st.integers(0, 60), st.integers(0, 4), st.integers(-1, 1), st.booleans()),
    st.tuples(st.just("time"), st.integers(-5, 1005)),
)


class Model:
    """Segments of batches, each batch a list of (offset, value, timestamp); rolls like the log does."""

    def __init__(self, segment_bytes: int) -> None:
        self.segment_bytes = segment_bytes
        self.segments: list[list[tuple[int, list[tuple[int, bytes, int]]]]] = [[]]  # (size, records)
        self.next = 0

    def append(self, size: int, records: list[tuple[bytes, int]]) -> None:
        active = self.segments[-1]
        used = sum(s for s, _ in active)
        if used > 0 and used + size > self.segment_bytes:
            self.segments.append(active := [])
        active.append((size, [(self.next + i, v, t) for i, (v, t) in enumerate(records)]))
        self.next += len(records)

    def read(self, offset: int, max_bytes: int, min_one: bool) -> list[tuple[int, bytes]]:
        for segment in self.segments:
            batches = [b for b in segment if b[1][-1][0] >= offset]
            if not batches:
                continue
            out: list[tuple[int, bytes]] = []
            total = 0
            for i, (size, recs) in enumerate(batches):
                if total + size > max_bytes and not (min_one and i == 0):
                    break
                total += size
                out += [(o, v) for o, v, _ in recs]
            return out
        return []

    def sizes_from(self, offset: int, k: int) -> int:
        for segment in self.segments:
            batches = [size for size, recs in segment if recs[-1][0] >= offset]
            if batches:
                return sum(batches[:k])
        return 0

    def first_at(self, target: int) -> tuple[int, int] | None:
        for segment in self.segments:
            for _, recs in segment:
                for o, _, t in recs:
                    if t >= target:
                        return t, o
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op_st, max_size=25))
def test_matches_a_model(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[object, ...]]) -> None:
    path = tmp_path_factory.mktemp("model")
    log = open_log(path, segment_bytes=300)
    model = Model(300)
    try:
        for op in ops:
            if op[0] == "append":
                sizes, stamps = op[1], op[2]
                assert isinstance(sizes, list) and isinstance(stamps, list)
                values = [bytes([97 + len(sizes)]) * n for n in sizes]
                times = stamps[: len(values)]
                batch = make_batch(values, timestamps=times)
                assert log.append(batch).base_offset == model.next
                model.append(len(batch), list(zip(values, times, strict=True)))
            elif op[0] == "reopen":
                log.close()
                log = open_log(path, segment_bytes=300)
            elif op[0] == "read":
                offset, k, delta, min_one = op[1], op[2], op[3], op[4]
                assert isinstance(offset, int) and isinstance(k, int) and isinstance(delta, int)
                assert isinstance(min_one, bool)
                max_bytes = model.sizes_from(offset, k) + delta
                if offset > model.next:
                    with pytest.raises(OffsetOutOfRange):
                        log.read(offset, max_bytes, min_one=min_one)
                else:
                    got = decode(log.read(offset, max_bytes, min_one=min_one))
                    assert got == model.read(offset, max_bytes, min_one)
            else:
                target = op[1]
                assert isinstance(target, int)
                assert log.offset_for_timestamp(target) == model.first_at(target)
            assert log.log_end_offset == model.next
    finally:
        log.close()


def test_batch_builder_matches_kio() -> None:
    batch, _ = read_batch(make_batch([b"a", None], keys=[None, b"k"], timestamps=[BASE_TS, BASE_TS + 5000]), 0)
    assert [(r.key, r.value) for r in batch.records] == [(None, b"a"), (b"k", None)]
    assert batch.max_timestamp == BASE_TS + 5000
