"""A Produce appends for ``PRODUCE_SLICE_S`` at most before it gives the event loop a turn
(``handlers/data.py``): its answer is the one it would give in one step, its connection's later requests are
held while it appends over turns, and a topic deleted (or deleted and created again) between two turns is gone
for the rest of the request. The files of many partitions never written are made on the topic store's worker
thread first (``FILES_ASIDE_MIN``), a topic deleted meanwhile getting none. Called directly on a real store,
most with the slice at 0 (a turn before every partition but the first)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from regroup.server import topics as topics_module
from regroup.server.api import RequestContext
from regroup.server.handlers import data
from regroup.server.handlers.data import handle_produce
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.batches import make_batch
from tests.server_data.helpers import API_KEYS, FakeBroker, _ms, build, counting_turns, request_module, wire


class Hold:
    """A connection's session as the handler sees it: counts holds and releases."""

    def __init__(self) -> None:
        self.holds = 0
        self.releases = 0

    def hold(self) -> None:
        self.holds += 1

    def release(self) -> None:
        self.releases += 1


def produce(version: int, topics: dict[Any, dict[int, bytes]]) -> Any:
    """Produce of several topics (a name, or a TopicInfo for v13+) and their partitions' batches."""
    mod = request_module("produce", version)
    entries = []
    for topic, partitions in topics.items():
        parts = tuple(build(mod, "PartitionProduceData", index=p, records=r) for p, r in partitions.items())
        name = topic if isinstance(topic, str) else topic.name
        topic_id = None if isinstance(topic, str) else topic.topic_id
        entries.append(build(mod, "TopicProduceData", name=name, topic_id=topic_id, partition_data=parts))
    return build(mod, "ProduceRequest", transactional_id=None, acks=-1, timeout=_ms(30_000), topic_data=tuple(entries))


def context(version: int, session: Any = None) -> RequestContext:
    return RequestContext(
        api_key=API_KEYS["produce"],
        api_version=version,
        correlation_id=1,
        client_id="test",
        client_host="127.0.0.1",
        connection_id=1,
        session=session,
    )


def answers(response: Any, names: dict[Any, str] | None = None) -> list[tuple[object, int, int, int]]:
    """(topic, partition, error, base offset) of each partition answered; ``names`` names topic ids."""
    return [
        (getattr(t, "name", None) or (names or {}).get(t.topic_id, t.topic_id), p.index, p.error_code, p.base_offset)
        for t in response.responses
        for p in t.partition_responses
    ]


async def produce_counting_turns(broker: FakeBroker, version: int, request: Any, session: Any = None) -> Any:
    """The handler's answer, and how many turns of the loop went by while it ran."""
    response, turns = await counting_turns(handle_produce(broker, context(version, session), wire(request)))
    return wire(response), turns


layouts = st.lists(
    st.tuples(st.integers(1, 6), st.lists(st.integers(0, 8), min_size=1, max_size=6, unique=True)),
    min_size=1,
    max_size=4,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts, version=st.sampled_from([9, 13]))
@example(layout=[(1, [0]), (5, [0, 1, 2, 3, 4]), (5, [0, 1, 2, 3, 4]), (5, [0, 1, 2, 3, 4])], version=9)
def test_over_turns_the_answer_is_the_one_given_at_once(
    tmp_path_factory: pytest.TempPathFactory, layout: list[tuple[int, list[int]]], version: int
) -> None:
    """Random topics and partitions (some beyond a topic's count: unknown), the same request on two stores:
    one appended in one step, one with a turn before every partition; the answers and the logs are the same."""
    results = []
    for slice_s in (60.0, 0.0):
        root = tmp_path_factory.mktemp("store")
        with TopicStore.open(Path(root) / "topics", fsync=FsyncPolicy.NEVER) as store:
            broker = FakeBroker(topic_store=store)
            infos = [store.create_topic(f"t{i}", count) for i, (count, _) in enumerate(layout)]
            request = produce(
                version,
                {
                    (info if version >= 13 else info.name): {p: make_batch([f"{info.name}-{p}".encode()]) for p in ps}
                    for info, (_, ps) in zip(infos, layout, strict=True)
                },
            )
            data_slice, files_aside = data.PRODUCE_SLICE_S, data.FILES_ASIDE_MIN
            data.PRODUCE_SLICE_S = slice_s
            data.FILES_ASIDE_MIN = 1 << 30  # (16 partitions' files made aside take turns of their own: not counted)
            try:
                response, turns = asyncio.run(produce_counting_turns(broker, version, request))
            finally:
                data.PRODUCE_SLICE_S, data.FILES_ASIDE_MIN = data_slice, files_aside
            ends = {(i.name, p): store.partition(i.name, p).log_end_offset for i in infos for p in range(i.partitions)}
            results.append((answers(response, {i.topic_id: i.name for i in infos}), ends, turns))
    (at_once, ends_at_once, turns_at_once), (over_turns, ends_over_turns, turns_over) = results
    assert over_turns == at_once and ends_over_turns == ends_at_once
    partitions = sum(len(ps) for _, ps in layout)
    assert turns_at_once <= 1 and turns_over >= partitions - 1  # (a turn before every partition but the first)


