"""The usual Produce answered at once from its bytes (``server/produce_frames.py`` finds the records, Produce's
``AtOnce`` in ``handlers/data.py`` appends and answers): the part of a request that is remembered is exactly what
repeats from one request of a producer to the next, any other layout is the general path's, and a server that
answers at once gives the same answers, byte for byte, and the same logs as one that never does."""

from __future__ import annotations

import asyncio
import logging
import struct
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.network.codec import decode_request
from regroup.network.deferred import Deferred
from regroup.network.limits import DEFAULT_LIMITS
from regroup.server.api import RequestContext
from regroup.server.at_once import AtOnceAnswers
from regroup.server.dispatch import _encode
from regroup.server.handlers.data import SPECS, handle_produce
from regroup.server.produce_frames import split_produce
from regroup.server.topics import TopicStore
from regroup.storage.partition_log import PendingSync
from regroup.storage.record_log import FsyncPolicy
from tests.server.wire import encode_request
from tests.server_data.batches import make_batch
from tests.server_data.helpers import FakeBroker, fsync_file_by_file

PRODUCE = 0
VERSIONS = (3, 13)


def frame(
    version: int,
    correlation_id: int,
    client_id: str | None,
    records: bytes | None,
    *,
    topic: str = "t",
    topic_id: Any = None,
    index: int = 0,
    acks: int = -1,
    timeout: int = 30_000,
    transactional_id: str | None = None,
    partitions: int = 1,
    topics: int = 1,
) -> bytes:
    """A Produce request's payload (the frame without its size), from the api key on."""
    entry: dict[str, Any] = {"topic_id": topic_id} if version >= 13 else {"name": topic}
    entry["partition_data"] = [{"index": index + i, "records": records} for i in range(partitions)]
    return encode_request(
        PRODUCE, version, correlation_id, client_id, transactional_id=transactional_id, acks=acks,
        timeout=timeout, topic_data=[entry] * topics,
    )[4:]  # fmt: skip


names = st.text(st.characters(codec="utf-8"), max_size=30)
prefixes = st.fixed_dictionaries(
    {
        "client_id": st.none() | names,
        "transactional_id": st.none() | names,
        "acks": st.sampled_from([-1, 0, 1, 2]),
        "timeout": st.integers(0, 2**31 - 1),
        "topic": names.filter(bool),
        "topic_id": st.uuids(),
        "index": st.integers(-(2**31), 2**31 - 1),
    }
)


def _framed(version: int, cid: int, prefix: dict[str, Any], records: bytes) -> bytes:
    fields = dict(prefix)
    client_id = fields.pop("client_id")
    return frame(version, cid, client_id, records, **fields)


@given(
    version=st.integers(*VERSIONS),
    prefix=prefixes,
    records=st.binary(max_size=300),
    other=st.binary(max_size=300),
    cids=st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**31), 2**31 - 1)),
)
def test_the_records_are_found_and_the_rest_repeats(
    version: int, prefix: dict[str, Any], records: bytes, other: bytes, cids: tuple[int, int]
) -> None:
    first, second = _framed(version, cids[0], prefix, records), _framed(version, cids[1], prefix, other)
    found, again = split_produce(first, version), split_produce(second, version)
    assert found is not None and again is not None
    assert found[1] == records and again[1] == other
    assert first[8 : found[0]] == second[8 : again[0]]  # all but the correlation id and the records


@given(version=st.integers(*VERSIONS), one=prefixes, two=prefixes, records=st.binary(max_size=40))
def test_requests_that_differ_before_the_records_are_told_apart(
    version: int, one: dict[str, Any], two: dict[str, Any], records: bytes
) -> None:
    """Two requests share a remembered part only when every field in it is the same (the topic's name, or
    from v13 its id)."""
    first, second = _framed(version, 1, one, records), _framed(version, 1, two, records)
    a, b = split_produce(first, version), split_produce(second, version)
    assert a is not None and b is not None
    keyed = ("client_id", "transactional_id", "acks", "timeout", "index", "topic_id" if version >= 13 else "topic")
    same = all(one[k] == two[k] for k in keyed)
    assert (first[8 : a[0]] == second[8 : b[0]]) == same


