"""Machinery of the KIP-848 real-client tests (confluent-kafka / librdkafka with ``group.protocol=consumer``,
and classic cooperative-sticky members for the rolling upgrade).

* ``Book``: what every member did, with one monotonic clock for all threads: each record processed (member,
  partition, offset, value, time) and each member's *ownership windows* — a window opens when the member's
  assign callback starts and closes when its revoke/lost callback has finished (offsets of the revoked
  partitions committed, partitions unassigned). ``exclusive_violations`` finds two members' windows on one
  partition that overlap; ``reads_outside_windows`` a record processed while its member did not own it.
* ``Owner``: a thread per member that polls one message at a time (so "processed" means "handed to our
  code", never a message sitting in a batch when its partition goes), commits what it processed every
  ``COMMIT_EVERY_S`` and, synchronously, in its revoke callback; fatal client errors end the thread and are
  kept in ``fatal``.
* ``ServerView`` / ``server_view``: the server's view of a group read over the wire: ConsumerGroupDescribe
  for a consumer group, DescribeGroups (assignments decoded) for a classic one, and the type ListGroups v5
  reports.

Every wait has a deadline; every client is closed by the thread that made it, failures included.
"""

from __future__ import annotations

import contextlib
import logging
import math
import struct
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.clients.harness import eventually
from tests.server.wire import DESCRIBE, LIST, WireClient

log = logging.getLogger("tests.clients.kip848")

DESCRIBE_848 = 69
GROUP_ID_NOT_FOUND = 69
HEARTBEAT_MS = 500  # the server's --consumer-heartbeat-interval-ms in these tests
SESSION_MS = 10_000  # its --consumer-session-timeout-ms
SERVER_ARGS = ("--consumer-heartbeat-interval-ms", str(HEARTBEAT_MS), "--consumer-session-timeout-ms", str(SESSION_MS))
CLASSIC_SESSION_MS = 6_000
CLASSIC_HEARTBEAT_MS = 200
POLL_S = 0.05
COMMIT_EVERY_S = 0.2
HOLD_S = 2 * HEARTBEAT_MS / 1000  # a view counts as settled when unchanged this long


# ------------------------------------------------------------------------------------------------- book
@dataclass(frozen=True, slots=True)
class Processed:
    member: str
    partition: int
    offset: int
    value: bytes
    t: float


@dataclass(slots=True)
class Window:
    member: str
    partition: int
    start: float
    end: float = math.inf
    how: str = ""  # "revoke" / "lost" once closed


class Book:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.processed: list[Processed] = []
        self.windows: list[Window] = []
        #: member -> [(kind, partitions, t)] as the callbacks were called
        self.callbacks: dict[str, list[tuple[str, frozenset[int], float]]] = {}

    def callback(self, member: str, kind: str, partitions: frozenset[int]) -> None:
        with self._lock:
            self.callbacks.setdefault(member, []).append((kind, partitions, time.monotonic()))

    def open(self, member: str, partitions: frozenset[int], t: float) -> None:
        with self._lock:
            for p in partitions:
                self.windows.append(Window(member, p, t))

    def close(self, member: str, partitions: frozenset[int], how: str) -> None:
        t = time.monotonic()
        with self._lock:
            for w in self.windows:
                if w.member == member and w.partition in partitions and w.end == math.inf:
                    w.end, w.how = t, how

    def process(self, member: str, partition: int, offset: int, value: bytes) -> None:
        with self._lock:
            self.processed.append(Processed(member, partition, offset, value, time.monotonic()))

    def values(self) -> set[bytes]:
        with self._lock:
            return {r.value for r in self.processed}

    def revoked_since(self, member: str, since: float) -> frozenset[int]:
        with self._lock:
            calls = list(self.callbacks.get(member, ()))
        return frozenset(p for kind, ps, t in calls if t >= since and kind in ("revoke", "lost") for p in ps)

    def exclusive_violations(self) -> list[str]:
        """Pairs of windows of different members on one partition that overlap in time."""
        with self._lock:
            windows = sorted(self.windows, key=lambda w: (w.partition, w.start))
        out = []
        for i, a in enumerate(windows):
            for b in windows[i + 1 :]:
                if b.partition != a.partition or b.start >= a.end:
                    break
                if b.member != a.member:
                    out.append(f"partition {a.partition}: {a.member} [{a.start:.3f}, {a.end:.3f}) overlaps {b}")
        return out

    def reads_outside_windows(self) -> list[Processed]:
        with self._lock:
            windows, processed = list(self.windows), list(self.processed)
        return [
            r
            for r in processed
            if not any(w.member == r.member and w.partition == r.partition and w.start <= r.t < w.end for w in windows)
        ]


