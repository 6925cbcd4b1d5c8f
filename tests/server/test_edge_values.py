"""Well-formed requests with extreme values get a well-formed answer: for each group and data API, hypothesis
draws a version the server advertises and a request of that version with edge values in every field (empty
and very long strings, nulls wherever the schema allows them, minimum and maximum integers for ids,
generations, epochs, partitions, timeouts and offsets, empty, large and duplicated arrays). The server must
answer it with a response of that version that kio decodes to the last byte, on a connection that stays
open, without logging an error; and keep serving a healthy client.

Kept short in ``make test`` (``REGROUP_EDGE_EXAMPLES`` examples per API, 20 by default); ``make fuzz`` runs
many more. Values are free except where a wait is the documented answer: a Fetch waits up to its
``max_wait`` for data (here at most 100 ms), and group ids are made unique per example, so that a JoinGroup
never waits for the members of an earlier example's group to rejoin."""

from __future__ import annotations

import datetime
import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from regroup.server.dispatch import api_name
from tests.server.conftest import ServerProcess
from tests.server.fuzz.schema import served_versions
from tests.server.fuzz.seeds import encode_frame
from tests.server.fuzz.values import Chooser, edge_int, edge_text, entity_strategy
from tests.server.fuzz.watch import LogWatcher
from tests.server.wire import API_VERSIONS, CREATE_TOPICS, HEARTBEAT, WireClient

GROUP_APIS = (11, 14, 12, 13, 8, 9, 15, 16, 42, 68, 69, 10)
DATA_APIS = (3, 19, 20, 0, 1, 2, 22)
TOPIC_ADMIN_APIS = (37, 60, 75)  # CreatePartitions, DescribeCluster, DescribeTopicPartitions
PRODUCE = 0
VERSIONS_V0 = load_request_schema(API_VERSIONS, 0)
EXAMPLES = int(os.environ.get("REGROUP_EDGE_EXAMPLES", "20"))

_unique = itertools.count()


def unique_group(chooser: Chooser) -> str:
    """An edge-value group id made unique (the empty id stays empty: every API refuses or ignores it)."""
    text = edge_text(chooser)
    return text and f"{text}#{next(_unique)}"


OVERRIDES: dict[str, Any] = {
    "group_id": unique_group,
    "max_wait": lambda c: datetime.timedelta(milliseconds=edge_int(c, -(2**31), 100)),
    # the partitions a CreateTopics asks for become directories: the extremes, not two billion of them
    "num_partitions": lambda c: c.pick((-(2**31), -2, -1, 0, 1, 2, 100)),
    "count": lambda c: c.pick((-(2**31), -1, 0, 1, 2, 3, 100, 2**31 - 1)),  # CreatePartitions' new count
}


def versions_of(api_key: int) -> list[int]:
    low, high = served_versions()[api_key]
    return list(range(low, high + 1))


def read_response(client: WireClient, api_key: int, version: int, correlation_id: int) -> Any:
    frame = client.read_frame()
    response_cls = load_response_schema(api_key, version)
    header, used = entity_reader(response_cls.__header_schema__)(frame, 0)
    assert header.correlation_id == correlation_id
    body, size = entity_reader(response_cls)(frame, used)
    assert used + size == len(frame), f"{len(frame) - used - size} bytes after the response body"
    return body


ALL_APIS = GROUP_APIS + DATA_APIS + TOPIC_ADMIN_APIS


@pytest.mark.parametrize("api_key", ALL_APIS, ids=[api_name(k) for k in ALL_APIS])
def test_extreme_values_get_a_well_formed_answer(server: ServerProcess, api_key: int) -> None:
    log = LogWatcher(server.log_path)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(st.data())
    def check(data: st.DataObject) -> None:
        version = data.draw(st.sampled_from(versions_of(api_key)), label="version")
        cls = load_request_schema(api_key, version)
        body = data.draw(entity_strategy(cls, edge=True, overrides=OVERRIDES), label="request")
        with WireClient(server.port, timeout=10.0) as client:
            client.send_raw(encode_frame(cls, body, 1, "edge-values"))
            silent = api_key == PRODUCE and body.acks == 0  # Kafka sends nothing back to acks=0
            client.send_raw(encode_frame(VERSIONS_V0, VERSIONS_V0(), 2))
            try:
                if not silent:
                    read_response(client, api_key, version, 1)
                assert read_response(client, API_VERSIONS, 0, 2).error_code == 0
            except (TimeoutError, ConnectionError) as exc:
                raise AssertionError(f"no answer: {exc}; server log:\n{server.log()[-3000:]}") from exc
        logged = [f"{r.level} {r.message}\n" + "\n".join(r.rest) for r in log.new_records() if r.is_finding]
        assert not logged, "\n".join(logged)[-3000:]

    check()
    with WireClient(server.port) as good:
        assert good.call(API_VERSIONS, 2).error_code == 0
        assert good.call(HEARTBEAT, 4, group_id="nobody", generation_id=1, member_id="m").error_code == 25


POLICY_VIOLATION = 44


@pytest.mark.parametrize("counts", [(10_001,), (5_000, 5_001)], ids=["one topic", "two topics"])
def test_create_topics_past_kafkas_partition_cap_is_refused(server: ServerProcess, counts: tuple[int, ...]) -> None:
    """Kafka refuses a CreateTopics whose topics add up to more than 10,000 partitions (POLICY_VIOLATION for
    every topic, validate-only or not) instead of creating them: each partition costs a directory and an
    open file."""
    topics = [
        {"name": f"cap-{len(counts)}-{i}", "num_partitions": n, "replication_factor": 1, "assignments": []}
        for i, n in enumerate(counts)
    ]
    with WireClient(server.port) as client:
        topics = [{**t, "configs": []} for t in topics]
        created = client.call(CREATE_TOPICS, 7, topics=topics, timeout=5000, validate_only=True)
        assert [t.error_code for t in created.topics] == [POLICY_VIOLATION] * len(counts)