@given(version=st.integers(*VERSIONS), records=st.binary(min_size=1, max_size=200), cut=st.integers(1, 50))
def test_other_layouts_are_the_general_paths(version: int, records: bytes, cut: int) -> None:
    good = frame(version, 1, "c", records, topic_id=_ID)
    assert split_produce(good, version) is not None
    for other in (
        frame(version, 1, "c", records, topic_id=_ID, partitions=2),
        frame(version, 1, "c", records, topic_id=_ID, topics=2),
        frame(version, 1, "c", None, topic_id=_ID),
        good[: len(good) - min(cut, len(good) - 1)],
        good + b"\x00" * cut,
    ):
        assert split_produce(other, version) is None
    assert split_produce(good, version - 1 if version == 3 else 14) is None


@given(data=st.binary(max_size=120), version=st.integers(-5, 20))
def test_any_bytes_are_read_without_failing(data: bytes, version: int) -> None:
    result = split_produce(b"\x00\x00" + data, version)
    assert result is None or (isinstance(result[1], bytes) and 8 <= result[0] <= len(data) + 2)


_ID = __import__("uuid").UUID(int=7)

# ------------------------------------------------------------------------------ answers and logs alike

#: (topic, its configuration): a plain topic, a compacted one, and one that does not exist
TOPICS = {"plain": {}, "compacted": {"cleanup.policy": "compact"}}


def _records(kind: str, n: int) -> bytes:
    if kind == "plain":
        return make_batch([b"v%d" % n, b"w%d" % n], keys=[b"k", b"k"])
    if kind == "keyless":
        return make_batch([b"x%d" % n])
    if kind == "corrupt":
        good = bytearray(make_batch([b"c%d" % n], keys=[b"k"]))
        good[-1] ^= 0xFF
        return bytes(good)
    if kind == "zstd":
        return make_batch([b"z"], keys=[b"k"], attributes=4)
    if kind == "transactional":
        return make_batch([b"t"], keys=[b"k"], producer_id=9, producer_epoch=0, base_sequence=0, attributes=0x10)
    if kind.startswith("idempotent"):
        sequence = int(kind.removeprefix("idempotent"))
        return make_batch([b"i"], keys=[b"k"], producer_id=5, producer_epoch=0, base_sequence=sequence)
    if kind == "two":
        return make_batch([b"a"], keys=[b"k"]) + make_batch([b"b"], keys=[b"k"])
    if kind == "empty":
        return b""
    return b"\x00\x01junk"


operations = st.lists(
    st.tuples(
        st.integers(*VERSIONS),
        st.sampled_from(["plain", "compacted", "missing"]),
        st.sampled_from([0, 1, 3]),
        st.sampled_from(
            [
                "plain",
                "plain",
                "keyless",
                "corrupt",
                "zstd",
                "transactional",
                "idempotent0",
                "idempotent1",
                "idempotent0",
                "two",
                "empty",
                "junk",
            ]
        ),
        st.sampled_from([-1, -1, 1, 0]),
        st.sampled_from(["producer-a", "producer-b", None]),
    ),
    min_size=1,
    max_size=14,
)


async def _settled(later: Deferred[bytes]) -> bytes:
    """What ``later`` settles with (as the connection would write it)."""
    future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()

    def done(value: Any, error: BaseException | None) -> None:
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    later.then(done)
    return await future


