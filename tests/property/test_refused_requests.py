"""Refused means unchanged, and the live coordinator is what its records say.

Random sequences of requests of every group API — classic JoinGroup / SyncGroup / Heartbeat / LeaveGroup,
KIP-848 ConsumerGroupHeartbeat (joins, heartbeats, leaves, static leaves), offset commits and fetches,
DeleteGroups, described and listed groups — with members, epochs, generations, instance ids, protocols and
settings drawn so that many are refused (unknown members, fenced epochs, full groups, inconsistent
protocols, upgrades and downgrades between the protocols, bad timeouts), interleaved with time passing
and topics changing. After every step:

* a refused request (its handler raised: ``Result.refused``) wrote no record and left every group, member,
  timer, offset and stored record of the coordinator exactly as it was;
* a refused request has no events either (``Result.events``);
* the events tell the truth: the groups and members they say were created, joined, left and deleted are
  exactly the coordinator's groups and members, and the partitions they say were assigned and revoked are
  exactly what each consumer-group member holds;
* the live coordinator's hard state equals that of a coordinator rebuilt from all records written so far.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    encode_assignment,
    encode_subscription,
)
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import (
    GroupCreated,
    GroupDeleted,
    MemberJoined,
    MemberLeft,
    PartitionsAssigned,
    PartitionsRevoked,
)
from regroup.coordinator.result import Result
from regroup.coordinator.share.partition import AckBatch
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import ListGroupsRequest
from regroup.protocol.classic import (
    ClientInfo,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeavingMember,
    SyncGroupRequest,
    SyncGroupResponse,
)
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest
from regroup.protocol.offsets import (
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from regroup.protocol.share import ShareGroupHeartbeatRequest
from regroup.records.model import Record
from tests.group_views import classic_groups, consumer_groups, share_groups

GROUPS = ("g", "h")
TOPICS = {"foo": 4, "bar": 2}
CLIENT = ClientInfo(client_id="client", client_host="/127.0.0.1")


def dump(value: Any) -> Any:
    """A canonical, comparable picture of a value: objects by their fields (a dataclass's compared fields,
    others' slots or ``__dict__``), dicts as sorted items, sets sorted."""
    if value is None or isinstance(value, (bool, int, float, str, bytes, enum.Enum, uuid.UUID)):
        return value
    if isinstance(value, dict):
        return ("dict", tuple(sorted(((repr(k), dump(v)) for k, v in value.items()), key=lambda kv: kv[0])))
    if isinstance(value, (set, frozenset)):
        return ("set", tuple(sorted(repr(v) for v in value)))
    if isinstance(value, (list, tuple)):
        return tuple(dump(v) for v in value)
    if dataclasses.is_dataclass(value):  # (fields declared compare=False are caches of other fields)
        fields_ = [f for f in dataclasses.fields(value) if f.compare]
        return (type(value).__name__, tuple((f.name, dump(getattr(value, f.name))) for f in fields_))
    names: list[str] = []
    for klass in type(value).__mro__:
        names.extend(getattr(klass, "__slots__", ()))
    fields = {n: getattr(value, n) for n in names if hasattr(value, n)}
    fields.update(getattr(value, "__dict__", {}))
    return (type(value).__name__, tuple(sorted((k, dump(v)) for k, v in fields.items())))


#: the only error codes a response carries (at its top level) after its request changed something, as in Kafka:
#: a classic JoinGroup that hands out a member id (the pending member and its timer) or turns away a member the
#: group already had (it is removed), a classic Heartbeat or
#: SyncGroup during a rebalance (the member's session is still renewed). Every other error is a refusal.
ANSWERED_AFTER_A_CHANGE: dict[type, tuple[ErrorCode, ...]] = {
    JoinGroupResponse: (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.GROUP_MAX_SIZE_REACHED),
    HeartbeatResponse: (ErrorCode.REBALANCE_IN_PROGRESS,),
    SyncGroupResponse: (ErrorCode.REBALANCE_IN_PROGRESS,),
}


def state_of(coordinator: GroupCoordinator) -> Any:
    """Everything a request may change (the id source aside: a refused join may have drawn an id)."""
    deadlines = {
        key: (deadline, type(timer).__name__, getattr(timer, "member_epoch", None))
        for key, (deadline, timer) in coordinator.timers.scheduled().items()
    }
    return dump(
        {
            "classic": classic_groups(coordinator),
            "consumer": consumer_groups(coordinator),
            "share": {
                g: (group, {tp: p.snapshot() for tp, p in group.partitions.items()})
                for g, group in share_groups(coordinator).items()
            },
            "offsets": coordinator.offsets.offsets,
            "pending_offsets": coordinator.offsets.pending,
            "persisted": coordinator.persisted,
            "persisted_groups": coordinator.persisted_groups,
            "timers": deadlines,
            "image": coordinator.image,
        }
    )


class Driver:
    def __init__(self, data: st.DataObject, max_size: int, consumer_max_size: int, policy: str) -> None:
        self.data = data
        self.config = CoordinatorConfig(
            group_max_size=max_size,
            consumer_group_max_size=consumer_max_size,
            consumer_group_migration_policy=policy,
            group_initial_rebalance_delay_ms=0,
        )
        self.coordinator = GroupCoordinator(self.config)
        self.now = 0
        self.key = 0
        self.records: list[Record] = []
        self.member_ids: list[str] = []  # every member id any response named
        self.epochs: dict[str, int] = {}  # member id -> last epoch/generation it was given
        self.refused = 0
        #: what the events said so far: (group type, group id) -> member ids, and (group id, member id) ->
        #: held (topic id, partition)s
        self.told: dict[tuple[str, str], set[str]] = {}
        self.held: dict[tuple[str, str], set[tuple[uuid.UUID, int]]] = {}
        self.image(dict(TOPICS))

    # -------------------------------------------------------------------------------------------- plumbing
    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def collect(self, result: Result) -> Result:
        self.records.extend(result.records)
        self.follow(result)
        for completion in result.completions:
            member_id = getattr(completion.response, "member_id", None)
            if isinstance(member_id, str) and member_id and member_id not in self.member_ids:
                self.member_ids.append(member_id)
            epoch = getattr(completion.response, "member_epoch", None)
            if epoch is None:
                epoch = getattr(completion.response, "generation_id", None)
            if isinstance(member_id, str) and isinstance(epoch, int) and epoch >= 0:
                self.epochs[member_id] = epoch
        return result

    def image(self, topics: dict[str, int]) -> None:
        image = ClusterImage({n: TopicImage(topic_id=topic_id_for(n), name=n, partitions=c) for n, c in topics.items()})
        self.collect(self.coordinator.update_metadata(image, self.now))

    def request(self, op: Any, request: Any) -> None:
        """Run one request: timers due now fire first (their changes are legitimate), then the request;
        a refused one must leave everything as it was."""
        self.collect(self.coordinator.advance(self.now))
        before = state_of(self.coordinator)
        self.key += 1
        result = self.collect(op(request, self.key, self.now))
        response = result.response_for(self.key)
        error = getattr(response, "error", ErrorCode.NONE)
        if error != ErrorCode.NONE and error not in ANSWERED_AFTER_A_CHANGE.get(type(response), ()):
            assert result.refused == error, (request, error, result.records, result.events)
        if result.refused is not None:
            self.refused += 1
            assert result.records == [], (request, result.refused, result.records)
            assert result.events == [], (request, result.refused, result.events)
            assert state_of(self.coordinator) == before, (request, result.refused)
            assert result.response_for(self.key) is not None

    def follow(self, result: Result) -> None:
        """Apply the result's events to what they said so far, and compare that with the coordinator."""
        told, held = self.told, self.held
        for event in result.events:
            if isinstance(event, GroupCreated):
                assert (event.group_type, event.group_id) not in told, event
                told[(event.group_type, event.group_id)] = set()
            elif isinstance(event, GroupDeleted):
                assert told.pop((event.group_type, event.group_id)) == set(), event
            elif isinstance(event, MemberJoined):
                members = told[(event.group_type, event.group_id)]
                assert event.member_id not in members, event
                members.add(event.member_id)
            elif isinstance(event, MemberLeft):
                told[(event.group_type, event.group_id)].remove(event.member_id)
            elif isinstance(event, (PartitionsAssigned, PartitionsRevoked)):
                mine = held.setdefault((event.group_id, event.member_id), set())
                parts = {(t, p) for t, ps in event.partitions for p in ps}
                if isinstance(event, PartitionsAssigned):
                    assert not parts & mine, event
                    mine |= parts
                else:
                    assert parts <= mine, event
                    mine -= parts
        c = self.coordinator
        actual = {("classic", g): set(group.members) for g, group in classic_groups(c).items()}
        actual.update({("consumer", g): set(group.members) for g, group in consumer_groups(c).items()})
        actual.update({("share", g): set(group.members) for g, group in share_groups(c).items()})
        assert told == actual
        holding = {
            (g, m.member_id): {
                (t, p) for parts in (m.assigned, m.pending_revocation) for t, ps in parts.items() for p in ps
            }
            for g, group in consumer_groups(c).items()
            for m in group.members.values()
        }
        holding.update(
            {
                (g, m.member_id): {(t, p) for t, ps in m.assigned.items() for p in ps}
                for g, group in share_groups(c).items()
                for m in group.members.values()
            }
        )
        assert {k: v for k, v in held.items() if v} == {k: v for k, v in holding.items() if v}

    def check_replay(self) -> None:
        rebuilt = GroupCoordinator.from_records(self.records, self.now, self.config)
        assert rebuilt.hard_state() == self.coordinator.hard_state()

    # ------------------------------------------------------------------------------------------ the draws
    def group(self) -> str:
        return str(self.draw(st.sampled_from(GROUPS)))

    def member(self) -> str:
        choices = ["", "unknown-member", *self.member_ids[-8:]]
        return str(self.draw(st.sampled_from(choices)))

    def epoch_of(self, member_id: str) -> int:
        known = self.epochs.get(member_id, 0)
        return int(self.draw(st.sampled_from([known, known, known + 1, max(known - 1, 0), -1, 5])))

    def instance(self) -> str | None:
        return self.draw(st.sampled_from([None, None, "i1", "i2"]))  # type: ignore[no-any-return]

    def protocols(self) -> tuple[tuple[str, bytes], ...]:
        topics = self.draw(st.sampled_from([("foo",), ("foo", "bar"), ("bar",)]))
        metadata = encode_subscription(ConsumerProtocolSubscription(topics=topics))
        names = self.draw(st.sampled_from([("range",), ("cooperative-sticky",), ("range", "roundrobin"), ()]))
        return tuple((name, metadata) for name in names)

    # ------------------------------------------------------------------------------------------- the steps
    def step(self) -> None:
        kind = self.draw(
            st.sampled_from(
                [
                    *("join", "join", "sync", "heartbeat", "leave", "cg", "cg", "cg"),
                    *("commit", "fetch", "delete", "describe", "list", "time", "topics"),
                    *("txn-commit", "end-txn", "offset-delete", "sg", "sg", "sg", "share"),
                ]
            )
        )
        c = self.coordinator
        if kind == "time":
            self.now += self.draw(st.sampled_from([1, 100, 3_000, 11_000, 50_000]))
            self.collect(c.advance(self.now))
        elif kind == "topics":
            topics = dict(TOPICS)
            if self.draw(st.booleans()):
                topics["foo"] = 6
            if self.draw(st.booleans()):
                del topics["bar"]
            self.image(topics)
        elif kind == "join":
            req = JoinGroupRequest(
                group_id=self.draw(st.sampled_from([*GROUPS, ""])),
                member_id=self.member(),
                group_instance_id=self.instance(),
                session_timeout_ms=self.draw(st.sampled_from([10_000, 10_000, 1])),
                rebalance_timeout_ms=5_000,
                protocol_type=self.draw(st.sampled_from(["consumer", "consumer", "connect", ""])),
                protocols=self.protocols(),
                version=self.draw(st.sampled_from([9, 3])),
                client=CLIENT,
            )
            self.request(c.join_group, req)
        elif kind == "sync":
            member_id = self.member()
            assignments: tuple[tuple[str, bytes], ...] = ()
            if self.draw(st.booleans()):
                share = encode_assignment(ConsumerProtocolAssignment(partitions={"foo": (0, 1)}))
                assignments = tuple((m, share) for m in self.member_ids[-3:])
            req_sync = SyncGroupRequest(
                group_id=self.group(),
                generation_id=self.epoch_of(member_id),
                member_id=member_id,
                group_instance_id=self.instance(),
                protocol_type=self.draw(st.sampled_from([None, "consumer"])),
                protocol_name=self.draw(st.sampled_from([None, "range", "cooperative-sticky"])),
                assignments=assignments,
            )
            self.request(c.sync_group, req_sync)
        elif kind == "heartbeat":
            member_id = self.member()
            hb = HeartbeatRequest(
                group_id=self.group(),
                generation_id=self.epoch_of(member_id),
                member_id=member_id,
                group_instance_id=self.instance(),
            )
            self.request(c.heartbeat, hb)
        elif kind == "leave":
            leaving = LeavingMember(member_id=self.member(), group_instance_id=self.instance(), reason=None)
            self.request(c.leave_group, LeaveGroupRequest(group_id=self.group(), members=(leaving,)))
        elif kind == "cg":
            self.consumer_heartbeat()
        elif kind == "sg":
            self.share_heartbeat()
        elif kind == "share":
            self.share_delivery()
        elif kind == "commit":
            member_id = self.member()
            commit = OffsetCommitRequest(
                group_id=self.group(),
                generation_id=self.epoch_of(member_id),
                member_id=member_id,
                topics=(("foo", (PartitionCommit(partition=0, offset=self.draw(st.integers(0, 9))),)),),
                version=self.draw(st.sampled_from([9, 7])),
            )
            self.request(c.offset_commit, commit)
        elif kind == "txn-commit":
            member_id = self.member()
            txn = TxnOffsetCommitRequest(
                transactional_id="txn",
                group_id=self.group(),
                producer_id=self.draw(st.sampled_from([1, 2])),
                producer_epoch=0,
                generation_id=self.draw(st.sampled_from([self.epoch_of(member_id), -1])),
                member_id=member_id,
                topics=(("foo", (PartitionCommit(partition=1, offset=self.draw(st.integers(0, 9))),)),),
            )
            self.request(c.txn_offset_commit, txn)
        elif kind == "end-txn":
            producer_id, committed = self.draw(st.sampled_from([1, 2])), self.draw(st.booleans())
            self.collect(c.advance(self.now))
            self.collect(c.complete_transaction(producer_id, committed, self.now))
            assert producer_id not in c.offsets.pending
        elif kind == "offset-delete":
            delete = OffsetDeleteRequest(group_id=self.group(), topics=(("foo", (0, 1)), ("bar", (0,))))
            self.request(c.offset_delete, delete)
        elif kind == "fetch":
            stable = self.draw(st.booleans())
            self.request(c.offset_fetch, OffsetFetchRequest(group_id=self.group(), require_stable=stable))
        elif kind == "delete":
            self.request(c.delete_groups, [self.group()])
        elif kind == "describe":
            self.request(c.describe_groups, list(GROUPS))
            self.request(c.consumer_group_describe, list(GROUPS))
        else:
            self.request(c.list_groups, ListGroupsRequest())

    def consumer_heartbeat(self) -> None:
        member_id = self.member()
        action = self.draw(st.sampled_from(["join", "join", "beat", "beat", "leave", "static-leave"]))
        epoch = {"join": 0, "beat": self.epoch_of(member_id), "leave": -1, "static-leave": -2}[action]
        joining = action == "join"
        held = consumer_groups(self.coordinator).get(GROUPS[0])
        owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
        if not joining and held is not None and member_id in held.members:
            owned = tuple((t, tuple(sorted(ps))) for t, ps in held.members[member_id].assigned.items())
        req = ConsumerGroupHeartbeatRequest(
            group_id=self.group(),
            member_id="" if joining and self.draw(st.booleans()) else member_id,
            member_epoch=epoch,
            instance_id=self.instance(),
            rack_id=None,
            rebalance_timeout_ms=5_000 if joining else -1,
            subscribed_topic_names=self.draw(st.sampled_from([("foo",), ("foo", "bar")]))
            if joining or self.draw(st.booleans())
            else None,
            subscribed_topic_regex=None,
            server_assignor=self.draw(st.sampled_from([None, "uniform", "range", "nope"])),
            topic_partitions=() if joining else owned,
            client=CLIENT,
        )
        self.request(self.coordinator.consumer_group_heartbeat, req)

    def share_heartbeat(self) -> None:
        member_id = self.member()
        action = self.draw(st.sampled_from(["join", "join", "beat", "beat", "leave"]))
        epoch = {"join": 0, "beat": self.epoch_of(member_id), "leave": -1}[action]
        req = ShareGroupHeartbeatRequest(
            group_id=self.group(),
            member_id=member_id or self.draw(st.sampled_from(["s1", "s2", "s3"])),
            member_epoch=epoch,
            subscribed_topic_names=self.draw(st.sampled_from([("foo",), ("foo", "bar"), None, ()])),
            client=CLIENT,
        )
        self.request(self.coordinator.share_group_heartbeat, req)

    def share_delivery(self) -> None:
        """The share partitions' operations: initialize, acquire, acknowledge, release a member."""
        c = self.coordinator
        group_id, member_id = self.group(), self.member() or "s1"
        tp = (topic_id_for("foo"), self.draw(st.integers(0, 1)))
        action = self.draw(st.sampled_from(["init", "acquire", "acquire", "ack", "ack", "release"]))
        if action == "init":
            self.collect(c.advance(self.now))
            self.collect(c.initialize_share_partitions(group_id, {tp: self.draw(st.integers(0, 3))}, None, self.now))
        elif action == "acquire":
            end = self.draw(st.integers(0, 12))
            self.request(lambda _, key, now: c.share_acquire(group_id, member_id, {tp: (0, end)}, 5, key, now), None)
        elif action == "ack":
            first = self.draw(st.integers(0, 8))
            batch = AckBatch(first, first + self.draw(st.integers(0, 3)), (self.draw(st.integers(0, 4)),))
            self.request(lambda _, key, now: c.share_acknowledge(group_id, member_id, {tp: (batch,)}, key, now), None)
        else:
            self.collect(c.advance(self.now))
            self.collect(c.share_release_member(group_id, member_id, self.now))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    data=st.data(),
    max_size=st.sampled_from([2, 3, 10]),
    consumer_max_size=st.sampled_from([1, 2, 3, 10]),
    policy=st.sampled_from(["bidirectional", "upgrade", "downgrade", "disabled"]),
    steps=st.integers(5, 40),
)
def test_refused_requests_change_nothing_and_records_rebuild_the_coordinator(
    data: st.DataObject, max_size: int, consumer_max_size: int, policy: str, steps: int
) -> None:
    driver = Driver(data, max_size, consumer_max_size, policy)
    for _ in range(steps):
        driver.step()
        driver.check_replay()


def test_the_driver_reaches_refusals_and_every_group_type() -> None:
    """The random sequences above are worth something only if they refuse requests and build groups of
    every type; a fixed, short sequence of the same driver shows it does."""
    seen = {"refused": 0, "classic": 0, "consumer": 0, "share": 0}

    @settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        driver = Driver(data, 3, 2, "bidirectional")
        for _ in range(30):
            driver.step()
        seen["refused"] += driver.refused
        seen["classic"] += len(classic_groups(driver.coordinator))
        seen["consumer"] += len(consumer_groups(driver.coordinator))
        seen["share"] += len(share_groups(driver.coordinator))

    run()
    assert seen["refused"] > 0
    assert seen["classic"] > 0
    assert seen["consumer"] > 0
    assert seen["share"] > 0
