"""``ConsumerHarness``: the conformance harness extended with KIP-848 requests (ConsumerGroupHeartbeat,
ConsumerGroupDescribe), a cluster image, and shorthands for a consumer group's state.

Topics are created with ``topics(foo=6, bar=3)``; their ids come from ``topic_id_for``. Partition sets in
requests and assertions are written by topic name (``{"foo": [0, 1]}``) and converted here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from regroup.assignors.consumer_protocol import Subscription, encode_subscription
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerMember
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import ClientInfo
from regroup.protocol.consumer import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    DescribedConsumerGroup,
    TopicPartitions,
)
from tests.coordinator.harness import GROUP, GroupHarness

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


NAMES = ("foo", "bar", "baz", "qux", "foo-1", "foo-2", "zzz")


def subscription(topics: Sequence[str], owned: Named | None = None, generation: int = -1) -> bytes:
    return encode_subscription(
        Subscription(
            topics=tuple(topics), owned={t: tuple(ps) for t, ps in (owned or {}).items()}, generation=generation
        )
    )


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

    def cg(self, group_id: str | None = None) -> ConsumerGroup:
        return self.coordinator.consumer_groups[self._gid(group_id)]

    def cmember(self, member_id: str, group_id: str | None = None) -> ConsumerMember:
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