class _Server:
    """A topic store with the Produce handler, answering at once (as ``regroup serve`` does) or never."""

    def __init__(self, root: Path, at_once: bool, policy: FsyncPolicy) -> None:
        self.store = TopicStore.open(root, fsync=policy)
        self.broker = FakeBroker(topic_store=self.store)
        self.ids = {name: self.store.create_topic(name, 2, configs).topic_id for name, configs in TOPICS.items()}
        spec = {s.api_key: s for s in SPECS}
        self.answers = (
            AtOnceAnswers(
                self.broker,
                {PRODUCE: spec[PRODUCE]},
                {PRODUCE: "Produce"},
                {PRODUCE: VERSIONS},
                {PRODUCE: DEFAULT_LIMITS},
                Counter(),
                None,
                logging.getLogger("test"),
            )
            if at_once
            else None
        )

    async def handle(self, data: bytes) -> bytes | None:
        """The framed answer (None for acks 0), at once when the server gives it so, else the handler's."""
        if self.answers is not None:
            answered = self.answers.answer(data, "User:ANONYMOUS", "127.0.0.1", 1)
            if isinstance(answered, Deferred):
                return await _settled(answered)
            if answered is not None:
                return answered
        request = decode_request(data, {PRODUCE: VERSIONS}, {PRODUCE: DEFAULT_LIMITS})
        ctx = RequestContext(
            api_key=PRODUCE, api_version=request.api_version, correlation_id=request.correlation_id,
            client_id=request.client_id, client_host="127.0.0.1", connection_id=1,
        )  # fmt: skip
        response = await handle_produce(self.broker, ctx, request.body)
        return None if request.body.acks == 0 else _encode(request.correlation_id, response)

    def logs(self) -> dict[tuple[str, int], bytes]:
        out = {}
        for name in TOPICS:
            for index in range(2):
                plog = self.store.partition(name, index)
                assert plog is not None
                out[(name, index)] = plog.read(0, 1 << 20) if plog.log_end_offset else b""
        return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, policy=st.sampled_from([FsyncPolicy.NEVER, FsyncPolicy.INTERVAL, FsyncPolicy.ALWAYS]))
def test_answered_at_once_or_never_the_answers_and_logs_are_the_same(
    ops: list[tuple[int, str, int, str, int, str | None]], policy: FsyncPolicy
) -> None:
    async def scenario(root: Path) -> None:
        at_once, general = _Server(root / "a", True, policy), _Server(root / "b", False, policy)
        try:
            for n, (version, topic, index, kind, acks, client) in enumerate(ops):
                records = _records(kind, n)
                for repeat in range(2):  # the second time, the part that repeats is known
                    data = frame(version, 2 * n + repeat, client, records, topic=topic, index=index, acks=acks,
                                 topic_id=at_once.ids.get(topic, _ID))  # fmt: skip
                    other = frame(version, 2 * n + repeat, client, records, topic=topic, index=index, acks=acks,
                                  topic_id=general.ids.get(topic, _ID))  # fmt: skip
                    mine, theirs = await at_once.handle(data), await general.handle(other)
                    if version >= 13 and theirs is not None:  # (the topic ids differ: each store made its own)
                        assert mine is not None
                        mine = mine.replace(at_once.ids.get(topic, _ID).bytes, general.ids.get(topic, _ID).bytes)
                    assert mine == theirs
            assert at_once.logs() == general.logs()
            usual = any(t == "plain" and i < 2 and k == "plain" and a != 0 for _, t, i, k, a, _ in ops)
            assert not usual or (at_once.answers is not None and at_once.answers.counts["Produce"] > 0)
        finally:
            at_once.store.close()
            general.store.close()

    with tempfile.TemporaryDirectory() as root:
        asyncio.run(scenario(Path(root)))


