"""ShareGroupHeartbeat (KIP-932): validation, joining (epoch 0), the epoch check, subscription and group-epoch
updates, the target assignment, and leaving (epoch -1) or being fenced. A member takes its target at once
(share groups revoke nothing first), so its epoch is the target's."""

from __future__ import annotations

from dataclasses import dataclass

from regroup.coordinator.assignment_interval import interval_running
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import GroupCreated, LeaveReason
from regroup.coordinator.groups import Groups
from regroup.coordinator.share import assignor
from regroup.coordinator.share.group import (
    TOPIC_ORDER,
    Partitions,
    ShareGroup,
    ShareGroupMember,
    SubscribedTopics,
    to_tuple,
)
from regroup.coordinator.share.timers import ShareSessionTimer, member_session_key
from regroup.coordinator.share.writes import ShareWrites, report_state
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.share import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    TopicPartitions,
)

#: Kafka's bound on a share member's id (the client makes it: a UUID, 22 characters in base64 or 36 as text)
MAX_MEMBER_ID_LENGTH = 36


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_REQUEST, message)


def validate(req: ShareGroupHeartbeatRequest) -> None:
    """Kafka's request validation, in Kafka's order."""
    if not req.group_id.strip():
        raise _invalid("GroupId can't be empty.")
    if req.rack_id is not None and not req.rack_id.strip():
        raise _invalid("RackId can't be empty.")
    if not req.member_id.strip():
        raise _invalid("MemberId can't be empty.")
    if len(req.member_id) > MAX_MEMBER_ID_LENGTH:
        raise _invalid("Invalid member id in the request.")
    if req.member_epoch == JOIN_EPOCH:
        if not req.subscribed_topic_names:
            raise _invalid("SubscribedTopicNames must be set in first request.")
    elif req.member_epoch < LEAVE_EPOCH:
        raise _invalid("MemberEpoch is invalid.")


