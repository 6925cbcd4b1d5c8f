"""KIP-932 share groups with confluent-kafka's ShareConsumer (librdkafka 2.16) against ``regroup serve``:
implicit and explicit acknowledgement (ACCEPT / RELEASE / REJECT), the delivery count limit, record locks that
lapse, several members sharing one partition, a member killed -9 while it holds records, the server killed -9
between acknowledged and unacknowledged records, ``share.isolation.level=read_committed`` with a transactional
producer, and share groups switched off.

Every topic starts its share group at the beginning of the log (``share.auto.offset.reset=earliest`` set
before the first member subscribes). "Nothing more arrives" is always shown by a record produced afterwards
that does arrive, alone (``assert_drained``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clients.share import (
    HOLDER_SCRIPT,
    Delivery,
    Member,
    Sender,
    assert_drained,
    bootstrap,
    poll_for,
    poll_until,
    prepare,
    read_json_line,
)
from tests.server.conftest import ServerProcess, assert_clean_log, served

ck = pytest.importorskip("confluent_kafka")
if not hasattr(ck, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer (needs 2.16+)", allow_module_level=True)

# a client call blocked in C cannot be interrupted by a signal
pytestmark = pytest.mark.timeout(60, method="thread")

HEARTBEAT_MS = 500
SESSION_MS = 6_000
LOCK_MS = 2_000  # short, so lapsing locks are quick to see
LOCK_S = LOCK_MS / 1000
#: a lock far longer than any wait below, so a record that comes back came back for another reason
LONG_LOCK_MS = 30_000
LONG_SESSION_MS = 10_000
SHARE_ARGS = (
    "--share-heartbeat-interval-ms",
    str(HEARTBEAT_MS),
    "--share-session-timeout-ms",
    str(SESSION_MS),
    "--share-record-lock-duration-ms",
    str(LOCK_MS),
)
LONG_LOCK_ARGS = (
    "--share-heartbeat-interval-ms",
    str(HEARTBEAT_MS),
    "--share-session-timeout-ms",
    str(LONG_SESSION_MS),
    "--share-record-lock-duration-ms",
    str(LONG_LOCK_MS),
)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    base = tmp_path_factory.mktemp("share")
    with served(base, "--events", str(base / "events.jsonl"), *SHARE_ARGS) as proc:
        yield proc


@pytest.fixture
def server(module_server: ServerProcess) -> Iterator[ServerProcess]:
    """The module's server (2 s record locks, delivery count limit 5); its log is checked after each test."""
    yield module_server
    assert_clean_log(module_server)


@pytest.fixture
def long_lock_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of the test's own with 30 s record locks and a 10 s share session timeout."""
    with served(tmp_path, "--events", str(tmp_path / "events.jsonl"), *LONG_LOCK_ARGS) as proc:
        yield proc


def summary(deliveries: list[Delivery]) -> list[tuple[int, int, bytes, int]]:
    return [(d.partition, d.offset, d.value, d.count) for d in deliveries]


def test_implicit_acknowledgement_delivers_each_record_once(server: ServerProcess) -> None:
    """Implicit mode: one member (at most 10 records a poll) gets each of 30 records (3 partitions) exactly once,
    at delivery count 1; the acknowledgements sent with its later polls and by commit_sync are all confirmed.
    After it closes, a new member of the group gets none of them (for longer than a record lock) but does get a
    record produced afterwards."""
    topic = group = "share-implicit"
    prepare(server, topic, 3, group)
    sender = Sender(server, topic)
    records = [(i % 3, f"implicit-{i}".encode()) for i in range(30)]
    placed = sender.send(records)
    with Member(server, group, topic, mode="implicit", name="first", **{"max.poll.records": 10}) as first:
        poll_until(first, lambda: set(first.values()) >= set(placed), 15, "30 records")
        assert len({d.poll for d in first.deliveries}) >= 3, summary(first.deliveries)
        first.commit()
        first.close()
        assert Counter(first.values()) == Counter(placed.keys()), summary(first.deliveries)
        assert all(d.count == 1 for d in first.deliveries), summary(first.deliveries)
        assert {(d.partition, d.offset) for d in first.deliveries} == set(placed.values())
        assert not first.ack_failures, first.ack_failures
        assert set(first.confirmed) == set(placed.values()), sorted(set(placed.values()) - set(first.confirmed))
        assert set(first.confirmed.values()) == {1}

    with Member(server, group, topic, mode="implicit", name="second") as second:
        assert_drained(second, sender, 1, quiet_s=LOCK_S + 0.5)
        assert not second.ack_failures, second.ack_failures
    sender.close()