def test_the_connection_is_held_while_appending_over_turns(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "PRODUCE_SLICE_S", 0.0)
    store.create_topic("t", 5)
    session = Hold()
    seen: list[tuple[int, int]] = []

    async def scenario() -> Any:
        async def watch() -> None:
            while session.releases == 0:
                seen.append((session.holds, session.releases))
                await asyncio.sleep(0)

        watcher = asyncio.get_running_loop().create_task(watch())
        response, _ = await produce_counting_turns(
            broker, 9, produce(9, {"t": {p: make_batch([b"v"]) for p in range(5)}}), session
        )
        await watcher
        return response

    response = asyncio.run(scenario())
    assert [code for _, _, code, _ in answers(response)] == [ErrorCode.none] * 5
    assert (session.holds, session.releases) == (1, 1)
    assert (1, 0) in seen  # held while the handler gave turns away


def test_one_step_holds_nothing(broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data, "PRODUCE_SLICE_S", 60.0)
    store.create_topic("t", 5)
    session = Hold()
    response, _ = asyncio.run(
        produce_counting_turns(broker, 9, produce(9, {"t": {p: make_batch([b"v"]) for p in range(5)}}), session)
    )
    assert len(answers(response)) == 5 and (session.holds, session.releases) == (0, 0)


def test_a_cancelled_produce_lets_the_connection_go(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "PRODUCE_SLICE_S", 0.0)
    store.create_topic("t", 50)
    session = Hold()

    async def scenario() -> None:
        request = wire(produce(9, {"t": {p: make_batch([b"v"]) for p in range(50)}}))
        task = asyncio.get_running_loop().create_task(handle_produce(broker, context(9, session), request))
        for _ in range(5):
            await asyncio.sleep(0)
        assert session.holds == 1 and session.releases == 0
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert (session.holds, session.releases) == (1, 1)


@pytest.mark.parametrize(("version", "recreate"), [(9, False), (9, True), (13, False), (13, True)])
def test_a_topic_deleted_between_two_turns_is_gone_for_the_rest(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch, version: int, recreate: bool
) -> None:
    monkeypatch.setattr(data, "PRODUCE_SLICE_S", 0.0)
    info = store.create_topic("t", 6)
    request = wire(produce(version, {(info if version >= 13 else "t"): {p: make_batch([b"v"]) for p in range(6)}}))

    async def scenario() -> Any:
        task = asyncio.get_running_loop().create_task(handle_produce(broker, context(version), request))
        for _ in range(3):  # (the first partition and two more appended)
            await asyncio.sleep(0)
        store.delete_topic("t")
        if recreate:
            store.create_topic("t", 6)
        return wire(await task)

    response = asyncio.run(scenario())
    codes = [code for _, _, code, _ in answers(response)]
    gone = ErrorCode.unknown_topic_or_partition if version < 13 else ErrorCode.unknown_topic_id
    appended = codes.count(ErrorCode.none)
    assert 1 <= appended < 6 and codes == [ErrorCode.none] * appended + [gone] * (6 - appended)
    if recreate:  # nothing of it went to the topic created since
        assert all(store.partition("t", p).log_end_offset == 0 for p in range(6))


# ---------------------------------------------------------------------------------------- files made aside


