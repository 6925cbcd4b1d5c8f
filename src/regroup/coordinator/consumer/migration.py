"""Online migration between the protocols (KIP-848's upgrade and downgrade paths).

Upgrade: the first consumer-protocol member joining a non-empty classic group turns it into a consumer group
whose existing members keep speaking the classic protocol. Downgrade: when the last consumer-protocol member
leaves and only classic members remain, the group becomes a classic group again and rebalances. The policy
(``consumer_group_migration_policy``) governs non-empty groups only; an empty group of one type is always
replaced by a new group of the other type (committed offsets, stored per group id, stay)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ProtocolDecodeError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from regroup.coordinator.classic import rebalance
from regroup.coordinator.classic.group import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
)
from regroup.coordinator.consumer.group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupMemberState, Partitions
from regroup.coordinator.consumer.ops import cancel_timers, group_full, schedule_session
from regroup.coordinator.consumer.subscriptions import subscribed_names, subscription_metadata
from regroup.coordinator.consumer.writes import ConsumerWrites
from regroup.coordinator.context import Ctx
from regroup.coordinator.events import GroupCreated, GroupDeleted, LeaveReason
from regroup.coordinator.groups import Groups
from regroup.model.cluster import ClusterImage
from regroup.model.errors import ApiError, ErrorCode
from regroup.protocol.classic import JoinGroupResponse, SyncGroupResponse
from regroup.records.builders import new_group_metadata_record, new_group_tombstone
from regroup.records.consumer import ClassicProtocolMetadata


# ----------------------------------------------------------------------------------------------- helpers
def _not_found(group_id: str, why: str) -> ApiError:
    return ApiError(
        ErrorCode.GROUP_ID_NOT_FOUND, f"Cannot upgrade classic group {group_id} to a consumer group: {why}."
    )


def ids_of(partitions: dict[str, tuple[int, ...]], image: ClusterImage) -> dict[uuid.UUID, frozenset[int]]:
    """Partitions by topic name as partitions by topic id, keeping only topics and partitions that exist."""
    out: dict[uuid.UUID, frozenset[int]] = {}
    for name, ps in partitions.items():
        topic = image.topic(name)
        if topic is not None and ps:
            out[topic.topic_id] = frozenset(p for p in ps if 0 <= p < topic.partitions)
    return {t: ps for t, ps in out.items() if ps}


def names_of(partitions: Partitions, image: ClusterImage) -> dict[str, tuple[int, ...]]:
    index = image.id_index()
    return {index[t].name: tuple(sorted(ps)) for t, ps in partitions.items() if t in index and ps}


def holdings(member: ConsumerGroupMember) -> dict[uuid.UUID, frozenset[int]]:
    """Every partition the member may still own: assigned plus pending revocation."""
    out = dict(member.assigned)
    for topic_id, ps in member.pending_revocation.items():
        out[topic_id] = out.get(topic_id, frozenset()) | ps
    return out


def embedded_version(protocols: tuple[tuple[str, bytes], ...]) -> int:
    """The consumer-protocol version a classic member speaks: the header of its first protocol's metadata."""
    if not protocols or len(protocols[0][1]) < 2:
        return 0
    return max(0, min(3, int.from_bytes(protocols[0][1][:2], "big", signed=True)))


def encode_for(member: ConsumerGroupMember, partitions: Partitions, image: ClusterImage) -> bytes:
    protocols = member.classic.protocols if member.classic is not None else ()
    return encode_assignment(
        ConsumerProtocolAssignment(partitions=names_of(partitions, image)), embedded_version(protocols)
    )


def _cancel_classic_timers(ctx: Ctx, group: ClassicGroup) -> None:
    ctx.timers.cancel(rebalance.join_phase_key(group.group_id))
    ctx.timers.cancel(rebalance.sync_phase_key(group.group_id))
    for member_id in list(group.members) + list(group.pending_join_members):
        ctx.timers.cancel(rebalance.session_key(group.group_id, member_id))


def _retire_classic(ctx: Ctx, groups: Groups, group: ClassicGroup) -> None:
    """The classic group leaves the namespace (its members, if any, go on in a consumer group)."""
    ctx.emit(new_group_tombstone(group.group_id))
    _cancel_classic_timers(ctx, group)
    groups.remove(ctx.journal, group.group_id)
    ctx.journal.undo(_state_restorer(group))
    for member in group.members.values():
        rebalance.member_left(ctx, group, member, "converted")
    group.transition(ClassicGroupState.DEAD, ctx.now_ms)
    ctx.event(rebalance.classic_state_changed(group))
    ctx.event(GroupDeleted(group.group_id, "classic"))