def test_the_usual_produce_is_answered_at_once_and_the_rest_is_not(tmp_path: Path) -> None:
    """What the general path keeps: a topic that stamps LogAppendTime, a topic or partition that does not exist,
    acks 0, a transactional id. Under ``always`` the answer given at once comes once the group commit's round
    has the records on disk, and they are read only then."""

    async def scenario() -> None:
        server = _Server(tmp_path / "a", True, FsyncPolicy.INTERVAL)
        stamped = server.store.create_topic("stamped", 1, {"message.timestamp.type": "LogAppendTime"})
        assert server.answers is not None
        counts = server.answers.counts

        async def at_once(data: bytes) -> bool:
            before = counts["Produce"]
            await server.handle(data)
            return counts["Produce"] == before + 1

        batch = make_batch([b"v"], keys=[b"k"])
        assert await at_once(frame(9, 1, "p", batch, topic="plain"))  # (its remembered part learned first)
        assert await at_once(frame(9, 2, "p", make_batch([b"w"], keys=[b"k"]), topic="plain"))
        assert await at_once(frame(13, 3, "p", batch, topic_id=server.ids["plain"]))
        assert await at_once(frame(13, 4, "p", batch, topic_id=server.ids["plain"]))
        for kept in (
            frame(9, 5, "p", batch, topic="stamped"),
            frame(13, 5, "p", batch, topic_id=stamped.topic_id),
            frame(9, 6, "p", batch, topic="missing"),
            frame(9, 7, "p", batch, topic="plain", index=2),
            frame(9, 8, "p", batch, topic="plain", acks=0),
            frame(9, 9, "p", batch, topic="plain", transactional_id="tx"),
        ):
            assert not await at_once(kept) and not await at_once(kept)
        server.store.close()

        always = _Server(tmp_path / "b", True, FsyncPolicy.ALWAYS)
        assert always.answers is not None
        plog = always.store.partition("plain", 0)
        assert plog is not None
        for cid in range(3):
            later = always.answers.answer(frame(9, cid, "p", batch, topic="plain"), "User:ANONYMOUS", "h", 1)
            assert isinstance(later, Deferred) and not later.settled
            assert plog.log_end_offset == cid  # (appended, not readable before its fsync)
            answer = await _settled(later)
            assert plog.log_end_offset == cid + 1
            body = answer[4:]  # (after the correlation id: the topic, then the partition's row)
            assert struct.pack(">ihq", 0, 0, cid) in body
        always.store.close()

    asyncio.run(scenario())


def test_a_failed_fsync_answers_the_deferred_produce_with_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``handle_produce`` answers when the group commit's fsync of the log fails: KAFKA_STORAGE_ERROR."""
    fsync_file_by_file(monkeypatch)

    async def scenario() -> None:
        always = _Server(tmp_path, True, FsyncPolicy.ALWAYS)
        assert always.answers is not None

        def broken(*_: Any) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(PendingSync, "run", broken)
        later = always.answers.answer(frame(9, 1, "p", make_batch([b"v"], keys=[b"k"]), topic="plain"), "U", "h", 1)
        assert isinstance(later, Deferred)
        answer = await _settled(later)
        assert struct.pack(">ihqqq", 0, 56, -1, -1, -1) in answer  # KAFKA_STORAGE_ERROR, no offsets
        always.store.close()

    asyncio.run(scenario())


def test_an_alone_api_is_not_answered_at_once_behind_an_earlier_request(tmp_path: Path) -> None:
    """A Produce behind a request of its connection still being handled takes the general path (it must append
    after the ones before it)."""

    async def scenario() -> None:
        server = _Server(tmp_path, True, FsyncPolicy.NEVER)
        assert server.answers is not None
        batch = make_batch([b"v"], keys=[b"k"])
        await server.handle(frame(9, 1, "p", batch, topic="plain"))
        answered = server.answers.answer(frame(9, 2, "p", batch, topic="plain"), "User:ANONYMOUS", "h", 1, True)
        assert answered is None
        answered = server.answers.answer(frame(9, 3, "p", batch, topic="plain"), "User:ANONYMOUS", "h", 1, False)
        assert isinstance(answered, bytes) and struct.unpack_from(">i", answered, 4)[0] == 3
        server.store.close()

    asyncio.run(scenario())


def test_an_answer_failing_after_the_append_closes_the_connection_and_appends_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the answer's encoding, once the records are appended, must not hand the request to the general
    path (which would append them a second time): the answer fails, and its connection closes."""
    from regroup.server.handlers import data

    async def scenario() -> None:
        server = _Server(tmp_path, True, FsyncPolicy.NEVER)
        assert server.answers is not None

        def broken(*_: Any) -> Any:
            raise RuntimeError("a bug")

        monkeypatch.setattr(data, "one_partition_answer", broken)
        answered = server.answers.answer(frame(9, 1, "p", make_batch([b"v"], keys=[b"k"]), topic="plain"), "U", "h", 1)
        assert isinstance(answered, Deferred) and answered.settled
        assert isinstance(answered.outcome[1], RuntimeError)
        plog = server.store.partition("plain", 0)
        assert plog is not None and plog.log_end_offset == 1
        server.store.close()

    asyncio.run(scenario())
