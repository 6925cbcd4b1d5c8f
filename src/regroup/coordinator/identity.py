"""Kafka's static-membership identity rule (KIP-345), the one check every group type and API applies to a
request that names a ``group.instance.id``: the instance must be known, and held by the member id sent."""

from __future__ import annotations

from collections.abc import Mapping

from regroup.model.errors import ApiError, ErrorCode


def static_holder(static_members: Mapping[str, str], instance_id: str, member_id: str | None) -> str:
    """The member id holding ``instance_id`` (``static_members``: instance id -> member id). An unknown
    instance id is UNKNOWN_MEMBER_ID; one held by another member id is FENCED_INSTANCE_ID. ``member_id`` None
    (a LeaveGroup that names only the instance) matches whichever member holds it."""
    holder = static_members.get(instance_id)
    if holder is None:
        raise ApiError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member_id is not None and holder != member_id:
        raise ApiError(
            ErrorCode.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member {holder}.",
        )
    return holder