def watch_makes(monkeypatch: pytest.MonkeyPatch, before: Any = None) -> list[tuple[str, str]]:
    """Each partition directory the topic store's worker makes: (its name, the thread that made it)."""
    made: list[tuple[str, str]] = []
    real = topics_module.make_files

    def make_files(directory: Path, segment: Path) -> None:
        if before is not None:
            before()
        made.append((directory.name, threading.current_thread().name))
        real(directory, segment)

    monkeypatch.setattr(topics_module, "make_files", make_files)
    return made


def test_many_new_partitions_have_their_files_made_on_the_store_worker(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = watch_makes(monkeypatch)
    info = store.create_topic("t", 40)
    store.partition("t", 0).append(make_batch([b"old"]))  # (written before: its files exist)
    session = Hold()
    response, _ = asyncio.run(
        produce_counting_turns(broker, 9, produce(9, {"t": {p: make_batch([b"v"]) for p in range(40)}}), session)
    )
    assert [(p, code, base) for _, p, code, base in answers(response)] == [(0, 0, 1)] + [
        (p, 0, 0) for p in range(1, 40)
    ]
    assert sorted(int(name) for name, _ in made) == list(range(1, 40))
    assert all(thread.startswith("topic-disk") for _, thread in made)
    assert (session.holds, session.releases) == (1, 1)  # (the connection held while they were made)
    assert [store.partition(info.name, p).log_end_offset for p in range(40)] == [2] + [1] * 39


def test_the_files_made_aside_are_noted_by_their_logs_in_slices(
    store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's loop work over the new partitions gives the loop turns (the slice made 0): other work sees
    them noted as made one after another, and every one is made in the end."""
    monkeypatch.setattr(topics_module, "SLICE_S", 0.0)
    store.create_topic("t", 40)
    logs = [store.partition("t", p) for p in range(40)]

    async def scenario() -> set[int]:
        seen: set[int] = set()
        done = False

        async def watch() -> None:
            while not done:
                seen.add(sum(plog.unmade_files() is None for plog in logs))
                await asyncio.sleep(0)

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await store.make_files([(plog, files) for plog in logs if (files := plog.unmade_files())])
        finally:
            done = True
            await watcher
        return seen

    seen = asyncio.run(scenario())
    assert all(plog.unmade_files() is None for plog in logs)
    assert len({n for n in seen if 0 < n < 40}) >= 20


def test_a_few_new_partitions_are_made_by_their_appends(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "PRODUCE_SLICE_S", 60.0)
    made = watch_makes(monkeypatch)
    store.create_topic("t", data.FILES_ASIDE_MIN - 1)
    request = produce(9, {"t": {p: make_batch([b"v"]) for p in range(data.FILES_ASIDE_MIN - 1)}})
    response, turns = asyncio.run(produce_counting_turns(broker, 9, request, Hold()))
    assert made == [] and turns <= 1
    assert all(code == 0 for _, _, code, _ in answers(response))


@pytest.mark.parametrize("version", [9, 13])
def test_a_topic_deleted_while_its_files_are_made_is_gone(
    broker: FakeBroker, store: TopicStore, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, version: int
) -> None:
    """DeleteTopics on the loop while the worker makes the files: nothing is made for it, nothing appended,
    and every partition of it is answered as a topic that is gone."""
    info = store.create_topic("t", 30)
    loop_ready = threading.Event()
    deleted = threading.Event()
    watch_makes(monkeypatch, before=lambda: (loop_ready.set(), deleted.wait(10)))
    request = wire(produce(version, {(info if version >= 13 else "t"): {p: make_batch([b"v"]) for p in range(30)}}))

    async def scenario() -> Any:
        task = asyncio.get_running_loop().create_task(handle_produce(broker, context(version), request))
        for _ in range(5_000):
            if loop_ready.is_set() or task.done():
                break
            await asyncio.sleep(0.001)
        assert loop_ready.is_set(), "the worker made no files"
        store.delete_topic("t")
        deleted.set()
        return wire(await task)

    response = asyncio.run(scenario())
    gone = ErrorCode.unknown_topic_or_partition if version < 13 else ErrorCode.unknown_topic_id
    assert [code for _, _, code, _ in answers(response)] == [gone] * 30
    assert not (tmp_path / "topics" / "topics" / "t").exists()
    assert (tmp_path / "topics" / "topics").is_dir()
