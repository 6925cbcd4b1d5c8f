"""Each library's admin API against ``regroup serve``: list and describe consumer groups (state, protocol,
members with client id and host, member assignments decoded from the embedded protocol bytes), the
group's committed offsets and the topic's log offsets — while two members of that library own the group
(Stable), and again after they left (Empty, no members, offsets kept). Where the library can, an admin
commit is refused while the group has members and accepted once it is Empty, and deleting the group removes
it and its offsets.

* kafka-python: ``KafkaAdminClient.list_groups`` (also with a state filter), ``describe_groups``,
  ``list_group_offsets``, ``list_partition_offsets``;
* aiokafka: ``AIOKafkaAdminClient.list_consumer_groups`` (no states), ``describe_consumer_groups`` (the raw
  response; assignments decoded with ``ConsumerProtocolMemberAssignment``), ``list_consumer_group_offsets``;
  log offsets from ``AIOKafkaConsumer.beginning_offsets``/``end_offsets`` (the admin client has none);
* confluent-kafka: ``AdminClient.list_consumer_groups`` (also with a state filter),
  ``describe_consumer_groups``, ``list_consumer_group_offsets``, ``list_offsets`` (earliest and latest).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from tests.clients.harness import (
    CLIENTS,
    MODULES,
    Inspector,
    Ledger,
    Member,
    batch,
    members_stopped_at_exit,
    produce,
)
from tests.server.conftest import ServerProcess

PARTITIONS = 4
RECORDS = 40
TOPIC = "audited"


@dataclass(frozen=True)
class AdminView:
    listed: str  # the group's state in the group listing ("" when the listing has no state)
    state: str
    protocol: str
    #: client id → (client host, partitions of TOPIC assigned)
    members: dict[str, tuple[str, frozenset[int]]]
    committed: dict[int, int]
    log_start: dict[int, int]
    log_end: dict[int, int]


def kafka_python_view(bootstrap: str, group: str) -> AdminView:
    from kafka import KafkaAdminClient
    from kafka.protocol.consumer.offsets import OffsetSpec
    from kafka.structs import TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        state = listed[group]["group_state"]
        assert listed[group]["protocol_type"] == "consumer"
        assert state in ("Stable", "Empty"), state
        filtered = {g["group_id"] for g in admin.list_groups(states_filter=[state])}  # ListGroups v4+ filter
        assert group in filtered
        other = "Empty" if state == "Stable" else "Stable"
        assert group not in {g["group_id"] for g in admin.list_groups(states_filter=[other])}
        described = admin.describe_groups([group])[group]
        assert described["error"] is None
        members = {}
        for m in described["members"]:
            assignment = m["member_assignment"]["assigned_partitions"]
            partitions = frozenset(p for t in assignment if t["topic"] == TOPIC for p in t["partitions"])
            members[m["client_id"]] = (m["client_host"], partitions)
        offsets = admin.list_group_offsets(group)[group]
        committed = {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == TOPIC}
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        start = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
        end = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
        return AdminView(
            listed=state,
            state=described["group_state"],
            protocol=described["protocol_data"],
            members=members,
            committed=committed,
            log_start={tp.partition: o.offset for tp, o in start.items()},
            log_end={tp.partition: o.offset for tp, o in end.items()},
        )
    finally:
        admin.close()


def aiokafka_view(bootstrap: str, group: str) -> AdminView:
    async def view() -> AdminView:
        import aiokafka
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment
        from aiokafka.structs import TopicPartition

        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
        await admin.start()
        try:
            listed = dict(await admin.list_consumer_groups())  # (group id, protocol type); no state
            assert listed[group] == "consumer"
            (response,) = await admin.describe_consumer_groups([group])
            ((error, group_id, state, protocol_type, protocol, raw_members),) = response.groups
            assert (error, group_id) == (0, group)
            assert protocol_type in ("consumer", "")  # Kafka keeps the type of an Empty group; so does regroup
            members = {}
            for _member_id, client_id, client_host, _metadata, raw_assignment in raw_members:
                assignment = ConsumerProtocolMemberAssignment.decode(raw_assignment)
                partitions = frozenset(tp.partition for tp in assignment.partitions() if tp.topic == TOPIC)
                members[client_id] = (client_host, partitions)
            offsets = await admin.list_consumer_group_offsets(group)
            committed = {tp.partition: om.offset for tp, om in offsets.items() if tp.topic == TOPIC}
        finally:
            await admin.close()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await consumer.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            start = await consumer.beginning_offsets(tps)
            end = await consumer.end_offsets(tps)
        finally:
            await consumer.stop()
        return AdminView(
            listed="",
            state=state,
            protocol=protocol,
            members=members,
            committed=committed,
            log_start={tp.partition: o for tp, o in start.items()},
            log_end={tp.partition: o for tp, o in end.items()},
        )

    return asyncio.run(view())


def confluent_view(bootstrap: str, group: str) -> AdminView:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    def name(state: Any) -> str:  # ConsumerGroupState.STABLE → "Stable"
        return str(state.name).capitalize()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = {g.group_id: g for g in admin.list_consumer_groups(request_timeout=10).result(15).valid}
    listing = listed[group]
    assert not listing.is_simple_consumer_group
    same_state = admin.list_consumer_groups(states={listing.state}, request_timeout=10).result(15).valid
    assert group in {g.group_id for g in same_state}
    other = ConsumerGroupState.EMPTY if listing.state == ConsumerGroupState.STABLE else ConsumerGroupState.STABLE
    assert group not in {g.group_id for g in admin.list_consumer_groups(states={other}).result(15).valid}
    described = admin.describe_consumer_groups([group], request_timeout=10)[group].result(15)
    assert not described.is_simple_consumer_group
    members = {
        m.client_id: (m.host, frozenset(tp.partition for tp in m.assignment.topic_partitions if tp.topic == TOPIC))
        for m in described.members
    }
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(15)
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions if tp.topic == TOPIC}
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]

    def log_offsets(spec: Any) -> dict[int, int]:
        futures = admin.list_offsets({tp: spec for tp in tps}, request_timeout=10)
        return {tp.partition: f.result(15).offset for tp, f in futures.items()}

    return AdminView(
        listed=name(listing.state),
        state=name(described.state),
        protocol=described.partition_assignor,
        members=members,
        committed=committed,
        log_start=log_offsets(OffsetSpec.earliest()),
        log_end=log_offsets(OffsetSpec.latest()),
    )


VIEWS = {"kafka-python": kafka_python_view, "aiokafka": aiokafka_view, "confluent-kafka": confluent_view}


def kafka_python_alter(bootstrap: str, group: str, partition: int, offset: int) -> str:
    """Commit an offset as an admin (no member id, no generation); the partition's error name or "NONE"."""
    from kafka import KafkaAdminClient
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        tp = TopicPartition(TOPIC, partition)
        (error,) = admin.alter_group_offsets(group, {tp: OffsetAndMetadata(offset, "", -1)}).values()
        return "NONE" if error is NoError else str(error.__name__)
    finally:
        admin.close()


