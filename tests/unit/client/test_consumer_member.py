"""``ConsumerClientMember`` (KIP-848) against the real ``GroupCoordinator``, with no network in between: requests are
handled when sent, answers delivered at once (or dropped, for one member), time moves deadline by deadline."""

from __future__ import annotations

from dataclasses import dataclass, field

from regroup.client import ConsumerClientMember, ConsumerClientState, ConsumerConfig
from regroup.client.types import CallbackKind, TopicPartition
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.errors import ErrorCode
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from regroup.protocol.offsets import OffsetCommitRequest

GROUP = "g"
TOPICS = {"t": 4}


@dataclass
class Harness:
    coordinator: GroupCoordinator = field(
        default_factory=lambda: GroupCoordinator(
            CoordinatorConfig(consumer_group_heartbeat_interval_ms=1_000, consumer_group_session_timeout_ms=6_000)
        )
    )
    members: dict[str, ConsumerClientMember] = field(default_factory=dict)
    now: int = 0
    sent: list[tuple[int, str, object]] = field(default_factory=list)
    answers: list[tuple[str, object, object]] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)
    _key: int = 0

    def __post_init__(self) -> None:
        image = ClusterImage.of(TopicImage(topic_id=topic_id_for(t), name=t, partitions=n) for t, n in TOPICS.items())
        self.coordinator.update_metadata(image, 0)

    def add(self, name: str, **overrides: object) -> ConsumerClientMember:
        settings: dict[str, object] = {
            "group_id": GROUP,
            "client_id": name,
            "topics": tuple(TOPICS),
            "session_timeout_ms": 6_000,
            "rebalance_timeout_ms": 10_000,
            "request_timeout_ms": 3_000,
        }
        settings.update(overrides)
        member = ConsumerClientMember(ConsumerConfig(**settings), {t: topic_id_for(t) for t in TOPICS}, self.now)  # type: ignore[arg-type]
        self.members[name] = member
        self.pump()
        return member

    def pump(self) -> None:
        """Poll every member until nobody has anything to send at ``now``."""
        busy = True
        while busy:
            busy = False
            for name, member in self.members.items():
                for out in member.poll(self.now):
                    busy = True
                    self.sent.append((self.now, name, out.request))
                    if name in self.dropped:
                        continue
                    self._key += 1
                    req = out.request
                    if isinstance(req, ConsumerGroupHeartbeatRequest):
                        result = self.coordinator.consumer_group_heartbeat(req, self._key, self.now)
                    else:
                        assert isinstance(req, OffsetCommitRequest)
                        result = self.coordinator.offset_commit(req, self._key, self.now)
                    for completion in result.completions:
                        self.answers.append((name, req, completion.response))
                        member.on_response(out.request_id, completion.response, self.now)
            self.check_exclusive()

    def check_exclusive(self) -> None:
        seen: dict[TopicPartition, str] = {}
        for name, member in self.members.items():
            for tp in member.owned:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {name} at {self.now}"
                seen[tp] = name

    def run_until(self, end_ms: int) -> None:
        while True:
            deadlines = [d for m in self.members.values() if (d := m.next_deadline()) is not None]
            if (d := self.coordinator.next_deadline()) is not None:
                deadlines.append(d)
            nxt = min([d for d in deadlines if d > self.now] or [end_ms + 1])
            if nxt > end_ms:
                self.now = end_ms
                self.coordinator.advance(self.now)
                self.pump()
                return
            self.now = nxt
            self.coordinator.advance(self.now)
            self.pump()

    def heartbeats(self, name: str) -> list[ConsumerGroupHeartbeatRequest]:
        return [r for _, n, r in self.sent if n == name and isinstance(r, ConsumerGroupHeartbeatRequest)]


def everything() -> frozenset[TopicPartition]:
    return frozenset(("t", p) for p in range(TOPICS["t"]))


