"""Committed offsets: OffsetCommit validation against the classic group, OffsetFetch, retention expiry.

The store changes only by replaying offset records (``apply``); handlers validate, then emit records."""

from __future__ import annotations

from dataclasses import dataclass, field

from regroup.assignors.consumer_protocol import ProtocolDecodeError, decode_subscription
from regroup.coordinator.classic.group import ClassicGroup, ClassicGroupState
from regroup.coordinator.classic.join import check_identity
from regroup.coordinator.classic.rebalance import announce_group, schedule_session
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import OffsetsCommitted
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.offsets import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from regroup.records.builders import new_group_tombstone, new_offset_commit_record, new_offset_tombstone
from regroup.records.model import OffsetCommitKey, OffsetCommitValue, Record


@dataclass(slots=True)
class OffsetStore:
    offsets: dict[str, dict[tuple[str, int], OffsetCommitValue]] = field(default_factory=dict)

    def apply(self, key: OffsetCommitKey, value: OffsetCommitValue | None) -> None:
        per_group = self.offsets.setdefault(key.group_id, {})
        if value is None:
            per_group.pop((key.topic, key.partition), None)
            if not per_group:
                del self.offsets[key.group_id]
        else:
            per_group[(key.topic, key.partition)] = value

    def of(self, group_id: str) -> dict[tuple[str, int], OffsetCommitValue]:
        return self.offsets.get(group_id, {})


def _validate_commit(ctx: Ctx, groups: dict[str, ClassicGroup], req: OffsetCommitRequest) -> ClassicGroup:
    group = groups.get(req.group_id)
    if group is None:
        if req.generation_id < 0:
            group = ClassicGroup(group_id=req.group_id, state_timestamp_ms=ctx.now_ms)
            ctx.journal.put(groups, req.group_id, group)
            announce_group(ctx, group)
            return group
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND if req.version >= 9 else ErrorCode.ILLEGAL_GENERATION)
    if group.is_in(ClassicGroupState.DEAD):
        raise ApiError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if req.generation_id < 0 and group.is_in(ClassicGroupState.EMPTY):
        return group
    if req.generation_id >= 0 or req.member_id or req.group_instance_id is not None:
        check_identity(group, req.member_id, req.group_instance_id)
        if req.generation_id != group.generation:
            raise ApiError(ErrorCode.ILLEGAL_GENERATION)
    elif not group.is_in(ClassicGroupState.EMPTY):
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    if group.is_in(ClassicGroupState.COMPLETING_REBALANCE):
        raise ApiError(ErrorCode.REBALANCE_IN_PROGRESS)
    return group


def _validate_consumer_group_commit(group: ConsumerGroup, req: OffsetCommitRequest) -> None:
    """Kafka's consumer-group commit validation: the member's epoch, not a generation, fences commits."""
    if req.generation_id < 0 and not group.members:
        return
    member = group.members.get(req.member_id)
    if member is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
    if member.classic is None and req.version < 9:
        raise ApiError(ErrorCode.UNSUPPORTED_VERSION)
    if req.generation_id != member.member_epoch:
        raise ApiError(ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH)


def offset_commit(
    ctx: Ctx,
    groups: dict[str, ClassicGroup],
    req: OffsetCommitRequest,
    consumer_groups: dict[str, ConsumerGroup] | None = None,
) -> OffsetCommitResponse:
    consumer_group = (consumer_groups or {}).get(req.group_id)
    try:
        if consumer_group is not None:
            _validate_consumer_group_commit(consumer_group, req)
            group = None
        else:
            group = _validate_commit(ctx, groups, req)
    except ApiError as exc:
        return OffsetCommitResponse(
            topics=tuple((t, tuple((p.partition, exc.code) for p in parts)) for t, parts in req.topics)
        )
    member = group.members.get(req.member_id) if group is not None else None
    if (
        group is not None
        and member is not None
        and group.is_in(ClassicGroupState.STABLE, ClassicGroupState.PREPARING_REBALANCE)
    ):
        schedule_session(ctx, group, member.member_id, member.session_timeout_ms)
    expire = ctx.now_ms + req.retention_ms if req.retention_ms != -1 else None
    out: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    committed: list[tuple[str, int, int]] = []
    for topic, partitions in req.topics:
        codes: list[tuple[int, ErrorCode]] = []
        for p in partitions:
            metadata = p.metadata or ""
            # Kafka compares Java's String.length(), i.e. UTF-16 code units, despite the setting's name (at most
            # two per character: only a string that might be too long is encoded)
            limit = ctx.config.offset_metadata_max_bytes
            if 2 * len(metadata) > limit and len(metadata.encode("utf-16-le")) // 2 > limit:
                codes.append((p.partition, ErrorCode.OFFSET_METADATA_TOO_LARGE))
                continue
            value = OffsetCommitValue(
                offset=p.offset,
                leader_epoch=p.leader_epoch,
                metadata=metadata,
                commit_timestamp_ms=ctx.now_ms,
                expire_timestamp_ms=expire,
            )
            ctx.emit(new_offset_commit_record(req.group_id, topic, p.partition, value))
            committed.append((topic, p.partition, p.offset))
            codes.append((p.partition, ErrorCode.NONE))
        out.append((topic, tuple(codes)))
    if committed:
        ctx.event(OffsetsCommitted(req.group_id, tuple(committed)))
    return OffsetCommitResponse(topics=tuple(out))