def share_group_heartbeat(ctx: Ctx, groups: Groups, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    validate(req)
    if req.member_epoch == LEAVE_EPOCH:
        return _leave(ctx, groups, req)
    group = _group(ctx, groups, req)
    writes = ShareWrites(ctx, groups)
    old = group.members.get(req.member_id)
    if old is None:
        if req.member_epoch != JOIN_EPOCH:
            raise ApiError(
                ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {group.group_id}."
            )
        if len(group.members) >= ctx.config.share_group_max_size:
            raise ApiError(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The share group has reached its maximum capacity of {ctx.config.share_group_max_size} members.",
            )
        member = ShareGroupMember(member_id=req.member_id)
    else:
        stale = req.member_epoch < old.member_epoch and req.member_epoch == old.previous_member_epoch
        if req.member_epoch not in (JOIN_EPOCH, old.member_epoch) and not stale:  # (a lost response: one back)
            relation = "greater" if req.member_epoch > old.member_epoch else "smaller"
            raise ApiError(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The share group member has a {relation} member epoch ({req.member_epoch}) than the one known by "
                f"the group coordinator ({old.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        member = old
    updated = member.copy()
    if req.rack_id is not None:
        updated.rack_id = req.rack_id
    if req.subscribed_topic_names is not None:
        updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
    updated.client_id = req.client.client_id
    updated.client_host = req.client.client_host

    bump = old is None or old.subscribed_topic_names != updated.subscribed_topic_names
    if old is None or old.metadata() != updated.metadata():
        writes.member_metadata(group.group_id, updated)
    topics = _subscribed_topics(group, groups.image)
    if group.target_topics is not None and topics != group.target_topics:
        bump = True  # a subscribed topic was created, deleted or grew partitions
    if bump:
        writes.group_epoch(group.group_id, group.group_epoch + 1)
    _ensure_target(writes, group, topics)

    current = group.members[req.member_id]
    target = group.target_of(req.member_id)
    if current.member_epoch != group.assignment_epoch or current.assigned != target or old is None:
        reconciled = current.copy()
        reconciled.previous_member_epoch = current.member_epoch
        reconciled.member_epoch = group.assignment_epoch
        reconciled.assigned = target
        writes.current_assignment(group.group_id, reconciled)
    ctx.timers.schedule(
        ShareSessionTimer(group.group_id, req.member_id), ctx.now_ms + ctx.share_session_timeout_ms(group.group_id)
    )
    report_state(group, ctx)
    now = group.members[req.member_id]
    changed = old is None or old.assigned != now.assigned or req.member_epoch == JOIN_EPOCH
    return ShareGroupHeartbeatResponse(
        member_id=req.member_id,
        member_epoch=now.member_epoch,
        heartbeat_interval_ms=ctx.share_heartbeat_interval_ms(group.group_id),
        assignment=to_tuple(now.assigned) if changed else None,
        uninitialized=_uninitialized(ctx, group, req.member_id, now.assigned),
    )


def _group(ctx: Ctx, groups: Groups, req: ShareGroupHeartbeatRequest) -> ShareGroup:
    existing = groups.get(req.group_id)
    if existing is not None and not isinstance(existing, ShareGroup):
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
    if existing is not None:
        return existing
    if req.member_epoch != JOIN_EPOCH:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Share group {req.group_id} not found.")
    group = ShareGroup(group_id=req.group_id)
    groups.add(ctx.journal, group)
    ctx.event(GroupCreated(req.group_id, "share"))
    ShareWrites(ctx, groups).group_epoch(req.group_id, 0)
    return group


def _subscribed_topics(group: ShareGroup, image: ClusterImage) -> SubscribedTopics:
    """(name, id, partition count) of every existing topic the members subscribe to, by name."""
    out = []
    for name in sorted(group.subscribed_topic_names()):
        topic = image.topic(name)
        if topic is not None:
            out.append((name, topic.topic_id, topic.partitions))
    return tuple(out)


def _ensure_target(writes: ShareWrites, group: ShareGroup, topics: SubscribedTopics) -> None:
    """Compute and write a new target when the group epoch moved past the target's; with an assignment interval
    (KIP-1263's ``share.assignment.interval.ms``) no sooner than the interval after the last one (a timer computes
    it when the interval ends; the members keep the last target meanwhile)."""
    group.target_topics = topics
    if group.group_epoch <= group.assignment_epoch:
        return
    ctx = writes.ctx
    interval = ctx.share_assignment_interval_ms(group.group_id)
    timer = ShareAssignmentIntervalTimer(group.group_id)
    if interval_running(ctx, group.assignment_timestamp_ms, group.assignment_epoch, interval, timer):
        return
    subscriptions = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
    by_name = {name: (topic_id, count) for name, topic_id, count in topics}
    target = assignor.assign(subscriptions, by_name, group.targets)
    for member_id, partitions in sorted(target.items()):
        if group.targets.get(member_id) != partitions:
            writes.target(group.group_id, member_id, partitions)
    writes.target_epoch(group.group_id, group.group_epoch)


def _uninitialized(ctx: Ctx, group: ShareGroup, member_id: str, assigned: Partitions) -> TopicPartitions:
    """The member's assigned partitions the group has no state for, every heartbeat (the shell initializes them).
    Once all have state the answer is remembered for the member's assignment (the same object) until a partition
    of the group loses its state (``ShareGroup.states_removed``; a state is only ever added otherwise, and what an
    operation refused added is taken back with the memo it wrote): a heartbeat of a member of 10,000 partitions
    looked each one up (about 3 ms, ``uuid.UUID`` hashing in Python)."""
    known = group.settled.get(member_id)
    if known is not None and known[0] is assigned and known[1] == group.states_removed:
        return ()
    out = []
    states = group.partitions
    for topic_id in sorted(assigned, key=TOPIC_ORDER):
        partitions = sorted(assigned[topic_id])
        missing = tuple(partitions) if not states else tuple(p for p in partitions if (topic_id, p) not in states)
        if missing:
            out.append((topic_id, missing))
    if not out:
        if len(group.settled) > 2 * len(group.members):  # (members that left: forgotten)
            for gone in [m for m in group.settled if m not in group.members]:
                ctx.journal.remove(group.settled, gone)
        ctx.journal.put(group.settled, member_id, (assigned, group.states_removed))
    return tuple(out)


def _leave(ctx: Ctx, groups: Groups, req: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
    group = groups.typed(req.group_id, ShareGroup)
    if group is None:
        raise ApiError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
    if req.member_id not in group.members:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {req.group_id}.")
    fence_member(ctx, groups, group, req.member_id, "leave")
    return ShareGroupHeartbeatResponse(member_id=req.member_id, member_epoch=LEAVE_EPOCH)


@dataclass(slots=True, eq=False)
class ShareAssignmentIntervalTimer:
    """A share group's assignment interval ended: its target is computed if the group epoch moved past it."""

    group_id: str

    @property
    def key(self) -> tuple[str, str]:
        return ("share-assignment-interval", self.group_id)

    def fire(self, ctx: Ctx, groups: Groups) -> None:
        group = groups.typed(self.group_id, ShareGroup)
        if group is not None:
            _ensure_target(ShareWrites(ctx, groups), group, _subscribed_topics(group, groups.image))
            report_state(group, ctx)


def fence_member(ctx: Ctx, groups: Groups, group: ShareGroup, member_id: str, reason: LeaveReason) -> None:
    """The member leaves (or is fenced): its records are tombstoned and the group epoch moves on so the others
    take its partitions at their next heartbeat. As in Kafka, the records it acquired stay locked: its share
    session closing (or its connection dropping) releases them, or their locks lapse; a consumer closing sends
    its last acknowledgements and its leave at the same time, and those acknowledgements must still count."""
    writes = ShareWrites(ctx, groups)
    writes.remove_member(group.group_id, member_id, reason)
    ctx.timers.cancel(member_session_key(group.group_id, member_id))
    writes.group_epoch(group.group_id, group.group_epoch + 1)
    report_state(group, ctx)