def test_join_is_a_full_request_and_later_heartbeats_send_only_changes() -> None:
    h = Harness()
    a = h.add("a", server_assignor="range")
    first = h.heartbeats("a")[0]
    assert first.member_epoch == 0 and first.member_id == ""
    assert first.rebalance_timeout_ms == 10_000 and first.subscribed_topic_names == ("t",)
    assert first.topic_partitions == () and first.server_assignor == "range"
    assert a.owned == everything() and a.member_epoch > 0 and a.member_id
    ack = h.heartbeats("a")[1]  # reports the partitions it now owns, nothing else
    assert ack.member_epoch == a.member_epoch and ack.rebalance_timeout_ms == -1
    assert ack.subscribed_topic_names is None and ack.server_assignor is None
    assert ack.topic_partitions == ((topic_id_for("t"), (0, 1, 2, 3)),)
    h.run_until(5_000)
    later = h.heartbeats("a")[-1]
    assert later.topic_partitions is None and later.subscribed_topic_names is None
    assert a.state is ConsumerClientState.STABLE and a.settled()


def test_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    h = Harness()
    a = h.add("a")
    h.run_until(2_000)
    b = h.add("b")
    h.run_until(8_000)  # the harness checks exclusive ownership after every step
    assert a.owned | b.owned == everything() and len(a.owned) == len(b.owned) == 2
    revoked = [cb for cb in a.callbacks if cb.kind is CallbackKind.REVOKED]
    assert len(revoked) == 1 and set(revoked[0].partitions) == set(b.owned)
    commits = [r for _, n, r in h.sent if n == "a" and isinstance(r, OffsetCommitRequest)]
    assert any({(t, p.partition) for t, ps in c.topics for p in ps} == set(b.owned) for c in commits)
    assert a.settled() and b.settled()


def test_commit_comes_before_the_revocation_callback_and_the_acknowledgement() -> None:
    h = Harness()
    h.add("a")
    h.run_until(2_000)
    h.add("b")
    h.run_until(8_000)
    a_sent = [r for _, n, r in h.sent if n == "a"]
    commit_at = next(i for i, r in enumerate(a_sent) if isinstance(r, OffsetCommitRequest) and len(r.topics[0][1]) == 2)
    ack = a_sent[commit_at + 1]
    assert isinstance(ack, ConsumerGroupHeartbeatRequest) and ack.topic_partitions is not None
    assert len(ack.topic_partitions[0][1]) == 2
    commit_answer = next(resp for n, req, resp in h.answers if req is a_sent[commit_at])
    assert all(code is ErrorCode.NONE for _, codes in commit_answer.topics for _, code in codes)  # type: ignore[attr-defined]


def test_callback_delay_keeps_processing_until_the_callbacks_run() -> None:
    h = Harness()
    a = h.add("a", callback_delay_ms=700)
    h.run_until(700)
    assert a.owned == everything()
    h.run_until(2_000)
    h.add("b", callback_delay_ms=700)
    start = h.now
    h.run_until(start + 600)
    assert len(a.owned) == 4  # told to revoke, still processing: the callbacks have not run yet
    h.run_until(start + 8_000)
    revoked = next(cb for cb in a.callbacks if cb.kind is CallbackKind.REVOKED)
    assert revoked.at_ms >= start + 700
    assert len(a.owned) == 2


def test_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero_and_its_id() -> None:
    h = Harness()
    a = h.add("a")
    h.run_until(2_000)
    member_id = a.member_id
    h.dropped.add("a")
    h.run_until(9_000)  # the coordinator's session timer (6 s) fences it; the lease (6 s) ended it first
    assert a.owned == frozenset()
    assert any(cb.kind is CallbackKind.LOST for cb in a.callbacks)
    h.dropped.clear()
    h.run_until(15_000)
    rejoin = [r for r in h.heartbeats("a") if r.member_epoch == 0][-1]
    assert rejoin.member_id == member_id and rejoin.topic_partitions == () and rejoin.rebalance_timeout_ms == 10_000
    assert a.owned == everything() and a.settled()


