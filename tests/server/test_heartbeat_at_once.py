"""A steady member's Heartbeat or ConsumerGroupHeartbeat is answered at once from its bytes
(``server/at_once.py``), and a server that does so behaves as one that does not: the member stays while it
heartbeats and its session expires when it stops, the answer waits in order behind a request parked before it
on the same connection, the request is counted and measured, a frame over an identifier limit is still
answered INVALID_REQUEST, and a KIP-848 heartbeat with anything new in it (a subscription, another client id,
a wrong epoch) is the general path's. (That the principal is authorized on every heartbeat, learned bytes or
not, is in ``test_authorization_matrix``.)

The server runs in the test's event loop, over real sockets, so the test can see which path answered.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as E
from kio.serial import entity_reader

from regroup.coordinator.config import CoordinatorConfig
from regroup.network.limits import DEFAULT_LIMITS, GROUP_ID
from regroup.server.app import Server, ServerConfig
from regroup.storage.record_log import FsyncPolicy
from tests.server.wire import DESCRIBE, HEARTBEAT, JOIN, LEAVE, SYNC, encode_request

SESSION_MS = 1_500  # (long enough for a loaded machine to keep up with a heartbeat every 100 ms)


class Client:
    """A pipelining client over asyncio streams: requests go out at once, answers are read in order."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.next_id = 0
        self.sent: list[tuple[int, int, int]] = []

    @classmethod
    async def open(cls, port: int) -> Client:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    def send(self, api_key: int, version: int, client_id: str = "at-once-test", **fields: Any) -> int:
        self.next_id += 1
        self.writer.write(encode_request(api_key, version, self.next_id, client_id, **fields))
        self.sent.append((self.next_id, api_key, version))
        return self.next_id

    async def receive(self) -> tuple[int, Any]:
        """(correlation id, decoded body) of the next answer; it must answer the oldest request sent."""
        (size,) = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))
        frame = await asyncio.wait_for(self.reader.readexactly(size), 10)
        correlation_id, api_key, version = self.sent.pop(0)
        assert struct.unpack_from(">i", frame)[0] == correlation_id
        cls = load_response_schema(api_key, version)
        _, used = entity_reader(cls.__header_schema__)(frame, 0)
        body, _ = entity_reader(cls)(frame, used)
        return correlation_id, body

    async def call(self, api_key: int, version: int, client_id: str = "at-once-test", **fields: Any) -> Any:
        self.send(api_key, version, client_id, **fields)
        return (await self.receive())[1]

    def close(self) -> None:
        self.writer.close()


@asynccontextmanager
async def running(tmp_path: Path, **config: Any) -> AsyncIterator[tuple[Server, int, dict[str, int]]]:
    """A server, its port, and how many requests of each API its handlers' general path answered."""
    cfg = ServerConfig(
        host="127.0.0.1",
        port=0,
        data_dir=tmp_path,
        fsync=FsyncPolicy.NEVER,
        coordinator=CoordinatorConfig(group_min_session_timeout_ms=100, group_initial_rebalance_delay_ms=0),
        **config,
    )
    server = Server(cfg)
    await server.start()
    general: dict[str, int] = {}
    dispatcher = server._dispatcher
    assert dispatcher is not None
    respond = dispatcher.respond

    async def counted(request: Any, **kwargs: Any) -> Any:
        key = str(request.api_key)
        general[key] = general.get(key, 0) + 1
        return await respond(request, **kwargs)

    dispatcher.respond = counted  # type: ignore[method-assign]
    try:
        yield server, server._listeners[0].sockets[0].getsockname()[1], general
    finally:
        await server.close()


def join_fields(group: str, member_id: str) -> dict[str, Any]:
    """A JoinGroup v9 of ``member_id`` ("" for a new member) to ``group``."""
    return {
        "group_id": group,
        "member_id": member_id,
        "session_timeout": SESSION_MS,
        "rebalance_timeout": 5_000,
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b""}],
        "reason": None,
    }


