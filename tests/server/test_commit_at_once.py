"""An OffsetCommit answered at once (``handlers/offsets.py``'s ``AtOnce``: decoded, authorized and handed to the
core without the handler's coroutine, its answer a ``Deferred`` settled once the records are durable) gives the
same answers, byte for byte, and leaves the same committed offsets as a server that never answers at once, under
every fsync policy; what it leaves to the general path (a topic or partition that does not exist, a refused ACL,
more than ``CHUNK`` partitions) is answered there; and a commit still waiting for its fsync is answered in its
place among its connection's answers.

Both servers run in the test's event loop, over real sockets."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.coordinator.config import CoordinatorConfig
from regroup.server.app import Server, ServerConfig
from regroup.storage.record_log import FsyncPolicy
from tests.server.wire import CREATE_TOPICS, OFFSET_COMMIT, OFFSET_FETCH, encode_request

TOPICS = {"a": 3, "b": 1}


class Raw:
    """A pipelining client over asyncio streams that reads answers as bytes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def send(self, frame: bytes) -> None:
        self.writer.write(frame)

    async def read(self) -> bytes:
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))
        return await asyncio.wait_for(self.reader.readexactly(size), 10)


@asynccontextmanager
async def served(root: Path, fsync: FsyncPolicy, at_once: bool) -> AsyncIterator[tuple[Raw, dict[int, int]]]:
    """A client of a server with the topics of ``TOPICS``, and how many requests per API its handlers answered
    (the general path's)."""
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        data_dir=root,
        fsync=fsync,
        coordinator=CoordinatorConfig(group_initial_rebalance_delay_ms=0),
    )
    server = Server(config)
    await server.start()
    dispatcher = server._dispatcher
    assert dispatcher is not None
    if not at_once:
        dispatcher.answer_at_once = lambda *_: None  # type: ignore[method-assign]
    general: dict[int, int] = {}
    respond = dispatcher.respond

    async def counted(request: Any, **kwargs: Any) -> Any:
        general[request.api_key] = general.get(request.api_key, 0) + 1
        return await respond(request, **kwargs)

    dispatcher.respond = counted  # type: ignore[method-assign]
    reader, writer = await asyncio.open_connection("127.0.0.1", server._listeners[0].sockets[0].getsockname()[1])
    client = Raw(reader, writer)
    topics = [{"name": n, "num_partitions": p, "replication_factor": 1, "assignments": [], "configs": []}
              for n, p in TOPICS.items()]  # fmt: skip
    client.send(encode_request(CREATE_TOPICS, 7, 0, "t", topics=topics, timeout=10_000, validate_only=False))
    await client.read()
    try:
        yield client, general
    finally:
        writer.close()
        await server.close()


def commit_frame(version: int, cid: int, group: str, generation: int, member: str, topics: list[Any]) -> bytes:
    fields = {
        "group_id": group, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "retention_time": -1,
        "topics": [{"name": name, "partitions": [
            {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": epoch,
             "committed_metadata": metadata} for p, offset, epoch, metadata in partitions]}
            for name, partitions in topics],
    }  # fmt: skip
    return encode_request(OFFSET_COMMIT, version, cid, "committer", **fields)


def fetch_frame(cid: int, groups: list[str]) -> bytes:
    return encode_request(OFFSET_FETCH, 9, cid, "reader", groups=[{"group_id": g, "topics": None} for g in groups],
                          require_stable=False)  # fmt: skip