def test_explicit_accept_release_reject(server: ServerProcess) -> None:
    """Explicit mode on one partition: of 9 records 3 are accepted, 3 released, 3 rejected. Exactly the released
    ones come back, each once, at delivery count 2 with their offsets; accepted and rejected ones never return
    (not even after their lock would have lapsed), and the broker confirms every acknowledgement."""
    topic = group = "share-explicit"
    prepare(server, topic, 1, group)
    sender = Sender(server, topic)
    placed = sender.send([(0, f"explicit-{i}".encode()) for i in range(9)])
    kinds = {
        "accept": ck.AcknowledgeType.ACCEPT,
        "release": ck.AcknowledgeType.RELEASE,
        "reject": ck.AcknowledgeType.REJECT,
    }
    plan = {value: ("accept", "release", "reject")[i % 3] for i, value in enumerate(placed)}
    released = {v for v, what in plan.items() if what == "release"}

    with Member(server, group, topic, mode="explicit", name="explicit") as member:

        def decide(d: Delivery) -> None:
            member.ack(d, kinds[plan[d.value]] if d.count == 1 else ck.AcknowledgeType.ACCEPT)

        def finished() -> bool:
            first = {d.value for d in member.deliveries if d.count == 1}
            again = {d.value for d in member.deliveries if d.count > 1}
            return first == set(placed) and again >= released

        poll_until(member, finished, 15, "the released records again", on_delivery=decide)
        member.commit()
        assert_drained(member, sender, 0, quiet_s=LOCK_S + 0.5)

        deliveries = member.deliveries[:-1]  # without the sentinel
        firsts = [(d.offset, d.value) for d in deliveries if d.count == 1]
        assert sorted(firsts) == sorted((offset, v) for v, (_, offset) in placed.items()), summary(deliveries)
        again = sorted((d.offset, d.value, d.count) for d in deliveries if d.count != 1)
        assert again == sorted((placed[v][1], v, 2) for v in released), summary(deliveries)
        assert not member.ack_failures, member.ack_failures
        expected = Counter({(0, offset): 2 if v in released else 1 for v, (_, offset) in placed.items()})
        sentinel = member.deliveries[-1]
        expected[(0, sentinel.offset)] = 1
        assert member.confirmed == expected
    sender.close()


def test_delivery_count_limit(tmp_path: Path) -> None:
    """With ``--share-delivery-count-limit 2`` a record is delivered at most twice: one released twice is not
    delivered a third time, nor is one released once whose second lock then lapses (another member of the
    group polls through the lapse and gets only a record produced afterwards)."""
    topic = group = "share-limit"
    with served(tmp_path, *SHARE_ARGS, "--share-delivery-count-limit", "2") as proc:
        prepare(proc, topic, 1, group)
        sender = Sender(proc, topic)
        release = ck.AcknowledgeType.RELEASE
        with Member(proc, group, topic, mode="explicit", name="first") as first:
            # released twice
            sender.send([(0, b"released-twice")])
            poll_until(
                first,
                lambda: len(first.deliveries) >= 2,
                15,
                "two deliveries",
                on_delivery=lambda d: first.ack(d, release),
            )
            first.commit()
            assert_drained(first, sender, 0, quiet_s=1.0)
            assert [(d.value, d.count) for d in first.deliveries[:2]] == [
                (b"released-twice", 1),
                (b"released-twice", 2),
            ]

            # released once, then its second lock lapses while the member sits on it
            mark = len(first.deliveries)
            sender.send([(0, b"lapsed")])

            def second_time(d: Delivery) -> None:
                if d.count == 1:
                    first.ack(d, release)
                else:
                    first.hold(d)

            poll_until(first, lambda: len(first.deliveries) - mark >= 2, 15, "two deliveries", on_delivery=second_time)
            got = [(d.value, d.count) for d in first.deliveries[mark:]]
            assert got == [(b"lapsed", 1), (b"lapsed", 2)], got
            acquired_by = first.deliveries[-1].at
            with Member(proc, group, topic, mode="explicit", name="second") as second:
                # poll until well after the lock lapsed, then a new record must be the only thing delivered
                assert_drained(second, sender, 0, quiet_s=acquired_by + LOCK_S + 1.0 - time.monotonic())
                assert not second.ack_failures, second.ack_failures
            assert not first.ack_failures, first.ack_failures
        sender.close()