def _state_restorer(group: ClassicGroup) -> Callable[[], None]:
    state, previous, since = group.state, group.previous_state, group.state_timestamp_ms

    def restore() -> None:
        group.state, group.previous_state, group.state_timestamp_ms = state, previous, since

    return restore


def drop_empty_classic_group(ctx: Ctx, groups: Groups, group: ClassicGroup) -> None:
    """An empty classic group is replaced by a consumer group, whatever the policy."""
    _retire_classic(ctx, groups, group)


def drop_empty_consumer_group(ctx: Ctx, groups: Groups, group: ConsumerGroup) -> None:
    """An empty consumer group is replaced by a classic group, whatever the policy."""
    ConsumerWrites(ctx, groups).delete_group(group)


# ----------------------------------------------------------------------------------------------- upgrade
def upgrade(ctx: Ctx, groups: Groups, classic: ClassicGroup, *, joining_member_id: str) -> ConsumerGroup:
    """Turn a non-empty classic group into a consumer group (the joining consumer-protocol member is then
    processed as usual). Raises GROUP_ID_NOT_FOUND when the upgrade is not allowed (Kafka's
    ``validateOnlineUpgrade``), then GROUP_MAX_SIZE_REACHED when the converted group would have no room
    for the joining member (Kafka's check right after the conversion, made here before it)."""
    gid = classic.group_id
    if not ctx.config.allows_upgrade():
        raise _not_found(gid, f"the migration policy is {ctx.config.consumer_group_migration_policy}")
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        raise _not_found(gid, f"its protocol type is {classic.protocol_type!r}")
    if len(classic.members) > ctx.config.consumer_group_max_size:
        raise _not_found(gid, "it has more members than the consumer group maximum size")
    max_size = ctx.config.consumer_group_max_size
    if len(classic.members) >= max_size and joining_member_id not in classic.members:
        raise group_full(max_size)
    if classic.assignments_cleared and not classic.is_in(ClassicGroupState.EMPTY):
        # The stored assignments were cleared (a rebalance restarted from CompletingRebalance) while
        # cooperative members may still own partitions of the generation before, and no SyncGroup has stored
        # new ones yet (the following join phase and CompletingRebalance included): converting now could hand
        # those partitions out twice. The classic rebalance ends within its timeouts; the joining member
        # retries (a retriable coordinator error). Kafka converts regardless (docs/protocol.md, "Where
        # regroup departs from Kafka").
        raise ApiError(
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            f"Classic group {gid} is between generations; the upgrade waits until its rebalance completes.",
        )
    converted: list[ConsumerGroupMember] = []
    for m in classic.members.values():
        try:
            sub = decode_subscription(m.metadata(classic.protocol_name) or m.protocols[0][1])
            assignment = decode_assignment(m.assignment).partitions if m.assignment else {}
        except (ProtocolDecodeError, IndexError) as exc:
            raise _not_found(gid, f"member {m.member_id} has undecodable metadata ({exc})") from None
        converted.append(
            ConsumerGroupMember(
                member_id=m.member_id,
                instance_id=m.group_instance_id,
                rack_id=sub.rack,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(sub.topics))),
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                classic=ClassicProtocolMetadata(session_timeout_ms=m.session_timeout_ms, protocols=m.protocols),
                member_epoch=classic.generation,
                previous_member_epoch=classic.generation,
                state=ConsumerGroupMemberState.STABLE,
                assigned=ids_of(dict(assignment), groups.image),
            )
        )
    # parked requests of the classic group learn that the group changed under them
    for m in classic.members.values():
        if m.awaiting_join_key is not None:
            ctx.complete(
                m.awaiting_join_key, JoinGroupResponse(error=ErrorCode.REBALANCE_IN_PROGRESS, member_id=m.member_id)
            )
            ctx.journal.set(m, "awaiting_join_key", None)
        if m.awaiting_sync_key is not None:
            ctx.complete(m.awaiting_sync_key, SyncGroupResponse(error=ErrorCode.REBALANCE_IN_PROGRESS))
            ctx.journal.set(m, "awaiting_sync_key", None)
    _retire_classic(ctx, groups, classic)
    writes = ConsumerWrites(ctx, groups)
    group = ConsumerGroup(group_id=gid)
    groups.add(ctx.journal, group)
    ctx.event(GroupCreated(gid, "consumer"))
    for member in converted:
        writes.member_metadata(gid, member)
    writes.group_epoch(gid, classic.generation)
    # no subscription metadata, as in Kafka: the joining member's heartbeat computes it, finds it changed and
    # bumps the group epoch, so the target is computed afresh, covering partitions no stored assignment named
    # (a member that left while the classic group rebalanced) even when the joiner only takes a static
    # member's place
    for member in converted:
        writes.target(gid, member.member_id, member.assigned)
    writes.target_epoch(gid, classic.generation, ctx.config.consumer_group_assignors[0])
    for member in converted:
        writes.current_assignment(gid, member)
        schedule_session(ctx, group, group.members[member.member_id])
    ctx.journal.set(group, "metadata_refresh_needed", True)
    return group