def kafka_python_delete(bootstrap: str, group: str) -> str:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        return str(admin.delete_groups([group])[group])
    finally:
        admin.close()


def confluent_alter(bootstrap: str, group: str, partition: int, offset: int) -> str:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, partition, offset)])
    (tp,) = admin.alter_consumer_group_offsets([request])[group].result(15).topic_partitions
    return "NONE" if tp.error is None else str(tp.error.name())


def confluent_delete(bootstrap: str, group: str) -> str:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_consumer_groups([group], request_timeout=10)[group].result(15)  # raises on an error
    return "OK"


#: commit offsets as an admin and delete groups (OffsetCommit without a member, DeleteGroups); aiokafka's admin
#: client has neither
ALTER = {"kafka-python": kafka_python_alter, "confluent-kafka": confluent_alter}
DELETE = {"kafka-python": kafka_python_delete, "confluent-kafka": confluent_delete}
UNKNOWN_MEMBER = {"kafka-python": "UnknownMemberIdError", "confluent-kafka": "UNKNOWN_MEMBER_ID"}


@pytest.mark.parametrize("client", CLIENTS)
def test_admin_lists_and_describes_groups_and_offsets(server: ServerProcess, client: str) -> None:
    pytest.importorskip(MODULES[client])
    bootstrap = f"127.0.0.1:{server.port}"
    group = f"audit-{client}"
    inspector = Inspector(bootstrap, TOPIC, PARTITIONS)
    inspector.create_topic()
    produce(client, bootstrap, TOPIC, batch("a", RECORDS, PARTITIONS))
    ledger = Ledger()
    members = [
        Member(ledger, client, f"{client}-{i}", bootstrap=bootstrap, topic=TOPIC, group=group, strategy="range")
        for i in (1, 2)
    ]
    starts = dict.fromkeys(range(PARTITIONS), 0)
    ends = dict.fromkeys(range(PARTITIONS), RECORDS // PARTITIONS)
    with members_stopped_at_exit(members):
        for m in members:
            m.start()
        stable = inspector.wait_stable(group, members)
        inspector.wait_committed_to_end(group)
        view = VIEWS[client](bootstrap, group)
        expected_members = {name: ("/127.0.0.1", owned) for name, owned in stable.assignments.items()}
        listed = "" if client == "aiokafka" else "Stable"
        assert view == AdminView(listed, "Stable", "range", expected_members, ends, starts, ends)
        assert {owned for _, owned in view.members.values()} == {frozenset({0, 1}), frozenset({2, 3})}  # range
        if client in ALTER:  # an admin commit while the group has members is refused (Kafka: UNKNOWN_MEMBER_ID)
            assert ALTER[client](bootstrap, group, 0, 3) == UNKNOWN_MEMBER[client]
        for m in members:
            m.stop()  # LeaveGroup
    view = VIEWS[client](bootstrap, group)
    listed = "" if client == "aiokafka" else "Empty"
    assert view == AdminView(listed, "Empty", "", {}, ends, starts, ends)
    if client not in ALTER:
        return
    assert ALTER[client](bootstrap, group, 0, 3) == "NONE"  # Empty: the admin may move the group's offsets
    assert VIEWS[client](bootstrap, group).committed == {**ends, 0: 3}
    assert DELETE[client](bootstrap, group) == "OK"
    gone = Inspector(bootstrap, TOPIC, PARTITIONS)
    assert (gone.group(group).state, gone.committed(group)) == ("Dead", {})  # offsets deleted with the group
