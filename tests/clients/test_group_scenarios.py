"""Each client library's own consumers, with every assignment strategy the library ships, as one group
against ``regroup serve``: members join and leave while records arrive, the server is killed (-9) and
restarted under them, and a member started after everyone left resumes from the committed offsets.

Guarantees checked: every acknowledged record is read at least once (and is in the log exactly once);
while the group is stable each partition is read by exactly one member, the one the server says owns it;
no acknowledged commit is lost to the kill; after the last commit a new member reads only what was
produced since."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.clients.harness import (
    CATCH_UP_S,
    CLIENTS,
    MODULES,
    STRATEGIES,
    Inspector,
    Ledger,
    Member,
    batch,
    eventually,
    members_stopped_at_exit,
    produce,
    read_topic,
)
from tests.server.conftest import ServerProcess

PARTITIONS = 6
CASES = [(client, strategy) for client in CLIENTS for strategy in STRATEGIES[client]]


@pytest.mark.parametrize(("client", "strategy"), CASES, ids=[f"{c}-{s}" for c, s in CASES])
def test_group_reads_everything_through_joins_leaves_and_a_kill_9(
    server: ServerProcess, client: str, strategy: str
) -> None:
    pytest.importorskip(MODULES[client])
    bootstrap = f"127.0.0.1:{server.port}"
    topic, group = "orders", f"group-{client}-{strategy}"
    inspector = Inspector(bootstrap, topic, PARTITIONS)
    inspector.create_topic()
    ledger = Ledger()
    produced: list[bytes] = []
    members: list[Member] = []

    def publish(phase: str, count: int) -> list[bytes]:
        records = batch(phase, count, PARTITIONS)
        produce(client, bootstrap, topic, records)
        produced.extend(v for _, v in records)
        return [v for _, v in records]

    def join(name: str) -> Member:
        member = Member(ledger, client, name, bootstrap=bootstrap, topic=topic, group=group, strategy=strategy)
        members.append(member)
        member.start()
        return member

    def read_everything(what: str) -> None:
        eventually(lambda: True if not ledger.missing(produced) else None, CATCH_UP_S, what)

    def kill_and_restart() -> None:
        """kill -9 and start again on the same port and data directory: every commit acknowledged before the
        kill must be there afterwards (records are checked by reading them)."""
        server.kill()
        acked = ledger.acked()  # nothing can be acknowledged between the kill and the restart
        server.start()
        committed = inspector.committed(group)
        lost = {p: (o, committed.get(p)) for p, o in acked.items() if committed.get(p, -1) < o}
        assert not lost, f"acknowledged commits lost by the restart (partition: acked, now): {lost}"

    with members_stopped_at_exit(members):
        publish("a", 200)
        m1, m2 = join("m1"), join("m2")
        read_everything("two members to read phase a")

        m3 = join("m3")
        publish("b", 100)  # while the group rebalances for m3
        # kill -9 in the middle of that rebalance (if it has not finished yet): the restarted server knows the
        # group as its last stored generation, and the members find their way to one with m3 in it
        eventually(lambda: True if inspector.group(group).state != "Stable" or m3.assigned else None, CATCH_UP_S, "m3")
        kill_and_restart()
        view = inspector.wait_stable(group, [m1, m2, m3])
        assert view.protocol == strategy
        read_everything("three members to read phase b")

        c_values = publish("c", 60)  # stable group: one reader per partition, the owner
        read_everything("phase c")
        owners = {p: {name} for name, owned in view.assignments.items() for p in owned}
        assert ledger.readers(c_values) == owners
        assert ledger.counts() & Counter(c_values) == Counter(c_values)  # read once each

        kill_and_restart()  # while the stable group polls, fetches and commits
        publish("d", 100)  # acknowledged by the restarted server
        read_everything("the members to read phase d after the restart")

        m1.stop()  # LeaveGroup while records keep coming
        publish("e", 100)
        inspector.wait_stable(group, [m2, m3])
        read_everything("two members to read phase e")
        inspector.wait_committed_to_end(group)
        m2.stop()
        m3.stop()
        final = inspector.group(group)
        assert (final.state, final.assignments) == ("Empty", {})

        f_values = publish("f", 30)  # a new member resumes from the committed offsets
        fresh = join("fresh")
        inspector.wait_stable(group, [fresh])
        eventually(lambda: True if not ledger.missing(f_values) else None, CATCH_UP_S, "the new member to read phase f")
        time.sleep(0.3)  # anything older would have come with phase f
        fresh_reads = Counter(r.value for r in ledger.reads() if r.member == "fresh")
        assert fresh_reads == Counter(f_values)
        inspector.wait_committed_to_end(group)
        fresh.stop()

    assert not ledger.missing(produced)
    assert read_topic(bootstrap, topic, PARTITIONS, len(produced)) == Counter(produced)
