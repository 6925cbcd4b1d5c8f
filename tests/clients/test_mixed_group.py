"""One consumer group made of different client libraries — kafka-python, confluent-kafka (librdkafka) and
aiokafka members — with a strategy they all ship (range or roundrobin). Whoever is elected leader computes
the assignment for everyone from the others' subscriptions, so this also checks that the server passes
each library's embedded-protocol bytes through untouched. Once the group is stable every partition is read
by exactly one member, the one the server says owns it, and every record is read."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.clients.harness import (
    MODULES,
    Inspector,
    Ledger,
    Member,
    batch,
    eventually,
    members_stopped_at_exit,
    produce,
)
from tests.server.conftest import ServerProcess

PARTITIONS = 6


@pytest.mark.parametrize("strategy", ["range", "roundrobin"])
def test_kafka_python_confluent_and_aiokafka_members_share_a_group(server: ServerProcess, strategy: str) -> None:
    for module in MODULES.values():
        pytest.importorskip(module)
    bootstrap = f"127.0.0.1:{server.port}"
    topic, group = "mixed", f"mixed-{strategy}"
    inspector = Inspector(bootstrap, topic, PARTITIONS)
    inspector.create_topic()
    ledger = Ledger()
    produced: list[bytes] = []
    members: list[Member] = []

    def publish(client: str, phase: str, count: int) -> list[bytes]:
        records = batch(phase, count, PARTITIONS)
        produce(client, bootstrap, topic, records)
        produced.extend(v for _, v in records)
        return [v for _, v in records]

    def join(client: str, name: str) -> Member:
        member = Member(ledger, client, name, bootstrap=bootstrap, topic=topic, group=group, strategy=strategy)
        members.append(member)
        member.start()
        return member

    def read_everything(what: str) -> None:
        eventually(lambda: True if not ledger.missing(produced) else None, 30, what)

    with members_stopped_at_exit(members):
        publish("kafka-python", "a", 120)
        kp, ck = join("kafka-python", "kp-1"), join("confluent-kafka", "ck-1")
        view = inspector.wait_stable(group, [kp, ck])
        assert view.protocol == strategy
        read_everything("kafka-python and confluent-kafka members to read phase a")

        aio = join("aiokafka", "aio-1")
        view = inspector.wait_stable(group, [kp, ck, aio])
        assert all(view.assignments.values()), view  # 6 partitions, 3 members: everybody owns some
        b_values = publish("confluent-kafka", "b", 120)
        read_everything("the three members to read phase b")
        owners = {p: {name} for name, owned in view.assignments.items() for p in owned}
        assert ledger.readers(b_values) == owners
        assert ledger.counts() & Counter(b_values) == Counter(b_values)

        ck.stop()  # the librdkafka member leaves; the other two take its partitions over
        c_values = publish("aiokafka", "c", 60)
        view = inspector.wait_stable(group, [kp, aio])
        read_everything("the remaining members to read phase c")
        inspector.wait_committed_to_end(group)
        assert set(ledger.readers(c_values)) == set(range(PARTITIONS))
        kp.stop()
        aio.stop()
    assert inspector.group(group).state == "Empty"
    assert not ledger.missing(produced)
