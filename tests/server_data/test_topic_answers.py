"""Metadata and DescribeTopicPartitions answered from cached encoded entries (``server/topic_answers.py``) are
byte for byte the straightforward answers (``reference_topics.py``: every entity built afresh), over random
sequences of topic changes (created, grown, deleted), ACL changes and requests of every version, named and
all-topics, with and without authorized operations, by several principals; the caches live across the whole
sequence, so stale entries would show."""

from __future__ import annotations

import asyncio
import contextlib
import io
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from regroup.model.errors import ApiError
from regroup.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from regroup.security.authorizer import Authorizer
from regroup.security.bindings import AclBinding, validate_binding
from regroup.server.api import RequestContext
from regroup.server.encoded import PreEncoded
from regroup.server.handlers import topics as topics_handlers
from regroup.server.handlers.cluster import handle_describe_topic_partitions
from regroup.server.handlers.topics import build, handle_metadata
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from tests.server_data.helpers import request_module
from tests.server_data.reference_topics import reference_describe_topic_partitions, reference_metadata

NAMES = st.text(alphabet="ab._-", min_size=1, max_size=3) | st.sampled_from(["", "a b", "é"])
PRINCIPALS = ["User:alice", "User:bob", "User:ANONYMOUS"]
OPERATIONS = [AclOperation.DESCRIBE, AclOperation.READ, AclOperation.CREATE, AclOperation.ALL, AclOperation.ALTER]


@dataclass
class Broker:
    topic_store: TopicStore
    authorizer: Authorizer | None
    host: str = "localhost"
    port: int = 19092
    auto_create_topics: bool = True
    default_partitions: int = 2
    rack: str | None = None

    def endpoint(self, listener: str) -> tuple[str, int]:
        return self.host, self.port


acls = st.builds(
    AclBinding,
    resource_type=st.sampled_from([ResourceType.TOPIC, ResourceType.CLUSTER]),
    resource_name=st.sampled_from(["a", "b", "a.", "*", "kafka-cluster"]),
    pattern_type=st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    principal=st.sampled_from([*PRINCIPALS, "User:*"]),
    host=st.sampled_from(["*", "127.0.0.1", "10.0.0.1"]),
    operation=st.sampled_from(OPERATIONS),
    permission=st.sampled_from([AclPermissionType.ALLOW, AclPermissionType.DENY]),
)

steps = st.one_of(
    st.tuples(st.just("create"), NAMES, st.integers(1, 40)),
    st.tuples(st.just("delete"), NAMES),
    st.tuples(st.just("grow"), NAMES, st.integers(1, 30)),
    st.tuples(st.just("acl+"), acls),
    st.tuples(st.just("acl-"), st.integers(0, 10)),
    st.tuples(
        st.just("metadata"),
        st.integers(0, 13),
        st.none() | st.lists(NAMES | st.integers(0, 5), max_size=5),  # ints: a topic id (an existing one's, or not)
        st.booleans(),  # allow auto-creation
        st.booleans(),  # include topic authorized operations
        st.booleans(),  # include cluster authorized operations
        st.sampled_from(PRINCIPALS),
    ),
    st.tuples(
        st.just("describe"),
        st.none() | st.lists(NAMES, max_size=5),
        st.integers(-1, 50),  # the partition limit
        st.none() | st.tuples(NAMES, st.integers(-1, 45)),  # the cursor
        st.sampled_from(PRINCIPALS),
    ),
)


def context(api_key: int, version: int, principal: str) -> RequestContext:
    return RequestContext(api_key, version, 1, "test", "127.0.0.1", 1, principal=principal)


