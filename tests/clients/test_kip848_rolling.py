"""A rolling upgrade and rollback with confluent-kafka while records keep arriving: a classic
cooperative-sticky group is restarted member by member with ``group.protocol=consumer`` (the server converts
it into a consumer group when the first such member joins), then member by member back to classic (it
becomes a classic group again when the last consumer-protocol member leaves).

Checked: no record is lost; no two members ever own a partition at the same time (ownership windows from
the members' rebalance callbacks, one clock for all) and nobody processes a record outside its window; and
the group's type is what Kafka's would be at each step — ListGroups v5's type, ConsumerGroupDescribe
answering for a consumer group and GROUP_ID_NOT_FOUND for a classic one (then DescribeGroups describes it).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.harness import Inspector
from tests.clients.kip848 import (
    GROUP_ID_NOT_FOUND,
    SERVER_ARGS,
    Book,
    Owner,
    TypeSigns,
    aside_count,
    server_view,
    stopped_at_exit,
    type_signs,
    wait_for,
    wait_settled,
)
from tests.server.conftest import ServerProcess, free_port, served

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 6
MEMBERS = 3


class Feeder(threading.Thread):
    """Produces a few records every 50 ms until stopped; ``delivered`` holds every acknowledged value."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="feeder", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.delivered: set[bytes] = set()
        self.failed: list[Any] = []
        self._stop_requested = threading.Event()

    def run(self) -> None:
        import confluent_kafka

        producer = confluent_kafka.Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5})

        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.delivered.add(msg.value())
            else:
                self.failed.append(err)

        i = 0
        while not self._stop_requested.is_set():
            for _ in range(PARTITIONS):
                producer.produce(self.topic, value=f"r-{i}".encode(), partition=i % PARTITIONS, on_delivery=done)
                i += 1
            producer.poll(0.05)
        producer.flush(20)

    def stop(self) -> None:
        self._stop_requested.set()
        self.join(30)
        assert not self.is_alive(), "the feeder did not stop"


def classic_signs(group: str) -> TypeSigns:
    return TypeSigns("classic", GROUP_ID_NOT_FOUND, f"Group {group} is not a consumer group.", "Stable")


#: a consumer group as a pre-KIP-1043 Kafka shows it: DescribeGroups knows no such classic group ("Dead")
CONSUMER_SIGNS = TypeSigns("consumer", 0, None, "Dead")


@pytest.fixture(params=["within", "offloaded"])
def rolling_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    """The KIP-848 server; ``offloaded``: its default assignor is ``range`` (a full computation for every new
    target) and every group of two or more members has its target computed on the worker thread, classic
    members' joins included."""
    metrics_port = free_port()
    args = ["--events", str(tmp_path / "events.jsonl"), *SERVER_ARGS, "--metrics-port", str(metrics_port)]
    if request.param == "offloaded":
        args += ["--consumer-assignors", "range,uniform", "--consumer-assignor-offload-members", "2"]
    with served(tmp_path, *args) as proc:
        yield proc
        if request.param == "offloaded":
            assert aside_count(metrics_port) > 0  # (the computations did run on the worker thread)


def test_rolling_upgrade_to_consumer_protocol_and_back(rolling_server: ServerProcess) -> None:
    kip848_server = rolling_server
    port, topic, group = kip848_server.port, "kip848-roll", "roll"
    bootstrap = f"127.0.0.1:{port}"
    Inspector(bootstrap, topic, PARTITIONS).create_topic()
    book = Book()
    running: list[Owner] = []
    everyone: list[Owner] = []

    def start(name: str, protocol: str) -> Owner:
        member = Owner(book, bootstrap, topic, group, name, protocol=protocol)
        running.append(member)
        everyone.append(member)
        member.start()
        return member

    def settle() -> Any:
        return wait_settled(port, group, topic, PARTITIONS, running, timeout=40)

    feeder = Feeder(bootstrap, topic)
    feeder.start()
    try:
        with stopped_at_exit(everyone):
            for i in range(MEMBERS):
                start(f"classic-{i}", "classic")
            view = settle()
            assert view.group_type == "classic" and view.group_epoch == -1  # described by DescribeGroups
            assert type_signs(port, group) == classic_signs(group)

            # upgrade: restart each member with the consumer protocol
            for i in range(MEMBERS):
                old = running.pop(0)
                old.stop()
                start(f"consumer-{i}", "consumer")
                view = settle()
                assert view.group_type == "consumer", (i, view)
                assert view.group_epoch > 0  # ConsumerGroupDescribe answers
                assert set(view.assignments) == {m.member for m in running}
                assert type_signs(port, group) == CONSUMER_SIGNS

            # rollback: restart each member with the classic protocol
            for i in range(MEMBERS):
                old = running.pop(0)
                old.stop()
                if i == MEMBERS - 1:
                    # the last consumer-protocol member is gone: the group is classic again at once
                    wait_for(lambda: server_view(port, group, topic).group_type == "classic", 20, "a classic group")
                start(f"classic-again-{i}", "classic")
                view = settle()
                expected = "classic" if i == MEMBERS - 1 else "consumer"
                assert view.group_type == expected, (i, view)
                assert type_signs(port, group) == (classic_signs(group) if i == MEMBERS - 1 else CONSUMER_SIGNS)

            feeder.stop()
            assert not feeder.failed, feeder.failed[:3]
            wait_for(lambda: book.values() >= feeder.delivered, 30, "every delivered record to be processed")
            for member in list(running):
                member.stop()
    finally:
        if feeder.is_alive():
            feeder.stop()

    assert len(feeder.delivered) > 100
    assert not book.exclusive_violations(), book.exclusive_violations()
    assert not book.reads_outside_windows(), book.reads_outside_windows()[:5]
    # every member owned something at some point: the conversion really moved partitions between protocols
    owners = {w.member for w in book.windows}
    assert owners == {m.member for m in everyone}, owners
    # every member commits what it processed in its revoke callback (and on close), so the next owner of a
    # partition starts exactly where the last one stopped
    duplicates = len(book.processed) - len(book.values())
    assert duplicates == 0, f"{duplicates} records processed twice"
