"""DescribeConfigs answers put together from kept configs arrays (``server/config_answers.py``) are byte for byte
kio's encoding of the straightforward entity (one kio entity per described entry), for every served version,
both ``include_`` flags, random topic and group overrides, key filters, refused resources and answers of more
than a chunk of resources; the kept arrays follow every change of overrides, and a large answer yields the loop."""

from __future__ import annotations

import asyncio
import contextlib
import io
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from regroup.coordinator.config import CoordinatorConfig
from regroup.server.api import RequestContext
from regroup.server.config_answers import RESOURCES_PER_CHUNK, ConfigArrays
from regroup.server.config_view import Described, describe_topic
from regroup.server.encoded import PreEncoded
from regroup.server.group_configs import GroupConfigStore
from regroup.server.handlers import configs
from regroup.server.handlers.topics import NO_THROTTLE, build, response_module
from regroup.server.topics import TopicStore
from regroup.storage.record_log import FsyncPolicy
from regroup.storage.topic_config import BrokerLogDefaults
from tests.server_data.helpers import counting_turns, request_module

DESCRIBE_CONFIGS = 32
TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
OVERRIDES = st.dictionaries(
    st.sampled_from(["retention.ms", "cleanup.policy", "segment.bytes", "max.message.bytes"]),
    st.sampled_from(["1", "3600000", "compact", "delete", "1048576"]),
    max_size=3,
).map(lambda d: {k: v for k, v in d.items() if (k == "cleanup.policy") == (v in ("compact", "delete"))})
GROUP_OVERRIDES = st.dictionaries(
    st.sampled_from(["consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"]),
    st.sampled_from(["45000", "50000", "5000", "6000"]),
    max_size=2,
).map(lambda d: {k: v for k, v in d.items() if (k == "consumer.session.timeout.ms") == (int(v) >= 45000)})
KEYS = st.none() | st.lists(
    st.sampled_from(["retention.ms", "cleanup.policy", "nope", "consumer.session.timeout.ms", "log.dirs"]),
    max_size=3,
)


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


class Broker:
    """What the DescribeConfigs handler reads of the broker: the topic store, the groups' settings, no ACLs."""

    authorizer = None

    def __init__(self, store: TopicStore, groups: GroupConfigStore) -> None:
        self.topic_store = store
        self.group_configs = groups


def _straightforward_entry(mod: Any, d: Described, synonyms: bool, docs: bool) -> Any:
    return build(
        mod,
        "DescribeConfigsResourceResult",
        name=d.name,
        value=d.value,
        read_only=d.read_only,
        config_source=d.source,
        is_sensitive=d.sensitive,
        synonyms=tuple(build(mod, "DescribeConfigsSynonym", name=n, value=v, source=s) for n, v, s in d.synonyms)
        if synonyms
        else (),
        config_type=d.type,
        documentation=d.doc if docs else None,
    )


def reference(broker: Broker, request: Any) -> bytes:
    """The straightforward answer: every entry a kio entity, the response encoded by kio in one go (the
    resources' checks are the handler's own)."""
    mod = response_module(request)
    synonyms, docs = request.include_synonyms, getattr(request, "include_documentation", False)
    store = broker.topic_store
    results = []
    for resource in request.resources:
        keys = tuple(resource.configuration_keys) if resource.configuration_keys else None
        code, message, described = ErrorCode.none, None, []
        try:
            _, describe = configs._describer(store, broker, resource.resource_type, resource.resource_name, keys)
            described = describe()
        except configs._Refused as refused:
            code, message = refused.code, str(refused)
        results.append(
            build(
                mod,
                "DescribeConfigsResult",
                error_code=code,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=tuple(_straightforward_entry(mod, d, synonyms, docs) for d in described),
            )
        )
    return encode(build(mod, "DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=tuple(results)))


@contextlib.contextmanager
def topics_of_one_partition(n: int) -> Iterator[tuple[TopicStore, Broker]]:
    """A topic store of ``n`` topics of one partition (``t0``...), and the broker the handlers see over it."""
    with tempfile.TemporaryDirectory() as tmp:
        store = TopicStore.open(Path(tmp) / "topics", fsync=FsyncPolicy.NEVER)
        try:
            for i in range(n):
                store.create_topic(f"t{i}", 1)
            yield store, Broker(store, GroupConfigStore(Path(tmp) / "g.json", CoordinatorConfig(), sync=False))
        finally:
            store.close()


def describe_request(version: int, resources: list[tuple[int, str, list[str] | None]], flags: tuple[bool, bool]) -> Any:
    mod = request_module("describe_configs", version)
    return build(
        mod,
        "DescribeConfigsRequest",
        resources=tuple(
            build(mod, "DescribeConfigsResource", resource_type=t, resource_name=n, configuration_keys=keys)
            for t, n, keys in resources
        ),
        include_synonyms=flags[0],
        include_documentation=flags[1],
    )


def answer(broker: Broker, request: Any, version: int) -> PreEncoded:
    ctx = RequestContext(DESCRIBE_CONFIGS, version, 1, "test", "127.0.0.1", 1)
    response = asyncio.run(configs.handle_describe_configs(broker, ctx, request))
    assert isinstance(response, PreEncoded)
    return response


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, str]], list[Any], int, Any]:
    topics = {f"t{i}": draw(OVERRIDES) for i in range(draw(st.integers(0, 4)))}
    groups = {f"g{i}": draw(GROUP_OVERRIDES) for i in range(draw(st.integers(0, 2)))}
    named = st.sampled_from(
        [(TOPIC, t) for t in topics]
        + [(GROUP, g) for g in groups]
        + [(TOPIC, "missing"), (TOPIC, ""), (TOPIC, "bad/name"), (GROUP, "fresh"), (GROUP, "")]
        + [(BROKER, "0"), (BROKER, ""), (BROKER, "7"), (BROKER_LOGGER, "0"), (16, "x")]
    )
    count = draw(st.sampled_from([0, 1, 3, 7, RESOURCES_PER_CHUNK + 3]))
    resources = [(*draw(named), draw(KEYS)) for _ in range(count)]
    return topics, groups, resources, draw(st.integers(1, 4)), draw(st.tuples(st.booleans(), st.booleans()))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_describe_configs_answer_is_kios_encoding_of_the_straightforward_answer(case: Any) -> None:
    topics, groups, resources, version, flags = case
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as m:
        # the process's loggers (BROKER_LOGGER) as fixed levels: a logger made between the answer and the
        # reference (a module imported on first use) would otherwise show in one and not the other
        m.setattr(configs, "logger_levels", lambda: {"regroup": "INFO", "regroup.server": "DEBUG"})
        store = TopicStore.open(Path(tmp) / "topics", fsync=FsyncPolicy.NEVER)
        group_store = GroupConfigStore(Path(tmp) / "groups.json", CoordinatorConfig(), sync=False)
        try:
            for name, overrides in topics.items():
                store.create_topic(name, 1, overrides)
            for name, overrides in groups.items():
                asyncio.run(_written(lambda name=name, overrides=overrides: group_store.write(name, overrides)))
            broker = Broker(store, group_store)
            request = describe_request(version, resources, flags)
            first = answer(broker, request, version)
            assert first.body == reference(broker, request)
            assert answer(broker, request, version).body == first.body  # (from the kept arrays now)
            if topics:  # a change of overrides is answered at once
                name = next(iter(topics))
                asyncio.run(_written(lambda: store.write_topic_configs(name, {"retention.ms": "12345"})))
                assert answer(broker, request, version).body == reference(broker, request)
        finally:
            store.close()