def encoded(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def answer(coro: Any) -> Any:
    return asyncio.run(coro)


def metadata_request(broker: Broker, step: tuple[Any, ...]) -> tuple[RequestContext, Any]:
    _, version, asked, auto, topic_ops, cluster_ops, principal = step
    mod = request_module("metadata", version)
    topics = None
    if asked is not None:
        ids = [info.topic_id for info in broker.topic_store.topics().values()] + [uuid.UUID(int=7)]
        topics = tuple(
            build(mod, "MetadataRequestTopic", name=None, topic_id=ids[item % len(ids)])
            if isinstance(item, int)
            else build(mod, "MetadataRequestTopic", name=item, topic_id=None)
            for item in asked
        )
    request = build(
        mod,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=auto,
        include_cluster_authorized_operations=cluster_ops,
        include_topic_authorized_operations=topic_ops,
    )
    return context(3, version, principal), request


def describe_request(step: tuple[Any, ...]) -> tuple[RequestContext, Any]:
    _, asked, limit, cursor, principal = step
    request = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=TopicName(n)) for n in asked or ()),
        response_partition_limit=i32(limit),
        cursor=None if cursor is None else Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])),
    )
    return context(75, 0, principal), request


def run(broker: Broker, step: tuple[Any, ...], added: list[AclBinding]) -> None:
    store, authorizer = broker.topic_store, broker.authorizer
    kind = step[0]
    if kind == "create":
        with contextlib.suppress(ValueError):  # an illegal, colliding or existing name: nothing changed
            store.create_topic(step[1], step[2])
    elif kind == "delete":
        store.delete_topic(step[1])
    elif kind == "grow":
        info = store.topic(step[1])
        if info is not None:
            store.add_partitions(info.name, info.partitions + step[2])
    elif kind == "acl+" and authorizer is not None and validate_binding(step[1]) is None:
        authorizer.add([step[1]])
        added.append(step[1])
    elif kind == "acl-" and authorizer is not None and added:
        authorizer.discard([added.pop(step[1] % len(added))])
    elif kind == "metadata":
        ctx, request = metadata_request(broker, step)
        fast = answer(handle_metadata(broker, ctx, request))  # (auto-creates first: the reference finds it)
        assert isinstance(fast, PreEncoded)
        reference = reference_metadata(broker, ctx, request)
        assert fast.response_class is type(reference)
        assert fast.body == encoded(reference), (fast.decode(), reference)
    elif kind == "describe":
        ctx, request = describe_request(step)
        try:
            reference = reference_describe_topic_partitions(broker, ctx, request)
        except ApiError as refused:
            try:
                answer(handle_describe_topic_partitions(broker, ctx, request))
            except ApiError as also:
                assert also.code == refused.code
            else:
                raise AssertionError("the handler answered a request the reference refuses") from None
            return
        fast = answer(handle_describe_topic_partitions(broker, ctx, request))
        assert isinstance(fast, PreEncoded)
        assert fast.body == encoded(reference), (fast.decode(), reference)


@settings(max_examples=120, deadline=None)
@given(
    with_authorizer=st.booleans(),
    allow_if_no_acl=st.booleans(),
    initial=st.dictionaries(NAMES, st.integers(1, 40), max_size=6),
    sequence=st.lists(steps, min_size=1, max_size=25),
)
def test_cached_answers_are_the_straightforward_ones(
    with_authorizer: bool, allow_if_no_acl: bool, initial: dict[str, int], sequence: list[tuple[Any, ...]]
) -> None:
    authorizer = Authorizer(frozenset(), allow_if_no_acl) if with_authorizer else None
    with tempfile.TemporaryDirectory() as tmp, TopicStore.open(Path(tmp), fsync=FsyncPolicy.NEVER) as store:
        broker = Broker(store, authorizer)
        for name, count in initial.items():
            run(broker, ("create", name, count), [])
        added: list[AclBinding] = []
        for step in sequence:
            run(broker, step, added)
        # and once more every version's all-topics answer, with and without authorized operations
        for version in range(14):
            for topic_ops in (False, True):
                run(broker, ("metadata", version, None, False, topic_ops, topic_ops, PRINCIPALS[0]), added)


