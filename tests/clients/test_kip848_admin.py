"""confluent-kafka's AdminClient on a KIP-848 consumer group: ``list_consumer_groups`` filtered by type, and
``describe_consumer_groups`` (librdkafka sends ConsumerGroupDescribe and falls back to DescribeGroups when
the group is not a consumer group) with the group's type, state, assignor, members, their current and
target assignments, and the authorized operations when asked for."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.harness import Inspector
from tests.clients.kip848 import Book, Owner, stopped_at_exit, wait_settled
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(90)

PARTITIONS = 4


def partitions_of(assignment: Any, topic: str) -> frozenset[int]:
    return frozenset(tp.partition for tp in assignment.topic_partitions if tp.topic == topic)


def test_admin_lists_and_describes_consumer_and_classic_groups(kip848_server: ServerProcess) -> None:
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AclOperation, AdminClient

    port, topic = kip848_server.port, "kip848-admin"
    bootstrap = f"127.0.0.1:{port}"
    Inspector(bootstrap, topic, PARTITIONS).create_topic()
    book = Book()
    consumers = [Owner(book, bootstrap, topic, "admin-new", name, assignor="range") for name in ("n1", "n2")]
    classic = [Owner(book, bootstrap, topic, "admin-old", "o1", protocol="classic")]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    with stopped_at_exit(consumers + classic):
        for m in consumers + classic:
            m.start()
        wait_settled(port, "admin-new", topic, PARTITIONS, consumers)
        wait_settled(port, "admin-old", topic, PARTITIONS, classic)

        listed = admin.list_consumer_groups(request_timeout=10).result()
        types = {g.group_id: g.type for g in listed.valid}
        assert types["admin-new"] == ConsumerGroupType.CONSUMER and types["admin-old"] == ConsumerGroupType.CLASSIC
        only_new = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}, request_timeout=10).result()
        assert {g.group_id for g in only_new.valid} == {"admin-new"}

        futures = admin.describe_consumer_groups(
            ["admin-new", "admin-old"], include_authorized_operations=True, request_timeout=10
        )
        new, old = futures["admin-new"].result(), futures["admin-old"].result()

        assert (new.type, new.state, new.partition_assignor) == (
            ConsumerGroupType.CONSUMER,
            ConsumerGroupState.STABLE,
            "range",
        )
        assert not new.is_simple_consumer_group
        by_client = {m.client_id: m for m in new.members}
        assert set(by_client) == {"n1", "n2"}
        for m in consumers:
            described = by_client[m.member]
            assert described.host == "/127.0.0.1" and described.member_id
            assert partitions_of(described.assignment, topic) == m.owned
            assert partitions_of(described.target_assignment, topic) == m.owned
        assert set(new.authorized_operations or []) == {
            AclOperation.READ,
            AclOperation.DELETE,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }

        assert (old.type, old.state, old.partition_assignor) == (
            ConsumerGroupType.CLASSIC,
            ConsumerGroupState.STABLE,
            "cooperative-sticky",
        )
        (member,) = old.members
        assert member.client_id == "o1" and partitions_of(member.assignment, topic) == frozenset(range(PARTITIONS))