def test_lapsed_lock_redelivers_to_another_member(server: ServerProcess) -> None:
    """A member polls 5 records (explicit mode) and sits on them without acknowledging, polling or closing. A
    second member gets nothing while they are locked and all 5 once the lock lapses (never before the lock
    duration since the first member subscribed), at delivery count 2. After the second accepts them, the first
    closing does not bring them back."""
    topic = group = "share-lapse"
    prepare(server, topic, 1, group)
    sender = Sender(server, topic)
    placed = sender.send([(0, f"lapse-{i}".encode()) for i in range(5)])
    subscribed = time.monotonic()
    with Member(server, group, topic, mode="explicit", name="holder") as holder:
        poll_until(holder, lambda: bool(holder.deliveries), 15, "records", on_delivery=holder.hold)
        held = holder.deliveries
        assert [(d.value, d.offset, d.count) for d in held] == [(v, o, 1) for v, (_, o) in placed.items()]

        with Member(server, group, topic, mode="explicit", name="taker") as taker:
            poll_until(taker, lambda: len(taker.deliveries) >= 5, LOCK_S + 10, "the lapsed records")
            got = taker.deliveries
            assert [(d.value, d.offset, d.count) for d in got] == [(v, o, 2) for v, (_, o) in placed.items()]
            early = [d.at - subscribed for d in got if d.at < subscribed + LOCK_S - 0.05]
            assert not early, f"redelivered {early} s after the holder subscribed, before the {LOCK_S} s lock lapsed"
            taker.commit()
            holder.close()
            assert_drained(taker, sender, 0, quiet_s=0.5)
            assert not taker.ack_failures, taker.ack_failures
    sender.close()


def test_members_share_one_partition(server: ServerProcess) -> None:
    """Three members (one thread and one ShareConsumer each, implicit mode, at most 10 records a poll) share a
    one-partition topic while records keep arriving: every member gets some, and every record is delivered
    exactly once in all (at delivery count 1), its acknowledgement confirmed to the member that got it. Once they
    have closed, a new member finds nothing left (for longer than a record lock) but a record produced later."""
    topic = group = "share-many"
    prepare(server, topic, 1, group)
    sender = Sender(server, topic)
    stop = threading.Event()
    members: dict[str, Member] = {}
    errors: list[str] = []

    def run(name: str) -> None:
        try:
            with Member(server, group, topic, mode="implicit", name=name, **{"max.poll.records": 10}) as member:
                members[name] = member
                while not stop.is_set():
                    member.poll(0.1)
                member.commit()
        except BaseException as exc:
            errors.append(f"{name}: {exc!r}")

    threads = [threading.Thread(target=run, args=(f"m{i}",), daemon=True) for i in range(3)]
    for t in threads:
        t.start()
    placed: dict[bytes, tuple[int, int]] = {}
    try:
        deadline = time.monotonic() + 20
        wave = 0
        # keep producing until every member has had records (and at least 300 were sent)
        while len(members) < 3 or any(not m.deliveries for m in members.values()) or len(placed) < 300:
            assert time.monotonic() < deadline and not errors, (
                errors,
                {n: len(m.deliveries) for n, m in members.items()},
            )
            placed.update(sender.send([(0, f"many-{wave}-{i}".encode()) for i in range(30)]))
            wave += 1
            time.sleep(0.05)  # a pace for the producer, not an assertion

        def received() -> set[bytes]:
            return {d.value for m in list(members.values()) for d in list(m.deliveries)}

        deadline = time.monotonic() + 15
        while not received() >= set(placed) and time.monotonic() < deadline and not errors:
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    deliveries = [d for m in members.values() for d in m.deliveries]
    counts = Counter(d.value for d in deliveries)
    assert set(counts) == set(placed), f"missing {len(set(placed) - set(counts))}, unknown {set(counts) - set(placed)}"
    assert {v: n for v, n in counts.items() if n > 1} == {}
    assert all(d.count == 1 for d in deliveries), [d for d in deliveries if d.count != 1][:5]
    shares = {n: len(m.deliveries) for n, m in members.items()}
    for name, member in members.items():
        assert member.deliveries, f"{name} got nothing: {shares}"
        assert not member.ack_failures, (name, member.ack_failures)
        mine = {(d.partition, d.offset) for d in member.deliveries}
        assert set(member.confirmed) == mine, (name, sorted(mine ^ set(member.confirmed))[:10])
    with Member(server, group, topic, mode="implicit", name="last") as last:
        assert_drained(last, sender, 0, quiet_s=LOCK_S + 0.5)
    sender.close()