# --------------------------------------------------------------------------------------------- downgrade
def downgrade_allowed_on_fence(ctx: Ctx, group: ConsumerGroup, leaving_member_id: str) -> bool:
    """Kafka's ``validateOnlineDowngradeWithFencedMember``: the leaving member is the last one speaking the
    consumer protocol, classic members remain, the policy allows it and they fit in a classic group."""
    leaving = group.members.get(leaving_member_id)
    if leaving is None or leaving.classic is not None or len(group.members) < 2:
        return False
    # (stops at the first other consumer-protocol member: in a consumer group with no classic member, the first
    # or second it looks at, instead of a walk over every member on every leave)
    for member in group.members.values():
        if member.classic is None and member.member_id != leaving_member_id:
            return False
    return ctx.config.allows_downgrade() and len(group.members) - 1 <= ctx.config.group_max_size


def downgrade(
    ctx: Ctx,
    groups: Groups,
    group: ConsumerGroup,
    *,
    leaving_member_id: str,
    joining: ClassicGroupMember | None = None,
    reason: LeaveReason = "replaced",
) -> ClassicGroup:
    """Turn the consumer group into a classic group without ``leaving_member_id``. Every member's classic
    assignment is what it holds (assigned plus pending revocation), not its target as in Kafka: a target may
    name a partition another member still has to revoke. Without a ``joining`` member, the classic group
    starts a rebalance at once; with one (a static member taking the leaving member's place), it inherits
    what the leaving member held and the group stays Stable, as in Kafka, unless what the members hold may
    leave a partition without an owner: the target is behind the group epoch or the subscribed topics
    changed since it was computed (Kafka refreshes both before converting; here the conversion comes first),
    or it names a partition nobody holds (a static member that left with epoch -2 reconciles nothing, so a
    target it got while away is not what it holds). Kafka's classic group would own those partitions
    through the targets; this one rebalances instead (its leader, which never saw a JoinGroup naming it,
    would not notice them either)."""
    gid = group.group_id
    rebalance_needed = (
        joining is None
        or group.group_epoch > group.assignment_epoch
        or subscription_metadata(subscribed_names(group), groups.image) != group.subscribed_topics
        or _targets_not_held(group)
    )
    # born Stable, as Kafka's ClassicGroup.fromConsumerGroup creates it (a new group, not a transition)
    classic = ClassicGroup(
        group_id=gid,
        state=ClassicGroupState.STABLE,
        generation=group.group_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        state_timestamp_ms=ctx.now_ms,
    )
    for m in group.members.values():
        if m.member_id == leaving_member_id:
            if joining is not None:
                joining.assignment = encode_assignment(
                    ConsumerProtocolAssignment(partitions=names_of(holdings(m), groups.image)),
                    embedded_version(joining.protocols),
                )
                classic.add(joining)
            continue
        assert m.classic is not None
        classic.add(
            ClassicGroupMember(
                member_id=m.member_id,
                group_instance_id=m.instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.classic.session_timeout_ms,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=m.classic.protocols,
                assignment=encode_for(m, holdings(m), groups.image),
            )
        )
    classic.protocol_name = classic.select_protocol()
    for member_id in list(group.members):
        cancel_timers(ctx, group, member_id)
    ConsumerWrites(ctx, groups).delete_group(group, "converted", leaving=(leaving_member_id, reason))
    groups.add(ctx.journal, classic)
    ctx.emit(new_group_metadata_record(gid, classic.to_record_value()))
    rebalance.announce_group(ctx, classic)
    for cm in classic.members.values():
        rebalance.schedule_session(ctx, classic, cm.member_id, cm.session_timeout_ms)
    if rebalance_needed:
        rebalance.prepare_rebalance(ctx, classic)
    return classic


def _targets_not_held(group: ConsumerGroup) -> bool:
    """Some member's target names a partition no member holds."""
    held: set[tuple[uuid.UUID, int]] = set()
    for m in group.members.values():
        held.update((t, p) for t, ps in holdings(m).items() for p in ps)
    return any((t, p) not in held for target in group.targets.values() for t, ps in target.items() for p in ps)
