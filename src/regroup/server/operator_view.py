"""The broker as the operator's console reads it (``console/view.py``'s ``OperatorView``), in process: the groups
through the coordinator's own read operations — ListGroups, DescribeGroups (classic), ConsumerGroupDescribe,
ShareGroupDescribe, OffsetFetch (every committed offset) — run through the runtime like any request, and the log
end offsets from the partition logs, so the lag is what ``regroup groups lag`` reports: log end offset (the high
watermark of a single node) minus the committed offset, per committed partition of a partition that exists.

DescribeGroups carries no generation: a classic group's generation is learnt from the coordinator's events (the
view is also a runtime observer; ``GroupStateChanged`` gives it), as shells learn everything else they know.
Each call answers from one read operation per group type plus one OffsetFetch per group; the loop is given back
between groups, so a long list never holds it. The rebalance history, when the server keeps one, answers
``timeline``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

from regroup.assignors.consumer_protocol import decode_assignment, decode_subscription
from regroup.assignors.consumer_protocol_types import ProtocolDecodeError
from regroup.console.view import GroupDetail, GroupSummary, MemberDetail
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import Event, GroupDeleted, GroupStateChanged
from regroup.coordinator.result import Result
from regroup.model.errors import ErrorCode
from regroup.protocol.admin import DescribedGroup, ListGroupsRequest, ListGroupsResponse
from regroup.protocol.consumer import DescribedConsumerGroup
from regroup.protocol.offsets import OffsetFetchRequest, OffsetFetchResponse
from regroup.protocol.share import DescribedShareGroup
from regroup.server.runtime import CoordinatorRuntime

__all__ = ["ServerView"]

CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"
SHARE: Final = "share"


class EndOffsets(Protocol):
    """The partition logs as far as the view needs them (``server/topics.TopicStore``)."""

    def opened_partition(self, name: str, index: int) -> Any: ...


TimelineSource = Callable[[str, int | None, int | None], Awaitable[dict[str, Any] | None]]


class ServerView:
    """``console.view.OperatorView`` over a running coordinator and partition log. Register it as an observer of
    the runtime (``runtime.add_observer(view.observe)``) so it knows the classic groups' generations."""

    def __init__(self, runtime: CoordinatorRuntime, topics: EndOffsets, timeline: TimelineSource | None = None) -> None:
        self._runtime = runtime
        self._topics = topics
        self._timeline = timeline
        #: classic group id -> its generation, from the events
        self._generations: dict[str, int] = {}
        self._primed = False

    # ------------------------------------------------------------------------------------------ observer
    def observe(self, coordinator: GroupCoordinator, result: Result, now_ms: int) -> None:
        if not self._primed:
            self._primed = True
            self._fold(coordinator.loaded_events)
        if result.events:
            self._fold(result.events)

    def _fold(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event, GroupStateChanged):
                if event.group_type == CLASSIC:
                    self._generations[event.group_id] = event.generation
            elif isinstance(event, GroupDeleted):
                self._generations.pop(event.group_id, None)

    # ------------------------------------------------------------------------------------------ the view
    @property
    def has_timelines(self) -> bool:
        return self._timeline is not None

    async def timeline(self, group_id: str, since_ms: int | None, until_ms: int | None) -> dict[str, Any] | None:
        return None if self._timeline is None else await self._timeline(group_id, since_ms, until_ms)

    async def groups(self) -> list[GroupSummary]:
        listed: ListGroupsResponse = await self._runtime.call(
            lambda c, key, now: c.list_groups(ListGroupsRequest(), key, now)
        )
        by_type: dict[str, list[str]] = {}
        for row in listed.groups:
            by_type.setdefault(row.group_type, []).append(row.group_id)
        out: list[GroupSummary] = []
        for group in await self._described(by_type):
            lag = None
            if group.type != SHARE:
                lag = sum(lag for by in (await self._lag(group.group_id)).values() for lag in by.values())
            out.append(
                GroupSummary(
                    group_id=group.group_id,
                    type=group.type,
                    state=group.state,
                    protocol=group.protocol,
                    assignor=group.assignor,
                    members=len(group.members),
                    lag=lag,
                )
            )
            await asyncio.sleep(0)
        return sorted(out, key=lambda g: g.group_id)

    async def group(self, group_id: str) -> GroupDetail | None:
        listed: ListGroupsResponse = await self._runtime.call(
            lambda c, key, now: c.list_groups(ListGroupsRequest(), key, now)
        )
        kind = next((row.group_type for row in listed.groups if row.group_id == group_id), None)
        if kind is None:
            return None
        found = await self._described({kind: [group_id]})
        if not found:
            return None
        group = found[0]
        if group.type == SHARE:
            return group
        lag = await self._lag(group_id)
        return GroupDetail(
            group_id=group.group_id,
            type=group.type,
            state=group.state,
            generation=group.generation,
            epoch=group.epoch,
            protocol=group.protocol,
            assignor=group.assignor,
            members=group.members,
            lag=lag,
        )

    # ------------------------------------------------------------------------------------------ reading
    async def _described(self, by_type: Mapping[str, list[str]]) -> list[GroupDetail]:
        """Each group of ``by_type`` (type -> ids) described, without its lag; groups gone meanwhile left out."""
        out: list[GroupDetail] = []
        classic = by_type.get(CLASSIC, [])
        if classic:
            described: tuple[DescribedGroup, ...] = await self._runtime.call(
                lambda c, key, now: c.describe_groups(list(classic), key, now, 5)
            )
            out.extend(self._classic(g) for g in described if g.error is ErrorCode.NONE and g.state != "Dead")
        consumer = by_type.get(CONSUMER, [])
        if consumer:
            cdescribed: tuple[DescribedConsumerGroup, ...] = await self._runtime.call(
                lambda c, key, now: c.consumer_group_describe(list(consumer), key, now)
            )
            out.extend(_consumer(g) for g in cdescribed if g.error is ErrorCode.NONE)
        share = by_type.get(SHARE, [])
        if share:
            sdescribed: tuple[DescribedShareGroup, ...] = await self._runtime.call(
                lambda c, key, now: c.share_group_describe(list(share), key, now)
            )
            out.extend(_share(g) for g in sdescribed if g.error is ErrorCode.NONE)
        return out

    def _classic(self, group: DescribedGroup) -> GroupDetail:
        consumer = group.protocol_type == CONSUMER
        members = []
        for m in group.members:
            assignment: dict[str, list[int]] = {}
            rack = None
            if consumer:
                try:
                    if m.assignment:
                        parts = decode_assignment(m.assignment).partitions
                        assignment = {t: sorted(parts[t]) for t in sorted(parts)}
                    if m.metadata:
                        rack = decode_subscription(m.metadata).rack
                except ProtocolDecodeError:
                    pass  # not Kafka's consumer protocol after all: shown without an assignment
            members.append(
                MemberDetail(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.client_host,
                    instance_id=m.group_instance_id,
                    rack=rack,
                    assignment=assignment,
                )
            )
        return GroupDetail(
            group_id=group.group_id,
            type=CLASSIC,
            state=group.state,
            generation=self._generations.get(group.group_id),
            epoch=None,
            protocol=group.protocol_data or None,
            assignor=None,
            members=tuple(sorted(members, key=lambda m: m.member_id)),
            lag=None,
        )

    async def _lag(self, group_id: str) -> dict[str, dict[int, int]]:
        """topic -> partition -> log end offset - committed offset, over the committed partitions that exist."""
        fetched: OffsetFetchResponse = await self._runtime.call(
            lambda c, key, now: c.offset_fetch(OffsetFetchRequest(group_id=group_id), key, now)
        )
        lag: dict[str, dict[int, int]] = {}
        if fetched.error is not ErrorCode.NONE:
            return lag
        for topic, partitions in fetched.topics:
            for p in partitions:
                if p.error is not ErrorCode.NONE or p.offset < 0:
                    continue
                plog = self._topics.opened_partition(topic, p.partition)
                if plog is False:
                    continue
                end = 0 if plog is True else int(plog.log_end_offset)
                lag.setdefault(topic, {})[p.partition] = end - p.offset
        return lag


def _consumer(group: DescribedConsumerGroup) -> GroupDetail:
    return _epoch_group(group, CONSUMER, lambda m: m.instance_id)


def _share(group: DescribedShareGroup) -> GroupDetail:
    return _epoch_group(group, SHARE, lambda m: None)


def _epoch_group(group: Any, kind: str, instance_of: Callable[[Any], str | None]) -> GroupDetail:
    """A consumer or share group as ``/api/groups/<id>`` shows it (an epoch, an assignor, no lag here)."""
    members = tuple(
        sorted(
            (
                MemberDetail(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    host=m.client_host,
                    instance_id=instance_of(m),
                    rack=m.rack_id,
                    assignment={t.topic_name: sorted(t.partitions) for t in sorted(m.assignment, key=_name)},
                )
                for m in group.members
            ),
            key=lambda m: m.member_id,
        )
    )
    return GroupDetail(
        group_id=group.group_id,
        type=kind,
        state=group.state,
        generation=None,
        epoch=group.group_epoch,
        protocol=None,
        assignor=group.assignor_name or None,
        members=members,
        lag=None,
    )


def _name(topic: Any) -> str:
    return str(topic.topic_name)
