"""confluent-kafka (librdkafka 2.16) with ``group.protocol=consumer`` against ``regroup serve``: a group that
consumes every record while members join and leave, incremental assignment (a member keeps what it is not
asked to give up and is never told to revoke it), the server-side assignors by name, and an unknown one
refused with UNSUPPORTED_ASSIGNOR as a fatal client error."""

from __future__ import annotations

import time

import pytest

from tests.clients.harness import Inspector, batch, produce
from tests.clients.kip848 import Book, Owner, server_view, stopped_at_exit, wait_for, wait_settled
from tests.server.conftest import ServerProcess

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 4


def test_group_consumes_everything_while_members_come_and_go(kip848_server: ServerProcess) -> None:
    port, topic, group = kip848_server.port, "kip848-flow", "flow"
    bootstrap = f"127.0.0.1:{port}"
    Inspector(bootstrap, topic, PARTITIONS).create_topic()
    book = Book()
    produced: list[bytes] = []

    def send(phase: str) -> None:
        records = batch(phase, 100, PARTITIONS)
        produce("confluent-kafka", bootstrap, topic, records)
        produced.extend(v for _, v in records)

    def member(name: str) -> Owner:
        m = Owner(book, bootstrap, topic, group, name, assignor="uniform")
        members.append(m)
        m.start()
        return m

    members: list[Owner] = []
    with stopped_at_exit(members):
        a, b = member("a"), member("b")
        send("one")
        two = wait_settled(port, group, topic, PARTITIONS, [a, b])
        assert two.group_type == "consumer" and two.assignor == "uniform"
        assert sorted(len(ps) for ps in two.assignments.values()) == [2, 2]

        # c joins: the uniform assignor takes one partition from one of a/b; the other is not disturbed at
        # all, and neither is ever told to revoke a partition it keeps
        send("two")
        joined_at = time.monotonic()
        c = member("c")
        three = wait_settled(port, group, topic, PARTITIONS, [a, b, c])
        assert sorted(len(ps) for ps in three.assignments.values()) == [1, 1, 2]
        for m in (a, b):
            kept = two.assignments[m.member] & three.assignments[m.member]
            revoked = book.revoked_since(m.member, joined_at)
            assert revoked == two.assignments[m.member] - three.assignments[m.member], (m.member, revoked)
            assert not revoked & kept
        untouched = [m for m in (a, b) if three.assignments[m.member] == two.assignments[m.member]]
        assert len(untouched) == 1 and not book.revoked_since(untouched[0].member, joined_at)
        assert three.group_epoch > two.group_epoch

        # b leaves: its partitions move, nobody else revokes anything
        send("three")
        left_at = time.monotonic()
        b.stop()
        members.remove(b)
        after = wait_settled(port, group, topic, PARTITIONS, [a, c])
        assert sorted(len(ps) for ps in after.assignments.values()) == [2, 2]
        assert not book.revoked_since("a", left_at) and not book.revoked_since("c", left_at)

        send("four")
        wait_for(lambda: book.values() >= set(produced), 20, "every record to be processed")

    assert not book.exclusive_violations(), book.exclusive_violations()
    assert not book.reads_outside_windows(), book.reads_outside_windows()[:5]
    # commits made in the revoke callbacks let the next owner resume where the last one stopped
    duplicates = len(book.processed) - len(book.values())
    assert duplicates == 0, f"{duplicates} records processed twice"


def test_members_carry_on_across_a_server_kill_9(kip848_server: ServerProcess) -> None:
    port, topic, group = kip848_server.port, "kip848-restart", "restart"
    bootstrap = f"127.0.0.1:{port}"
    Inspector(bootstrap, topic, PARTITIONS).create_topic()
    book = Book()
    produced: list[bytes] = []
    members = [Owner(book, bootstrap, topic, group, name) for name in ("r1", "r2")]
    with stopped_at_exit(members):
        for m in members:
            m.start()
        before = wait_settled(port, group, topic, PARTITIONS, members)
        settled_at = time.monotonic()
        for phase in ("before", "after"):
            records = batch(phase, 100, PARTITIONS)
            produce("confluent-kafka", bootstrap, topic, records)
            produced.extend(v for _, v in records)
            wait_for(lambda: book.values() >= set(produced), 20, f"the {phase} records to be processed")
            if phase == "before":
                kip848_server.restart()  # kill -9, then the same port and data directory
        after = wait_settled(port, group, topic, PARTITIONS, members)
        # nobody was told to give anything up
        assert not any(book.revoked_since(m.member, settled_at) for m in members), book.callbacks
    # the group came back from its records: same members, same epochs, same assignment, nobody rejoined
    assert (after.member_ids, after.epochs, after.assignments) == (before.member_ids, before.epochs, before.assignments)
    assert not book.exclusive_violations(), book.exclusive_violations()
    assert not book.reads_outside_windows(), book.reads_outside_windows()[:5]


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_server_side_assignors_by_name(kip848_server: ServerProcess, assignor: str) -> None:
    port, topic, group = kip848_server.port, f"kip848-{assignor}", f"assignor-{assignor}"
    bootstrap = f"127.0.0.1:{port}"
    partitions = 6
    Inspector(bootstrap, topic, partitions).create_topic()
    book = Book()
    members = [Owner(book, bootstrap, topic, group, name, assignor=assignor) for name in ("x", "y")]
    with stopped_at_exit(members):
        for m in members:
            m.start()
        view = wait_settled(port, group, topic, partitions, members)
    assert view.assignor == assignor
    shares = sorted(sorted(ps) for ps in view.assignments.values())
    assert [len(s) for s in shares] == [3, 3]
    if assignor == "range":  # contiguous ranges of the one topic
        assert shares == [[0, 1, 2], [3, 4, 5]]


def test_unknown_assignor_is_a_fatal_error(kip848_server: ServerProcess) -> None:
    port, topic, group = kip848_server.port, "kip848-bad", "bad-assignor"
    bootstrap = f"127.0.0.1:{port}"
    Inspector(bootstrap, topic, 1).create_topic()
    member = Owner(Book(), bootstrap, topic, group, "z", assignor="no-such-assignor")
    with stopped_at_exit([member]):
        member.start()
        wait_for(lambda: member.fatal is not None or not member.is_alive(), 20, "the client's fatal error")
    assert member.error is None, member.error
    assert member.fatal is not None
    assert "assignor" in member.fatal.str().lower(), member.fatal.str()
    # refused before anything was written: no such group (ConsumerGroupDescribe says GROUP_ID_NOT_FOUND,
    # DescribeGroups "Dead", ListGroups does not list it)
    view = server_view(port, group, topic)
    assert (view.group_type, view.state, view.assignments) == ("", "Dead", {})