async def _written(write: Any) -> None:
    """Await the write a store starts (inside a running loop, as the alteration handler does)."""
    done = write()
    assert done is not None
    await done


def test_topics_without_overrides_share_one_kept_array() -> None:
    arrays = ConfigArrays()
    mod = response_module(describe_request(4, [], (True, True)))
    calls: list[int] = []
    defaults = BrokerLogDefaults()

    def describe() -> list[Described]:
        calls.append(1)
        return describe_topic(defaults, {}, None)

    key = (TOPIC, None, (), defaults)
    first = arrays.items(mod, True, True, key, describe)
    assert arrays.items(mod, True, True, key, describe) is first
    assert len(calls) == 1 and first[0] == len(describe_topic(defaults, {}, None))
    arrays.items(mod, False, True, key, describe)  # other flags: other bytes
    arrays.items(mod, True, True, None, describe)  # no key: never kept
    assert len(calls) == 3 and len(arrays) == 2


def test_kept_arrays_are_bounded() -> None:
    arrays = ConfigArrays(capacity=3)
    mod = response_module(describe_request(3, [], (False, False)))
    defaults = BrokerLogDefaults()
    for i in range(10):
        overrides = {"retention.ms": str(i)}
        arrays.items(mod, False, False, (TOPIC, None, tuple(overrides.items()), defaults), lambda: [])
    assert len(arrays) == 3
    with pytest.raises(ValueError):
        ConfigArrays(capacity=0)


def test_an_answer_of_many_topics_yields_the_loop_between_chunks() -> None:
    n = 3 * RESOURCES_PER_CHUNK + 1
    with topics_of_one_partition(n) as (_, broker):
        request = describe_request(4, [(TOPIC, f"t{i}", None) for i in range(n)], (True, True))
        ctx = RequestContext(DESCRIBE_CONFIGS, 4, 1, "test", "127.0.0.1", 1)
        response, turns = asyncio.run(counting_turns(configs.handle_describe_configs(broker, ctx, request)))
        assert isinstance(response, PreEncoded)
        assert turns >= 3
        assert response.body == reference(broker, request)


def test_an_alteration_of_many_topics_yields_the_loop_and_applies_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each resource is stored and applied before the next; past ``ALTER_SLICE_S`` the loop gets a turn (here
    after every resource): every topic altered, in one answer, over as many turns."""
    monkeypatch.setattr(configs, "ALTER_SLICE_S", 0.0)
    n = 25
    with topics_of_one_partition(n) as (store, broker):
        mod = request_module("incremental_alter_configs", 1)
        request = mod.IncrementalAlterConfigsRequest(
            resources=tuple(
                mod.AlterConfigsResource(
                    resource_type=TOPIC,
                    resource_name=f"t{i}",
                    configs=(mod.AlterableConfig(name="retention.ms", config_operation=0, value=str(1000 + i)),),
                )
                for i in range(n)
            ),
            validate_only=False,
        )
        ctx = RequestContext(44, 1, 1, "test", "127.0.0.1", 1)
        coro = configs.handle_incremental_alter_configs(broker, ctx, request)
        response, turns = asyncio.run(counting_turns(coro))
        assert turns >= n - 1
        assert [r.error_code for r in response.responses] == [ErrorCode.none] * n
        assert [store.configs.overrides(f"t{i}") for i in range(n)] == [
            {"retention.ms": str(1000 + i)} for i in range(n)
        ]