def test_member_killed_while_holding_records(long_lock_server: ServerProcess, tmp_path: Path) -> None:
    """A member in a child process polls 5 records and sits on them; another member gets nothing while they are
    locked (30 s locks). The child is killed -9: its connection drops and its records are released at once —
    the other member gets all 5, at delivery count 2, well before the lock or the member's session (10 s)
    could have run out."""
    server = long_lock_server
    topic = group = "share-killed"
    prepare(server, topic, 1, group)
    sender = Sender(server, topic)
    placed = sender.send([(0, f"killed-{i}".encode()) for i in range(5)])
    with (tmp_path / "holder.err").open("wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", HOLDER_SCRIPT, bootstrap(server), group, topic],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        held = read_json_line(child.stdout, 30)
        assert held == [[0, o, v.decode(), 1] for v, (_, o) in placed.items()], held
        with Member(server, group, topic, mode="explicit", name="survivor") as survivor:
            assert poll_for(survivor, 1.0) == []
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            killed = time.monotonic()
            poll_until(survivor, lambda: len(survivor.deliveries) >= 5, 8, "the killed member's records")
            got = survivor.deliveries
            assert [(d.value, d.offset, d.count) for d in got] == [(v, o, 2) for v, (_, o) in placed.items()]
            assert got[-1].at - killed < LONG_SESSION_MS / 1000
            survivor.commit()
            assert not survivor.ack_failures, survivor.ack_failures
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        assert child.stdout is not None
        child.stdout.close()
    sender.close()


def test_server_killed_between_accepted_and_held_records(long_lock_server: ServerProcess) -> None:
    """A member accepts 10 records (commit_sync confirmed), then polls some of 10 more and holds them when the
    server is killed -9 and restarted. A new member then gets exactly those 10 later records, each once: no
    accepted record is delivered again and none is lost (the held ones are free again at once, although their
    30 s locks had not lapsed)."""
    server = long_lock_server
    topic = group = "share-restart"
    prepare(server, topic, 1, group)
    sender = Sender(server, topic)
    accepted = sender.send([(0, f"accepted-{i}".encode()) for i in range(10)])
    with Member(server, group, topic, mode="explicit", name="before") as before:
        poll_until(before, lambda: set(before.values()) >= set(accepted), 15, "the first 10 records")
        before.commit()
        assert Counter(before.values()) == Counter(accepted.keys()), summary(before.deliveries)
        assert set(before.confirmed) == set(accepted.values()) and not before.ack_failures
        later = sender.send([(0, f"later-{i}".encode()) for i in range(10)])
        mark = len(before.deliveries)
        poll_until(before, lambda: len(before.deliveries) > mark, 15, "a later record", on_delivery=before.hold)
        held = before.deliveries[mark:]
        assert {d.value for d in held} <= set(later), summary(held)
        sender.close()
        server.restart()
        before.close()

    sender = Sender(server, topic)
    with Member(server, group, topic, mode="explicit", name="after") as after:
        poll_until(after, lambda: set(after.values()) >= set(later), 15, "the later records")
        assert_drained(after, sender, 0, quiet_s=0.5)
        got = after.deliveries[:-1]
        assert Counter(d.value for d in got) == Counter(later.keys()), summary(got)
        assert {(d.partition, d.offset) for d in got} == set(later.values())
        assert not after.ack_failures, after.ack_failures
    sender.close()