def test_unknown_member_answer_means_partitions_lost_and_rejoin() -> None:
    h = Harness()
    # the member believes sessions last 20 s (no lease expiry here); the coordinator fences after 6 s
    a = h.add("a", session_timeout_ms=20_000, rebalance_timeout_ms=30_000)
    h.run_until(2_000)
    member_id = a.member_id
    h.dropped.add("a")
    h.run_until(9_000)
    assert a.owned == everything()  # cut off, the member still processes
    h.dropped.clear()
    h.run_until(9_600)
    unknown = [
        resp for n, _, resp in h.answers if n == "a" and getattr(resp, "error", None) is ErrorCode.UNKNOWN_MEMBER_ID
    ]
    assert unknown
    lost = [cb for cb in a.callbacks if cb.kind is CallbackKind.LOST]
    assert len(lost) == 1 and set(lost[0].partitions) == everything()
    rejoin = [r for r in h.heartbeats("a") if r.member_epoch == 0][-1]
    assert rejoin.member_id == member_id and rejoin.is_full()
    h.run_until(12_000)
    assert a.owned == everything() and a.settled()


def test_fatal_error_stops_the_member() -> None:
    h = Harness()
    a = h.add("a", group_instance_id="i-a")
    h.run_until(1_000)
    b = h.add("b", group_instance_id="i-a")  # same instance id while a is active
    assert b.state is ConsumerClientState.FAILED and b.owned == frozenset()
    assert any("UNRELEASED_INSTANCE_ID" in n.detail for n in b.notes)
    assert a.owned == everything()


def test_leave_sends_epoch_minus_one_and_static_leave_minus_two() -> None:
    h = Harness()
    a = h.add("a")
    s = h.add("s", group_instance_id="i-s")
    h.run_until(5_000)
    a.leave(h.now)
    s.leave(h.now)
    h.pump()
    assert h.heartbeats("a")[-1].member_epoch == -1
    last = h.heartbeats("s")[-1]
    assert last.member_epoch == -2 and last.instance_id == "i-s"
    assert a.state is ConsumerClientState.LEFT and a.owned == frozenset()
    assert any(cb.kind is CallbackKind.REVOKED for cb in a.callbacks)


def test_full_request_after_a_timeout() -> None:
    h = Harness()
    a = h.add("a")
    h.run_until(2_000)
    h.dropped.add("a")
    h.run_until(5_500)  # one heartbeat lost, timed out after 3 s
    h.dropped.clear()
    h.run_until(5_500 + 1_200)
    assert any(n.kind == "timeout" for n in a.notes)
    after = [r for t, n, r in h.sent if n == "a" and t > 5_000 and isinstance(r, ConsumerGroupHeartbeatRequest)]
    assert after and after[0].is_full() and after[0].member_epoch > 0


def test_a_new_target_equal_to_what_the_member_owns_is_still_acknowledged() -> None:
    """z is handed all four partitions, and before its callbacks run the group grows and z's target becomes
    empty. The coordinator now waits for z to report that it no longer owns the four partitions; z never took
    them, so its owned set (empty) is what it last reported, but it must still acknowledge the new target
    (Kafka's client resends its owned partitions whenever its local assignment epoch moves). Without the
    acknowledgement the partitions stay pending revocation until z's rebalance timeout fences it."""
    h = Harness()
    z = h.add("z", member_id="z", server_assignor="range", callback_delay_ms=1_500)
    assert z.assignment == everything() and z.owned == frozenset()  # callbacks not run yet
    h.run_until(100)
    others = [h.add(name, member_id=name, server_assignor="range") for name in ("a1", "a2", "a3", "a4")]
    h.run_until(1_200)
    assert z.assignment == frozenset() and z.owned == frozenset()
    h.run_until(4_000)  # z's callbacks at 1,500, then one heartbeat interval (1 s) for the others
    assert [len(m.owned) for m in others] == [1, 1, 1, 1]
    assert z.member_epoch > 0 and z.settled()
    assert not any(cb.kind is CallbackKind.LOST for cb in z.callbacks)
    acks = [r for t, n, r in h.sent if n == "z" and t == 1_500 and isinstance(r, ConsumerGroupHeartbeatRequest)]
    assert len(acks) == 1 and acks[0].topic_partitions == ()
