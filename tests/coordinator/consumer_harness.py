"""``ConsumerHarness``: the conformance harness extended with KIP-848 requests (ConsumerGroupHeartbeat,
ConsumerGroupDescribe), a cluster image, and shorthands for a consumer group's state.

Topics are created with ``topics(foo=6, bar=3)``; their ids come from ``topic_id_for``. Partition sets in
requests and assertions are written by topic name (``{"foo": [0, 1]}``) and converted here.

``lines(records, names)`` writes records one line each, so that a test can compare the exact list an operation
wrote (``h.written()``: the records of the last call) with Kafka's: ``epoch 2``, ``subscription foo:6``,
``member A foo``, ``target A foo=0,1,2``, ``target-epoch 2``, ``current A epoch=2 prev=1 stable
assigned=foo=0,1,2 revoking=-``, ``group generation=3 protocol=range leader=A members=A:foo=0,1,2``,
``offset foo-0=7``; a tombstone is ``delete`` and the key (``delete member A``). ``names`` maps member ids to
short names (A, B, ...) for reading."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolSubscription,
    ProtocolDecodeError,
    decode_assignment,
    encode_subscription,
)
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import ClientInfo
from regroup.protocol.consumer import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    TopicPartitions,
)
from regroup.records.consumer import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    PartitionSet,
)
from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    PendingOffsetCommitKey,
    Record,
    TxnMarkerKey,
    TxnMarkerValue,
)
from tests.coordinator.harness import GROUP, GroupHarness
from tests.group_views import consumer_groups

REBALANCE_MS = 5_000
Named = Mapping[str, Sequence[int]]


def tp(parts: Named) -> TopicPartitions:
    return tuple((topic_id_for(t), tuple(sorted(ps))) for t, ps in sorted(parts.items()) if ps)


def named(parts: TopicPartitions | Mapping[Any, frozenset[int]] | None) -> dict[str, list[int]] | None:
    """Back from ids to names (topic ids are ``topic_id_for(name)``)."""
    if parts is None:
        return None
    items = parts.items() if isinstance(parts, Mapping) else parts
    out: dict[str, list[int]] = {}
    for topic_id, ps in items:
        name = next(n for n in NAMES if topic_id_for(n) == topic_id)
        if ps:
            out[name] = sorted(ps)
    return out


NAMES = ("foo", "bar", "baz", "qux", "foo-1", "foo-2", "foo-3", "zzz")


def subscription(topics: Sequence[str], owned: Named | None = None, generation: int = -1) -> bytes:
    return encode_subscription(
        ConsumerProtocolSubscription(
            topics=tuple(topics), owned={t: tuple(ps) for t, ps in (owned or {}).items()}, generation=generation
        )
    )


def _parts(parts: PartitionSet | Mapping[str, Sequence[int]]) -> str:
    by_name = named(parts) if not isinstance(parts, Mapping) else {t: sorted(ps) for t, ps in parts.items() if ps}
    if not by_name:
        return "-"
    return " ".join(f"{t}={','.join(map(str, ps))}" for t, ps in sorted(by_name.items()))


def _classic_assignment(raw: bytes) -> str:
    if not raw:
        return "-"
    try:
        return _parts({t: list(ps) for t, ps in decode_assignment(raw).partitions.items()})
    except ProtocolDecodeError:
        return f"{len(raw)}B"


def line(record: Record, names: Mapping[str, str] | None = None) -> str:
    """One record as one line (see the module docstring)."""
    names = names or {}

    def n(member_id: str | None) -> str:
        return "None" if member_id is None else names.get(member_id, member_id)

    key, value = record.key, record.value
    if isinstance(key, ConsumerGroupMetadataKey):
        head = "epoch"
        if isinstance(value, ConsumerGroupMetadataValue):
            return f"epoch {value.epoch}"
    elif isinstance(key, ConsumerGroupPartitionMetadataKey):
        head = "subscription"
        if isinstance(value, ConsumerGroupPartitionMetadataValue):
            return " ".join(["subscription", *(f"{t.name}:{t.partitions}" for t in value.topics)])
    elif isinstance(key, ConsumerGroupMemberMetadataKey):
        head = f"member {n(key.member_id)}"
        if isinstance(value, ConsumerGroupMemberMetadataValue):
            words = [head, ",".join(value.subscribed_topic_names) or "-"]
            if value.subscribed_topic_regex is not None:
                words.append(f"regex={value.subscribed_topic_regex}")
            if value.instance_id is not None:
                words.append(f"instance={value.instance_id}")
            if value.classic is not None:
                words.append("classic")
            return " ".join(words)
    elif isinstance(key, ConsumerGroupTargetAssignmentMemberKey):
        head = f"target {n(key.member_id)}"
        if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
            return f"{head} {_parts(value.partitions)}"
    elif isinstance(key, ConsumerGroupTargetAssignmentMetadataKey):
        head = "target-epoch"
        if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
            return f"target-epoch {value.assignment_epoch}"
    elif isinstance(key, ConsumerGroupCurrentMemberAssignmentKey):
        head = f"current {n(key.member_id)}"
        if isinstance(value, ConsumerGroupCurrentMemberAssignmentValue):
            return (
                f"{head} epoch={value.member_epoch} prev={value.previous_member_epoch} {value.state} "
                f"assigned={_parts(value.assigned)} revoking={_parts(value.pending_revocation)}"
            )
    elif isinstance(key, GroupMetadataKey):
        head = "group"
        if isinstance(value, GroupMetadataValue):
            members = " ".join(f"{n(m.member_id)}:{_classic_assignment(m.assignment)}" for m in value.members)
            return (
                f"group generation={value.generation} protocol={value.protocol_name} leader={n(value.leader)} "
                f"members={members or '-'}"
            )
    elif isinstance(key, ConsumerGroupRegularExpressionKey):
        head = f"regex {key.regex}"
        if isinstance(value, ConsumerGroupRegularExpressionValue):
            return f"{head} = {','.join(value.topics) or '-'}"
    elif isinstance(key, TxnMarkerKey):
        assert isinstance(value, TxnMarkerValue)
        return f"{'commit' if value.committed else 'abort'} marker of producer {key.producer_id}"
    elif isinstance(key, PendingOffsetCommitKey):
        head = f"pending offset {key.topic}-{key.partition} of producer {key.producer_id}"
        if isinstance(value, OffsetCommitValue):
            return f"{head}={value.offset}"
    elif isinstance(key, OffsetCommitKey):
        head = f"offset {key.topic}-{key.partition}"
        if isinstance(value, OffsetCommitValue):
            return f"{head}={value.offset}"
    else:  # pragma: no cover - a new record type needs a line here
        raise AssertionError(f"no line for {key!r}")
    assert value is None, record
    return f"delete {head}"


def lines(records: Sequence[Record], names: Mapping[str, str] | None = None) -> list[str]:
    return [line(r, names) for r in records]


class ConsumerHarness(GroupHarness):
    def __init__(self, **overrides: Any) -> None:
        super().__init__(**overrides)
        self._image: dict[str, TopicImage] = {}

    def topics(self, **partitions: int) -> None:
        for name, count in partitions.items():
            self._image[name] = TopicImage(topic_id=topic_id_for(name), name=name, partitions=count)
        self._collect(self.coordinator.update_metadata(ClusterImage(dict(self._image)), self.now_ms))

    def reload(self, **overrides: Any) -> None:
        super().reload(**overrides)
        self._collect(self.coordinator.update_metadata(ClusterImage(dict(self._image)), self.now_ms))

    def written(self, names: Mapping[str, str] | None = None) -> list[str]:
        """The records the last call (request or clock advance) wrote, one line each."""
        return lines(self.last.records, names)

    def cg(self, group_id: str | None = None) -> ConsumerGroup:
        return consumer_groups(self.coordinator)[self._gid(group_id)]

    def cmember(self, member_id: str, group_id: str | None = None) -> ConsumerGroupMember:
        return self.cg(group_id).members[member_id]

    def hb(
        self,
        member_id: str = "",
        epoch: int = 0,
        *,
        group_id: str | None = None,
        topics: Sequence[str] | None = None,
        owned: Named | None = None,
        rebalance_timeout_ms: int | None = None,
        instance_id: str | None = None,
        rack_id: str | None = None,
        assignor: str | None = None,
        regex: str | None = None,
        full: bool | None = None,
    ) -> ConsumerGroupHeartbeatResponse:
        """ConsumerGroupHeartbeat. A join (epoch 0) defaults to a full request (timeout 5 s, no owned
        partitions); later heartbeats send only what is given."""
        joining = epoch == 0
        if full is None:
            full = joining
        if rebalance_timeout_ms is None:
            rebalance_timeout_ms = REBALANCE_MS if full else -1
        request = ConsumerGroupHeartbeatRequest(
            group_id=self._gid(group_id),
            member_id=member_id,
            member_epoch=epoch,
            instance_id=instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=tuple(topics) if topics is not None else None,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            topic_partitions=tp(owned) if owned is not None else (() if joining else None),
            client=ClientInfo(client_id="client", client_host="/127.0.0.1"),
        )
        call = self._submit(self.coordinator.consumer_group_heartbeat, request)
        response = call.response
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        return response

    def join_cg(self, topics: Sequence[str] = ("foo",), **kwargs: Any) -> ConsumerGroupHeartbeatResponse:
        response = self.hb("", 0, topics=topics, **kwargs)
        assert response.error is ErrorCode.NONE, response
        return response

    def settle(self, members: Sequence[str], rounds: int = 10) -> None:
        """Heartbeat every member (acknowledging whatever it was given) until the group is Stable."""
        for _ in range(rounds):
            for member_id in members:
                m = self.cmember(member_id)
                self.hb(member_id, m.member_epoch, owned=named(m.assigned) or {})
            if self.cg().state().value == "Stable":
                return
        raise AssertionError(f"group did not settle: {self.cg().state()}")

    def cg_describe(self, *group_ids: str) -> tuple[DescribedConsumerGroup, ...]:
        call = self._submit(self.coordinator.consumer_group_describe, list(group_ids or (GROUP,)))
        result = call.response
        assert isinstance(result, tuple)
        return result
