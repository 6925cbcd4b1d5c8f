"""Committed offsets, for every group type: OffsetCommit (validated by the group's type), OffsetFetch,
OffsetDelete and the retention expiry.

The store changes only by replaying offset records (``apply``); handlers validate, then emit records."""

from __future__ import annotations

from dataclasses import dataclass, field

from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.classic.rebalance import announce_group
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import OffsetsCommitted, OffsetsDeleted
from regroup.coordinator.group_types import type_of
from regroup.coordinator.groups import Groups
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.offsets import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)
from regroup.records.builders import new_offset_commit_record, new_offset_tombstone
from regroup.records.model import OffsetCommitKey, OffsetCommitValue


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


def _group_for_commit(ctx: Ctx, groups: Groups, req: OffsetCommitRequest) -> None:
    """Validate the commit against the group it names (its type's rules). A commit from outside any group
    (generation -1: an admin client, a consumer with manual assignment) creates a simple classic group."""
    group = groups.get(req.group_id)
    if group is None:
        if req.generation_id < 0:
            created = ClassicGroup(group_id=req.group_id, state_timestamp_ms=ctx.now_ms)
            groups.add(ctx.journal, created)
            announce_group(ctx, created)
            return
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND if req.version >= 9 else ErrorCode.ILLEGAL_GENERATION)
    type_of(group).validate_offset_commit(ctx, group, req)


def offset_commit(ctx: Ctx, groups: Groups, req: OffsetCommitRequest) -> OffsetCommitResponse:
    try:
        _group_for_commit(ctx, groups, req)
    except ApiError as exc:
        return OffsetCommitResponse(
            topics=tuple((t, tuple((p.partition, exc.code) for p in parts)) for t, parts in req.topics)
        )
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


def offset_fetch(groups: Groups, store: OffsetStore, req: OffsetFetchRequest) -> OffsetFetchResponse:
    group = groups.get(req.group_id)
    committed = store.of(req.group_id)
    if group is not None:
        try:
            type_of(group).validate_offset_fetch(group, req)
        except ApiError as exc:
            if exc.code is not ErrorCode.GROUP_ID_NOT_FOUND:
                raise
            committed = {}  # the group has no offsets to show (Kafka: a dead group)
    else:
        committed = {}
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


def offset_delete(ctx: Ctx, groups: Groups, store: OffsetStore, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    """OffsetDelete (KIP-496): the offsets of topics the group does not subscribe to are deleted; those of
    a subscribed topic are refused with GROUP_SUBSCRIBED_TO_TOPIC, a partition the cluster does not have
    with UNKNOWN_TOPIC_OR_PARTITION. A partition with no committed offset is answered NONE (Kafka)."""
    if not req.group_id:
        raise ApiError(ErrorCode.INVALID_GROUP_ID)
    group = groups.get(req.group_id)
    if group is None:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND)
    kind = type_of(group)
    kind.validate_offset_delete(group)
    subscribed = kind.subscribed_topics(group, groups.image)
    committed = store.of(req.group_id)
    image = groups.image
    topics: list[tuple[str, tuple[tuple[int, ErrorCode], ...]]] = []
    deleted: list[tuple[str, int]] = []
    for topic, partitions in req.topics:
        known = image.by_name.get(topic)
        codes: list[tuple[int, ErrorCode]] = []
        for partition in partitions:
            if known is None or not 0 <= partition < known.partitions:
                codes.append((partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            elif subscribed is None or topic in subscribed:
                codes.append((partition, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
            else:
                if (topic, partition) in committed and (topic, partition) not in deleted:
                    ctx.emit(new_offset_tombstone(req.group_id, topic, partition))
                    deleted.append((topic, partition))
                codes.append((partition, ErrorCode.NONE))
        topics.append((topic, tuple(codes)))
    if deleted:
        ctx.event(OffsetsDeleted(req.group_id, tuple(deleted)))
    return OffsetDeleteResponse(topics=tuple(topics))


def expire_offsets(ctx: Ctx, groups: Groups, store: OffsetStore, retention_ms: int) -> None:
    """Kafka's periodic cleanup: tombstones for expired offsets (never those of a topic the group
    subscribes to; when an offset starts ageing is its group type's rule), then the empty groups left
    with no offsets are deleted."""
    now_ms = ctx.now_ms
    image = groups.image
    for group_id in sorted(set(store.offsets) | set(groups)):
        group = groups.get(group_id)
        kind = type_of(group) if group is not None else None
        keep = kind.subscribed_topics(group, image) if kind is not None else frozenset()
        remaining = 0
        for (topic, partition), value in sorted(store.of(group_id).items()):
            base = kind.offset_expiry_base(group, value) if kind is not None else value.commit_timestamp_ms
            if base is None or keep is None or topic in keep:
                remaining += 1
                continue
            deadline = value.expire_timestamp_ms if value.expire_timestamp_ms is not None else base + retention_ms
            if now_ms >= deadline:
                ctx.emit(new_offset_tombstone(group_id, topic, partition))
            else:
                remaining += 1
        if kind is not None and remaining == 0 and kind.is_empty(group):
            kind.delete(ctx, groups, group)