def offset_fetch(
    groups: dict[str, ClassicGroup],
    store: OffsetStore,
    req: OffsetFetchRequest,
    consumer_groups: dict[str, ConsumerGroup] | None = None,
) -> OffsetFetchResponse:
    consumer_group = (consumer_groups or {}).get(req.group_id)
    group = groups.get(req.group_id)
    if consumer_group is not None:
        if req.member_id is not None or req.member_epoch >= 0:
            cmember = consumer_group.members.get(req.member_id or "")
            if cmember is None:
                raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID)
            if req.member_epoch != cmember.member_epoch:
                raise ApiError(
                    ErrorCode.ILLEGAL_GENERATION if cmember.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
                )
        committed = store.of(req.group_id)
    else:
        committed = {} if group is None or group.is_in(ClassicGroupState.DEAD) else store.of(req.group_id)
    wanted: dict[str, list[int]] = {}
    if req.topics is None:
        for topic, partition in sorted(committed):
            wanted.setdefault(topic, []).append(partition)
    else:
        for topic, partitions in req.topics:
            wanted.setdefault(topic, []).extend(partitions)
    topics = []
    for topic, numbers in wanted.items():
        rows = []
        for p in numbers:
            value = committed.get((topic, p))
            if value is None:
                rows.append(FetchedOffset(partition=p))
            else:
                rows.append(
                    FetchedOffset(
                        partition=p, offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata
                    )
                )
        topics.append((topic, tuple(rows)))
    return OffsetFetchResponse(group_id=req.group_id, topics=tuple(topics))


def subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """Topics the group's members subscribe to (decoded when the protocol type is "consumer"), or None
    when unknown (then no offset is protected by subscription)."""
    if group.protocol_type != "consumer" or not group.members:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            topics.update(decode_subscription(member.metadata(group.protocol_name)).topics)
        except ProtocolDecodeError:
            return None
    return topics


def expired_offset_records(
    groups: dict[str, ClassicGroup],
    store: OffsetStore,
    now_ms: int,
    retention_ms: int,
    consumer_groups: dict[str, ConsumerGroup] | None = None,
    consumer_topics: dict[str, set[str]] | None = None,
) -> list[Record]:
    """Kafka's periodic cleanup: tombstones for expired offsets, and for Empty groups left with none.
    Consumer groups: offsets of subscribed topics (``consumer_topics``) never expire, others from their
    commit time; an empty consumer group left with no offsets is deleted by the caller."""
    records: list[Record] = []
    consumer_groups = consumer_groups or {}
    for group_id in sorted(set(store.offsets) | set(groups)):
        if group_id in consumer_groups:
            keep = (consumer_topics or {}).get(group_id, set())
            for (topic, partition), value in sorted(store.of(group_id).items()):
                deadline = (
                    value.expire_timestamp_ms
                    if value.expire_timestamp_ms is not None
                    else value.commit_timestamp_ms + retention_ms
                )
                if topic not in keep and now_ms >= deadline:
                    records.append(new_offset_tombstone(group_id, topic, partition))
            continue
        group = groups.get(group_id)
        committed = store.of(group_id)
        if group is not None and not _offsets_can_expire(group):
            continue
        keep_topics = (subscribed_topics(group) if group is not None else None) or set()
        remaining = 0
        for (topic, partition), value in sorted(committed.items()):
            if topic in keep_topics:
                remaining += 1
                continue
            base = value.commit_timestamp_ms
            if group is not None and group.is_in(ClassicGroupState.EMPTY) and group.protocol_type is not None:
                base = group.state_timestamp_ms
            deadline = value.expire_timestamp_ms if value.expire_timestamp_ms is not None else base + retention_ms
            if now_ms >= deadline:
                records.append(new_offset_tombstone(group_id, topic, partition))
            else:
                remaining += 1
        if group is not None and group.is_in(ClassicGroupState.EMPTY) and remaining == 0:
            records.append(new_group_tombstone(group_id))
    return records


def _offsets_can_expire(group: ClassicGroup) -> bool:
    if group.is_in(ClassicGroupState.EMPTY):
        return True
    if group.protocol_type is None:
        return True  # simple group
    return group.protocol_type == "consumer" and group.is_in(ClassicGroupState.STABLE)