async def joined(client: Client, group: str) -> tuple[str, int]:
    """A one-member group formed (JoinGroup twice, SyncGroup): (member id, generation)."""
    first = await client.call(JOIN, 9, **join_fields(group, ""))
    assert first.error_code == E.member_id_required
    join = await client.call(JOIN, 9, **join_fields(group, first.member_id))
    assert join.error_code == E.none
    sync = await client.call(
        SYNC,
        5,
        group_id=group,
        generation_id=join.generation_id,
        member_id=join.member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=[{"member_id": join.member_id, "assignment": b""}],
    )
    assert sync.error_code == E.none
    return join.member_id, join.generation_id


def beat(group: str, member_id: str, generation: int) -> dict[str, Any]:
    return {"group_id": group, "generation_id": generation, "member_id": member_id, "group_instance_id": None}


def test_a_steady_member_is_answered_at_once_stays_while_it_beats_and_expires_after(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as (_, port, general):
            client = await Client.open(port)
            member_id, generation = await joined(client, "steady")
            before = dict(general)
            for _ in range(40):  # 4 s: more than two session timeouts
                assert (await client.call(HEARTBEAT, 4, **beat("steady", member_id, generation))).error_code == E.none
                await asyncio.sleep(0.1)
            # the first heartbeat's bytes were learned by decoding them; every later one was answered at once
            assert general.get(str(HEARTBEAT), 0) - before.get(str(HEARTBEAT), 0) == 0
            described = await client.call(DESCRIBE, 5, groups=["steady"], include_authorized_operations=False)
            assert [m.member_id for m in described.groups[0].members] == [member_id]
            await asyncio.sleep(SESSION_MS * 2 / 1000)  # silent: the session expires
            late = await client.call(HEARTBEAT, 4, **beat("steady", member_id, generation))
            assert late.error_code == E.unknown_member_id
            assert general[str(HEARTBEAT)] - before.get(str(HEARTBEAT), 0) == 1  # (an error: the general path's)
            described = await client.call(DESCRIBE, 5, groups=["steady"], include_authorized_operations=False)
            assert (described.groups[0].group_state, described.groups[0].members) == ("Empty", ())
            client.close()

    asyncio.run(scenario())


def test_an_answer_at_once_waits_behind_a_parked_request_of_its_connection(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as (_, port, general):
            first, second = await Client.open(port), await Client.open(port)
            member_id, generation = await joined(first, "ordered")
            await first.call(HEARTBEAT, 4, **beat("ordered", member_id, generation))  # its bytes learned
            # a newcomer's JoinGroup parks until the member rejoins; on the same connection, a heartbeat of
            # another group's steady member is answered at once, but goes out after the JoinGroup's answer
            other_id, other_generation = await joined(second, "other")
            await second.call(HEARTBEAT, 4, **beat("other", other_id, other_generation))
            newcomer = await second.call(JOIN, 9, **join_fields("ordered", ""))
            parked = second.send(JOIN, 9, **join_fields("ordered", newcomer.member_id))
            answered_before = general.get(str(HEARTBEAT), 0)
            behind = second.send(HEARTBEAT, 4, **beat("other", other_id, other_generation))
            await asyncio.sleep(0.2)
            assert general.get(str(HEARTBEAT), 0) == answered_before  # answered at once, not by the handler
            # the member of "ordered" is told to rejoin, rejoins, and the parked JoinGroup completes
            told = await first.call(HEARTBEAT, 4, **beat("ordered", member_id, generation))
            assert told.error_code == E.rebalance_in_progress
            rejoin = await first.call(JOIN, 9, **join_fields("ordered", member_id))
            assert rejoin.error_code == E.none
            correlation_id, join = await second.receive()
            assert (correlation_id, join.error_code) == (parked, E.none)
            correlation_id, heartbeat = await second.receive()
            assert (correlation_id, heartbeat.error_code) == (behind, E.none)
            first.close()
            second.close()

    asyncio.run(scenario())


def test_a_heartbeat_goes_on_while_another_groups_records_are_being_written(tmp_path: Path) -> None:
    """Group by group: a steady member's heartbeat is answered (at once, and by the general path when it is
    not steady) while another group's records wait for the log, and a heartbeat of that other group waits
    for them."""

    async def scenario() -> None:
        async with running(tmp_path) as (server, port, general):
            steady, busy = await Client.open(port), await Client.open(port)
            member_id, generation = await joined(steady, "steady")
            await steady.call(HEARTBEAT, 4, **beat("steady", member_id, generation))  # its bytes learned
            busy_id, busy_generation = await joined(busy, "busy")
            runtime = server._runtime
            assert runtime is not None
            writer = runtime._writer
            gate = threading.Event()
            append = writer._append

            def held(records: Any) -> object:
                assert gate.wait(10)
                return append(records)

            writer._append = held
            try:
                leaving = [{"member_id": busy_id, "group_instance_id": None, "reason": None}]
                left = busy.send(LEAVE, 5, group_id="busy", members=leaving)  # the group empties: records, held
                await asyncio.sleep(0.2)
                assert not writer.idle and "busy" in runtime._unwritten
                answered_before = general.get(str(HEARTBEAT), 0)
                beat_at_once = await asyncio.wait_for(
                    steady.call(HEARTBEAT, 4, **beat("steady", member_id, generation)), 2
                )
                assert beat_at_once.error_code == E.none
                assert general.get(str(HEARTBEAT), 0) == answered_before  # answered at once
                stale = await asyncio.wait_for(steady.call(HEARTBEAT, 4, **beat("steady", member_id, -5)), 2)
                assert stale.error_code == E.illegal_generation  # (the general path's, not held either)
                assert general.get(str(HEARTBEAT), 0) == answered_before + 1
                waiting = busy.send(HEARTBEAT, 4, **beat("busy", busy_id, busy_generation))
                with pytest.raises(asyncio.TimeoutError):  # neither the leave nor its group's heartbeat answered
                    await asyncio.wait_for(busy.reader.readexactly(4), 0.3)
            finally:
                gate.set()
            correlation_id, leave = await busy.receive()
            assert (correlation_id, leave.error_code) == (left, E.none)
            correlation_id, late = await busy.receive()
            assert (correlation_id, late.error_code) == (waiting, E.unknown_member_id)
            steady.close()
            busy.close()

    asyncio.run(scenario())


def test_answers_at_once_are_counted_and_measured(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running(tmp_path, metrics_port=0) as (server, port, general):
            client = await Client.open(port)
            member_id, generation = await joined(client, "counted")
            dispatcher = server._dispatcher
            assert dispatcher is not None
            dispatcher.take_counts()
            for _ in range(40):
                client.send(HEARTBEAT, 4, **beat("counted", member_id, generation))
            for _ in range(40):
                assert (await client.receive())[1].error_code == E.none
            assert dispatcher.take_counts().get("Heartbeat") == 40
            assert general.get(str(HEARTBEAT), 0) <= 1
            url = f"http://127.0.0.1:{server.metrics_port}/metrics"
            text = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read().decode())
            totals = [line for line in text.splitlines() if line.startswith('regroup_requests_total{api="Heartbeat"}')]
            assert totals and float(totals[0].split()[-1]) >= 40, totals
            client.close()

    asyncio.run(scenario())


def test_a_group_id_over_its_limit_is_still_invalid_request(tmp_path: Path) -> None:
    async def scenario() -> None:
        limits = dict(DEFAULT_LIMITS)
        limits[GROUP_ID] = 8
        async with running(tmp_path, id_limits=limits) as (_, port, _general):
            client = await Client.open(port)
            for _ in range(3):  # the same bytes again: never learned as an answer at once
                answer = await client.call(HEARTBEAT, 4, **beat("a-much-too-long-group", "m", 1))
                assert answer.error_code == E.invalid_request
            client.close()

    asyncio.run(scenario())


CONSUMER_GROUP_HEARTBEAT = 68


def consumer_beat(group: str, member_id: str, epoch: int, **changed: Any) -> dict[str, Any]:
    """A ConsumerGroupHeartbeat v1 with every optional field null (nothing new) except ``changed``."""
    fields: dict[str, Any] = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout": -1,
        "subscribed_topic_names": None,
        "subscribed_topic_regex": None,
        "server_assignor": None,
        "topic_partitions": None,
    }
    return fields | changed


def test_a_steady_consumer_group_member_is_answered_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running(tmp_path) as (_, port, general):
            client = await Client.open(port)
            joined = await client.call(
                CONSUMER_GROUP_HEARTBEAT,
                1,
                **consumer_beat(
                    "kip848", "member-1", 0, rebalance_timeout=5_000, subscribed_topic_names=["t"], topic_partitions=[]
                ),
            )
            assert joined.error_code == E.none and joined.member_epoch > 0
            epoch = joined.member_epoch
            first = await client.call(CONSUMER_GROUP_HEARTBEAT, 1, **consumer_beat("kip848", "member-1", epoch))
            before = general.get(str(CONSUMER_GROUP_HEARTBEAT), 0)
            for _ in range(10):
                steady = await client.call(CONSUMER_GROUP_HEARTBEAT, 1, **consumer_beat("kip848", "member-1", epoch))
                assert (steady.error_code, steady.member_id, steady.member_epoch) == (E.none, "member-1", epoch)
                assert steady.heartbeat_interval == first.heartbeat_interval and steady.assignment is None
            assert general.get(str(CONSUMER_GROUP_HEARTBEAT), 0) == before  # (the first one's bytes were learned)
            # something new goes the general way: a new subscription bumps the group epoch
            changed = await client.call(
                CONSUMER_GROUP_HEARTBEAT, 1, **consumer_beat("kip848", "member-1", epoch, subscribed_topic_names=["u"])
            )
            assert changed.error_code == E.none
            assert general.get(str(CONSUMER_GROUP_HEARTBEAT), 0) == before + 1
            # so does the same member's heartbeat from another client id (its metadata changes)
            other = await client.call(
                CONSUMER_GROUP_HEARTBEAT,
                1,
                client_id="renamed",
                **consumer_beat("kip848", "member-1", changed.member_epoch),
            )
            assert other.error_code == E.none
            assert general.get(str(CONSUMER_GROUP_HEARTBEAT), 0) == before + 2
            fenced = await client.call(CONSUMER_GROUP_HEARTBEAT, 1, **consumer_beat("kip848", "member-1", epoch + 5))
            assert fenced.error_code == E.fenced_member_epoch and fenced.error_message
            client.close()

    asyncio.run(scenario())


def test_a_failing_answer_at_once_leaves_the_request_to_the_general_path() -> None:
    """A bug in an API's ``prepare`` or ``answer`` costs no request: the frame is the general path's, and the
    connection goes on (one error logged)."""
    from collections import Counter

    from regroup.server.api import ApiSpec, AtOnce
    from regroup.server.at_once import AtOnceAnswers

    def broken(*_: Any) -> Any:
        raise RuntimeError("a bug")

    async def handler(*_: Any) -> Any:
        raise AssertionError("not called here")

    frame = encode_request(HEARTBEAT, 4, 1, "c", **beat("g", "m", 1))[4:]
    for prepare, answer in ((broken, lambda *_: None), (lambda _v, body: body, broken)):
        counts: Counter[str] = Counter()
        answers = AtOnceAnswers(
            None,
            {HEARTBEAT: ApiSpec(HEARTBEAT, 0, 4, handler, at_once=AtOnce(prepare, answer))},
            {HEARTBEAT: "Heartbeat"},
            {HEARTBEAT: (0, 4)},
            {HEARTBEAT: {}},
            counts,
            None,
            logging.getLogger("test"),
        )
        assert answers.answer(frame, "User:ANONYMOUS", "127.0.0.1", 1) is None
        assert answers.answer(frame, "User:ANONYMOUS", "127.0.0.1", 1) is None  # (learned, still declined)
        assert not counts