# ------------------------------------------------------------------------------------------------ members
def consumer_config(bootstrap: str, group: str, name: str, protocol: str, assignor: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": name,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 5_000,
        # "debug": "cgrp",  # only when diagnosing a failure
    }
    if protocol == "consumer":
        # librdkafka refuses the classic-only settings (session.timeout.ms, heartbeat.interval.ms,
        # partition.assignment.strategy) with group.protocol=consumer: the coordinator decides those
        config["group.protocol"] = "consumer"
        if assignor is not None:
            config["group.remote.assignor"] = assignor
    else:
        config |= {
            "group.protocol": "classic",
            "partition.assignment.strategy": assignor or "cooperative-sticky",
            "session.timeout.ms": CLASSIC_SESSION_MS,
            "heartbeat.interval.ms": CLASSIC_HEARTBEAT_MS,
        }
    return config


class Owner(threading.Thread):
    """One group member (see the module doc). ``owned`` is what its callbacks say it owns right now."""

    def __init__(
        self,
        book: Book,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        *,
        protocol: str = "consumer",
        assignor: str | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.book, self.topic, self.member, self.protocol = book, topic, name, protocol
        self.config = consumer_config(bootstrap, group, name, protocol, assignor)
        self.owned: frozenset[int] = frozenset()
        self.fatal: Any = None
        self.error: BaseException | None = None
        self._pending: dict[int, int] = {}
        self._stop_requested = threading.Event()

    # --- callbacks (called on this thread, inside poll/close) ------------------------------------------
    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        started = time.monotonic()
        got = frozenset(tp.partition for tp in partitions)
        self.book.callback(self.member, "assign", got)
        if got:
            self.book.open(self.member, got, started)
        consumer.incremental_assign(partitions)
        self.owned |= got

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        gone = frozenset(tp.partition for tp in partitions)
        self.book.callback(self.member, "revoke", gone)
        self._commit(consumer, only=gone)
        consumer.incremental_unassign(partitions)
        self.owned -= gone
        self.book.close(self.member, gone, "revoke")

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        gone = frozenset(tp.partition for tp in partitions)
        self.book.callback(self.member, "lost", gone)
        for p in gone:
            self._pending.pop(p, None)
        consumer.incremental_unassign(partitions)
        self.owned -= gone
        self.book.close(self.member, gone, "lost")

    def _commit(self, consumer: Any, only: frozenset[int] | None = None) -> None:
        import confluent_kafka

        offsets = {p: o for p, o in self._pending.items() if only is None or p in only}
        if not offsets:
            return
        partitions = [confluent_kafka.TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        try:
            result = consumer.commit(offsets=partitions, asynchronous=False)
        except confluent_kafka.KafkaException as exc:
            log.info("%s: commit %s failed: %s", self.member, offsets, exc)
            return
        for tp in result or []:
            if tp.error is None and self._pending.get(tp.partition) == tp.offset:
                del self._pending[tp.partition]

    # --- the loop ---------------------------------------------------------------------------------------
    def run(self) -> None:
        import confluent_kafka

        consumer = None
        try:
            consumer = confluent_kafka.Consumer(self.config)
            consumer.subscribe(
                [self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
            last_commit = time.monotonic()
            while not self._stop_requested.is_set():
                message = consumer.poll(POLL_S)
                if message is not None and message.error() is not None:
                    error = message.error()
                    if error.fatal() or error.code() == confluent_kafka.KafkaError._FATAL:
                        self.fatal = error
                        return
                    log.info("%s: %s", self.member, error)
                elif message is not None:
                    self.book.process(self.member, message.partition(), message.offset(), message.value())
                    self._pending[message.partition()] = message.offset() + 1
                if time.monotonic() - last_commit >= COMMIT_EVERY_S:
                    self._commit(consumer)
                    last_commit = time.monotonic()
        except BaseException as exc:
            log.exception("member %s failed", self.member)
            self.error = exc
        finally:
            if consumer is not None:
                try:
                    consumer.close()  # revoke callback (commit), then leave the group
                except BaseException as exc:
                    if self.fatal is None:
                        log.exception("member %s failed to close", self.member)
                        self.error = self.error or exc

    def stop(self, timeout: float = 20.0) -> None:
        """Stop polling and close the consumer (it leaves the group); raises if the member failed."""
        self._stop_requested.set()
        self.join(timeout)
        assert not self.is_alive(), f"member {self.member} did not stop within {timeout}s"
        if self.error is not None:
            raise AssertionError(f"member {self.member} failed: {self.error!r}") from self.error


@contextlib.contextmanager
def stopped_at_exit(members: list[Owner]) -> Iterator[list[Owner]]:
    """Stop every member still running when the block exits (failures included)."""
    try:
        yield members
    finally:
        for m in members:
            m._stop_requested.set()
        for m in members:
            m.join(20)


# ----------------------------------------------------------------------------------------- server's view
@dataclass(frozen=True, slots=True)
class ServerView:
    group_type: str  # what ListGroups v5 says: "consumer" or "classic" ("" when not listed)
    state: str
    #: client id -> partitions of the topic (the current assignment)
    assignments: dict[str, frozenset[int]]
    #: ConsumerGroupDescribe's numbers (consumer groups only)
    group_epoch: int = -1
    assignor: str = ""
    targets: dict[str, frozenset[int]] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    member_ids: dict[str, str] = field(default_factory=dict)


def _classic_partitions(blob: bytes | None, topic: str) -> frozenset[int]:
    """The partitions of ``topic`` in a ConsumerProtocolAssignment (any version; user data ignored)."""
    if not blob:
        return frozenset()
    pos = 2
    (count,) = struct.unpack_from(">i", blob, pos)
    pos += 4
    out: set[int] = set()
    for _ in range(count):
        (size,) = struct.unpack_from(">h", blob, pos)
        name = blob[pos + 2 : pos + 2 + size].decode()
        pos += 2 + size
        (n,) = struct.unpack_from(">i", blob, pos)
        pos += 4
        parts = struct.unpack_from(f">{n}i", blob, pos)
        pos += 4 * n
        if name == topic:
            out.update(parts)
    return frozenset(out)


def server_view(port: int, group: str, topic: str) -> ServerView:
    with WireClient(port, client_id="kip848-inspector") as client:
        listed = client.call(LIST, 5, states_filter=[], types_filter=[])
        types = {g.group_id: g.group_type for g in listed.groups}
        described = client.call(DESCRIBE_848, 0, group_ids=[group], include_authorized_operations=False).groups[0]
        if described.error_code == 0:

            def of(assignment: Any) -> frozenset[int]:
                return frozenset(p for t in assignment.topic_partitions if t.topic_name == topic for p in t.partitions)

            return ServerView(
                group_type=types.get(group, ""),
                state=described.group_state,
                assignments={m.client_id: of(m.assignment) for m in described.members},
                group_epoch=described.group_epoch,
                assignor=described.assignor_name,
                targets={m.client_id: of(m.target_assignment) for m in described.members},
                epochs={m.client_id: m.member_epoch for m in described.members},
                member_ids={m.client_id: m.member_id for m in described.members},
            )
        assert described.error_code == GROUP_ID_NOT_FOUND, described
        classic = client.call(DESCRIBE, 5, groups=[group], include_authorized_operations=False).groups[0]
        return ServerView(
            group_type=types.get(group, ""),
            state=classic.group_state,
            assignments={m.client_id: _classic_partitions(m.member_assignment, topic) for m in classic.members},
        )


@dataclass(frozen=True, slots=True)
class TypeSigns:
    """How each API sees the group: ListGroups v5's type, ConsumerGroupDescribe's error (and message),
    DescribeGroups' state."""

    listed_type: str
    consumer_describe_error: int
    consumer_describe_message: str | None
    classic_state: str


def type_signs(port: int, group: str) -> TypeSigns:
    with WireClient(port, client_id="kip848-inspector") as client:
        listed = client.call(LIST, 5, states_filter=[], types_filter=[])
        described = client.call(DESCRIBE_848, 0, group_ids=[group], include_authorized_operations=False).groups[0]
        classic = client.call(DESCRIBE, 5, groups=[group], include_authorized_operations=False).groups[0]
    listed_type = next((g.group_type for g in listed.groups if g.group_id == group), "")
    return TypeSigns(listed_type, int(described.error_code), described.error_message, classic.group_state)


def wait_settled(
    port: int, group: str, topic: str, partitions: int, members: list[Owner], timeout: float = 30.0
) -> ServerView:
    """Wait until the server says Stable with exactly ``members``, each member's own view equals the server's
    (and its target, for a consumer group), the assignments are disjoint and cover every partition — and
    nothing changed for ``HOLD_S``."""
    everything = frozenset(range(partitions))
    names = {m.member for m in members}
    seen: list[tuple[float, Any]] = []
    last: list[Any] = []

    def settled() -> ServerView | None:
        for m in members:
            if m.error is not None or m.fatal is not None:
                raise AssertionError(f"member {m.member} failed: {m.error!r} {m.fatal!r}")
        view = server_view(port, group, topic)
        mine = {m.member: m.owned for m in members}
        last[:] = [view, mine]
        ok = (
            view.state == "Stable"
            and set(view.assignments) == names
            and all(view.assignments[n] == mine[n] for n in names)
            and all(view.targets.get(n, view.assignments[n]) == view.assignments[n] for n in names)
            and sorted(p for a in view.assignments.values() for p in a) == sorted(everything)
        )
        if not ok:
            seen.clear()
            return None
        key = (view, tuple(sorted((n, tuple(sorted(a))) for n, a in mine.items())))
        if not seen or seen[0][1] != key:
            seen[:] = [(time.monotonic(), key)]
            return None
        return view if time.monotonic() - seen[0][0] >= HOLD_S else None

    try:
        return eventually(settled, timeout, f"group {group} to settle with {sorted(names)}", interval=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last (server, members) = {last}") from None


def aside_count(metrics_port: int) -> float:
    """How many pieces of work the server ran on its worker thread (its metrics)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    lines = [line for line in text.splitlines() if line.startswith("regroup_coordinator_work_aside_total ")]
    assert len(lines) == 1, lines
    return float(lines[0].split()[-1])


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    eventually(lambda: True if check() else None, timeout, what)