partition_rows = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 1, 2, 0, 1, -1, 3]),  # (-1 and 3 are out of range for "a"; 1 and up for "b")
        st.integers(0, 2**40),
        st.integers(-1, 9),
        st.none() | st.sampled_from(["", "meta", "m" * 5000]),  # (over offset.metadata.max.bytes: refused)
    ),
    max_size=4,
)
commits = st.lists(
    st.tuples(
        st.integers(2, 9),
        st.sampled_from(["g1", "g2"]),
        st.sampled_from([(-1, ""), (-1, ""), (3, "nobody")]),  # (a member-less commit; one of an unknown member)
        st.lists(st.tuples(st.sampled_from(["a", "a", "a", "b", "missing"]), partition_rows), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=10,
)


@settings(
    max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(ops=commits, fsync=st.sampled_from([FsyncPolicy.NEVER, FsyncPolicy.INTERVAL, FsyncPolicy.ALWAYS]))
def test_answered_at_once_or_never_the_answers_and_offsets_are_the_same(
    tmp_path_factory: Any, ops: list[Any], fsync: FsyncPolicy
) -> None:
    async def scenario() -> None:
        root = tmp_path_factory.mktemp("commits")
        async with (
            served(root / "a", fsync, True) as (mine, mine_general),
            served(root / "b", fsync, False) as (theirs, _),
        ):
            frames = [commit_frame(v, i + 1, g, gen, member, topics) for i, (v, g, (gen, member), topics) in
                      enumerate(ops)]  # fmt: skip
            for frame in frames:  # all at once: the at-once answers wait in order behind each other
                mine.send(frame)
                theirs.send(frame)
            for _ in frames:
                assert await mine.read() == await theirs.read()
            mine.send(fetch_frame(99, ["g1", "g2"]))
            theirs.send(fetch_frame(99, ["g1", "g2"]))
            assert await mine.read() == await theirs.read()
            usual = any(gen == -1 and all(t != "missing" for t, _ in topics) and any(rows for _, rows in topics)
                        and all(0 <= p < TOPICS[t] for t, rows in topics for p, *_ in rows)
                        for _, _, (gen, _), topics in ops)  # fmt: skip
            assert not usual or mine_general.get(OFFSET_COMMIT, 0) < len(frames)

    asyncio.run(scenario())


def test_a_commit_waiting_for_its_fsync_is_answered_in_its_place(tmp_path: Path) -> None:
    """Under ``always`` a commit answered at once waits for its records' fsync; the requests after it on the
    same connection (another commit, a fetch of what it committed) are answered after it, in order."""

    async def scenario() -> None:
        async with served(tmp_path, FsyncPolicy.ALWAYS, True) as (client, general):
            for n in range(5):
                client.send(commit_frame(9, 10 * n + 1, "ordered", -1, "", [("a", [(0, n, -1, "")])]))
                client.send(commit_frame(9, 10 * n + 2, "ordered", -1, "", [("a", [(1, n, -1, "")])]))
                client.send(fetch_frame(10 * n + 3, ["ordered"]))
                for cid in (10 * n + 1, 10 * n + 2, 10 * n + 3):
                    answer = await client.read()
                    assert struct.unpack_from(">i", answer)[0] == cid
                fetched = answer
                assert struct.pack(">iqi", 0, n, -1) in fetched and struct.pack(">iqi", 1, n, -1) in fetched
            assert general.get(OFFSET_COMMIT, 0) == 0  # every commit answered at once

    asyncio.run(scenario())


def test_what_the_general_path_keeps(tmp_path: Path) -> None:
    """A partition out of range, a topic that does not exist, a commit of more than ``CHUNK`` partitions: the
    handler answers them (and the rest of such a commit is committed as usual)."""

    async def scenario() -> None:
        async with served(tmp_path, FsyncPolicy.NEVER, True) as (client, general):
            kept = [
                [("a", [(7, 1, -1, "")])],
                [("missing", [(0, 1, -1, "")])],
                [("a", [(0, 1, -1, "")]), ("missing", [(0, 1, -1, "")])],
                [("a", [(p % 3, p, -1, "") for p in range(1001)])],
            ]
            for n, topics in enumerate(kept):
                before = general.get(OFFSET_COMMIT, 0)
                client.send(commit_frame(9, n, "kept", -1, "", topics))
                await client.read()
                assert general.get(OFFSET_COMMIT, 0) == before + 1
            before = general.get(OFFSET_COMMIT, 0)
            client.send(commit_frame(9, 9, "kept", -1, "", [("a", [(0, 5, -1, "")])]))
            await client.read()
            assert general.get(OFFSET_COMMIT, 0) == before

    asyncio.run(scenario())