def test_a_topic_past_the_partition_run_is_encoded_whole(tmp_path: Path) -> None:
    """The shared run of encoded partitions grows on demand (a topic of 10,000 partitions after small ones)."""
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.NEVER) as store:
        broker = Broker(store, None)
        store.create_topic("small", 3)
        run(broker, ("metadata", 12, None, False, False, False, PRINCIPALS[0]), [])
        store.create_topic("big", 10_000)
        for version in (0, 9, 12, 13):
            run(broker, ("metadata", version, None, False, False, False, PRINCIPALS[0]), [])
            run(broker, ("metadata", version, ["big"], False, True, False, PRINCIPALS[0]), [])
        run(broker, ("describe", None, 2000, ("big", 9_000), PRINCIPALS[0]), [])


def test_an_acl_change_changes_the_remembered_all_topics_answer(tmp_path: Path) -> None:
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.NEVER) as store:
        broker = Broker(store, Authorizer(frozenset(), True))
        for name in ("a", "b", "c"):
            store.create_topic(name, 2)
        ctx, request = metadata_request(broker, ("metadata", 12, None, False, True, False, "User:alice"))

        def described() -> list[tuple[str, int]]:
            response = answer(handle_metadata(broker, ctx, request)).decode()
            return [(t.name, t.topic_authorized_operations) for t in response.topics]

        everything = described()
        assert [name for name, _ in everything] == ["a", "b", "c"]
        deny = AclBinding(ResourceType.TOPIC, "b", PatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE,
                          AclPermissionType.DENY)  # fmt: skip
        broker.authorizer.add([deny])  # type: ignore[union-attr]
        assert [name for name, _ in described()] == ["a", "c"]
        read = AclBinding(ResourceType.TOPIC, "c", PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                          AclPermissionType.ALLOW)  # fmt: skip
        broker.authorizer.add([read])  # type: ignore[union-attr]
        assert described() == [("a", everything[0][1]), ("c", 1 << 3 | 1 << 8)]  # READ implies DESCRIBE
        broker.authorizer.discard([deny, read])  # type: ignore[union-attr]
        assert described() == everything


def test_a_large_authorized_all_topics_answer_yields_and_a_change_meanwhile_is_not_served_again(
    tmp_path: Path,
) -> None:
    """With an authorizer, an all-topics answer over more than ``AUTHORIZED_TOPICS_PER_TURN`` topics gives the
    loop turns while it authorizes them, and equals the straightforward answer. An ACL changed during one of
    those turns is answered as each topic was when reached, and that answer is not served again: the next
    request sees the change everywhere."""
    per_turn = topics_handlers.AUTHORIZED_TOPICS_PER_TURN
    with TopicStore.open(tmp_path, fsync=FsyncPolicy.NEVER) as store:
        broker = Broker(store, Authorizer(frozenset(), True))
        names = [f"t{i:04d}" for i in range(3 * per_turn)]
        for name in names:
            store.create_topic(name, 1)
        step = ("metadata", 12, None, False, True, False, "User:alice")
        ctx, request = metadata_request(broker, step)
        first = names[0]
        deny = AclBinding(ResourceType.TOPIC, first, PatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE,
                          AclPermissionType.DENY)  # fmt: skip

        async def during() -> tuple[list[str], int]:
            turns = 0

            async def change() -> None:  # (runs at the answer's first yield, then counts the later ones)
                nonlocal turns
                broker.authorizer.add([deny])  # type: ignore[union-attr]
                while True:
                    await asyncio.sleep(0)
                    turns += 1

            changer = asyncio.get_running_loop().create_task(change())
            try:
                response = (await handle_metadata(broker, ctx, request)).decode()
            finally:
                changer.cancel()
            return [t.name for t in response.topics], turns

        listed, turns = answer(during())
        assert turns >= 1  # (the answer gave the loop two turns at least)
        assert listed == names  # (the DENY came after the first topic was reached)
        after = answer(handle_metadata(broker, ctx, request)).decode()
        assert [t.name for t in after.topics] == names[1:]  # (made again: the answer before was not remembered)
        broker.authorizer.discard([deny])  # type: ignore[union-attr]
        run(broker, step, [])  # (the straightforward answer, once the ACLs are back)