def set_isolation_level(server: ServerProcess, group: str, level: str) -> None:
    """Set the share group's ``share.isolation.level`` (a GROUP config)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap(server)})
    entry = ConfigEntry("share.isolation.level", level, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("GROUP", group, incremental_configs=[entry])
    admin.incremental_alter_configs([resource])[resource].result(timeout=15)


def test_read_committed_share_group_with_a_transactional_producer(server: ServerProcess) -> None:
    """``share.isolation.level=read_committed`` with confluent-kafka's transactional Producer: of a committed
    transaction (offsets 0-4, marker 5), an aborted one (6-10, marker 11) and an open one (12-14), the member gets
    the committed records, never the aborted ones, and the open transaction's only once it commits (marker 15),
    each once at delivery count 1, with every acknowledgement confirmed; nothing else ever arrives."""
    topic = group = "share-read-committed"
    prepare(server, topic, 1, group)
    set_isolation_level(server, group, "read_committed")
    producer = ck.Producer({"bootstrap.servers": bootstrap(server), "transactional.id": "share-rc-txn"})
    producer.init_transactions(15)
    batches = {kind: [f"{kind}-{i}".encode() for i in range(n)] for kind, n in (("c", 5), ("a", 5), ("o", 3))}
    for kind in ("c", "a", "o"):
        producer.begin_transaction()
        for value in batches[kind]:
            producer.produce(topic, value=value, partition=0)
        producer.flush(15)
        if kind == "c":
            producer.commit_transaction(15)
        elif kind == "a":
            producer.abort_transaction(15)
    sender = Sender(server, topic)
    with Member(server, group, topic, mode="implicit", name="committed") as member:
        poll_until(member, lambda: set(member.values()) >= set(batches["c"]), 15, "the committed records")
        poll_for(member, LOCK_S + 0.5)  # the open transaction's records wait; the aborted ones never come
        assert member.values() == batches["c"], summary(member.deliveries)

        producer.commit_transaction(15)
        poll_until(member, lambda: set(member.values()) >= set(batches["o"]), 15, "the open transaction's records")
        member.commit()
        assert_drained(member, sender, 0, quiet_s=LOCK_S + 0.5)

        deliveries = member.deliveries[:-1]  # without the sentinel
        expected = [(0, offset, value, 1) for offset, value in [*enumerate(batches["c"]), *enumerate(batches["o"], 12)]]
        assert summary(deliveries) == expected
        assert not member.ack_failures, member.ack_failures
        assert {offset for _, offset in member.confirmed} >= {0, 1, 2, 3, 4, 12, 13, 14}
        assert not {offset for _, offset in member.confirmed} & set(range(6, 11))
    sender.close()
    producer.flush(5)


def test_share_groups_switched_off(tmp_path: Path) -> None:
    """With ``--no-share-groups`` the first poll of a ShareConsumer raises the fatal error UNSUPPORTED_VERSION
    (the broker's answer to ShareGroupHeartbeat) and the consumer never hands out the record waiting in its
    topic; the server logs no error."""
    topic = group = "share-off"
    with served(tmp_path, "--no-share-groups") as proc:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap(proc)})
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=15)
        sender = Sender(proc, topic)
        sender.send([(0, b"unreachable")])
        sender.close()
        consumer = ck.ShareConsumer({"bootstrap.servers": bootstrap(proc), "group.id": group})
        try:
            consumer.subscribe([topic])
            raised: list[Any] = []
            records: list[bytes] = []
            deadline = time.monotonic() + 10
            while not raised and time.monotonic() < deadline:
                try:
                    records += [m.value() for m in consumer.poll(0.2) if m.error() is None]
                except ck.KafkaException as exc:
                    raised.append(exc.args[0])
            assert raised, "no error within 10 s"
            error = raised[0]
            assert (error.code(), error.fatal()) == (ck.KafkaError.UNSUPPORTED_VERSION, True), error
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                try:
                    records += [m.value() for m in consumer.poll(0.2) if m.error() is None]
                except ck.KafkaException as exc:
                    assert exc.args[0].fatal(), exc
            assert records == []
        finally:
            consumer.close()


def test_share_lag_and_members_in_the_metrics(tmp_path: Path) -> None:
    """KIP-1226's share lag in the Prometheus metrics: 12 records on one partition, a member accepts 5 of them and
    holds none, so the group's lag on the topic is 7 (records neither acknowledged nor archived); the member is
    counted as a share-group member while it is in the group."""
    from tests.server.conftest import free_port
    from tests.server.test_metrics import scrape, value

    metrics_port = free_port()
    with served(tmp_path, "--metrics-port", str(metrics_port), *SHARE_ARGS) as proc:
        topic = group = "share-lag"
        prepare(proc, topic, 1, group)
        sender = Sender(proc, topic)
        placed = sender.send([(0, f"lag-{i}".encode()) for i in range(12)])
        accepted: list[tuple[int, int]] = []

        def accept_five(delivery: Delivery) -> None:
            from confluent_kafka import AcknowledgeType

            if len(accepted) < 5:
                accepted.append((delivery.partition, delivery.offset))
                member.ack(delivery)
            else:
                member.ack(delivery, AcknowledgeType.RELEASE)

        with Member(proc, group, topic, mode="explicit", name="counter", **{"max.poll.records": 5}) as member:
            poll_until(member, lambda: len(accepted) >= 5, 15, "5 records", accept_five)
            member.commit()
            assert set(member.confirmed) >= set(accepted)
            _, samples = scrape(metrics_port)
            assert value(samples, "regroup_group_members", type="share") == 1
        deadline = time.monotonic() + 10
        while True:
            _, samples = scrape(metrics_port)
            lag = value(samples, "regroup_share_group_lag", group=group, topic=topic)
            if lag == len(placed) - len(accepted) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert lag == len(placed) - len(accepted)
        sender.close()
