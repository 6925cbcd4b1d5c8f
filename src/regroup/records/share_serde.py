"""JSON forms of the share-group records (see ``records.share``), used by ``records.serde``.

Each record is ``{"k": <kind>, "group": ..., ["member": ...,] ["topic": ..., "partition": ...,] "v": <value or
null>}``; topic ids are strings."""

from __future__ import annotations

import uuid
from typing import Any

from regroup.records.share import (
    PartitionSet,
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    SharePartitionStateBatch,
    SharePartitionStateKey,
    SharePartitionStateValue,
    ShareRecordKey,
    ShareRecordValue,
)

SHARE_KINDS = {
    ShareGroupMetadataKey: "sg-epoch",
    ShareGroupMemberMetadataKey: "sg-member",
    ShareGroupTargetAssignmentMetadataKey: "sg-target-epoch",
    ShareGroupTargetAssignmentMemberKey: "sg-target",
    ShareGroupCurrentMemberAssignmentKey: "sg-current",
    SharePartitionStateKey: "sg-state",
}
SHARE_KEY_OF_KIND = {kind: key_type for key_type, kind in SHARE_KINDS.items()}


def _parts_out(parts: PartitionSet) -> list[list[Any]]:
    return [[str(topic_id), list(partitions)] for topic_id, partitions in parts]


def _parts_in(doc: Any) -> PartitionSet:
    return tuple((uuid.UUID(str(t)), tuple(int(p) for p in ps)) for t, ps in doc)


def encode_share(key: ShareRecordKey, value: ShareRecordValue | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"k": SHARE_KINDS[type(key)], "group": key.group_id}
    if isinstance(key, SharePartitionStateKey):
        doc["topic"] = str(key.topic_id)
        doc["partition"] = key.partition
    elif not isinstance(key, (ShareGroupMetadataKey, ShareGroupTargetAssignmentMetadataKey)):
        doc["member"] = key.member_id
    doc["v"] = None if value is None else _value_out(value)
    return doc


def _value_out(value: ShareRecordValue) -> dict[str, Any]:
    if isinstance(value, ShareGroupMetadataValue):
        return {"epoch": value.epoch}
    if isinstance(value, ShareGroupMemberMetadataValue):
        return {
            "rack": value.rack_id,
            "client_id": value.client_id,
            "host": value.client_host,
            "topics": list(value.subscribed_topic_names),
        }
    if isinstance(value, ShareGroupTargetAssignmentMetadataValue):
        if value.assignment_timestamp_ms:
            return {"epoch": value.assignment_epoch, "at_ms": value.assignment_timestamp_ms}
        return {"epoch": value.assignment_epoch}
    if isinstance(value, ShareGroupTargetAssignmentMemberValue):
        return {"partitions": _parts_out(value.partitions)}
    if isinstance(value, ShareGroupCurrentMemberAssignmentValue):
        return {
            "epoch": value.member_epoch,
            "previous_epoch": value.previous_member_epoch,
            "assigned": _parts_out(value.assigned),
        }
    return {
        "start": value.start_offset,
        "batches": [[b.first_offset, b.last_offset, b.state, b.delivery_count] for b in value.batches],
    }


def decode_share(doc: dict[str, Any]) -> tuple[ShareRecordKey, ShareRecordValue | None]:
    """Raises KeyError/ValueError/TypeError on malformed input (the caller turns them into one error)."""
    kind = doc["k"]
    group = str(doc["group"])
    v = doc["v"]
    if kind == "sg-epoch":
        return ShareGroupMetadataKey(group_id=group), None if v is None else ShareGroupMetadataValue(
            epoch=int(v["epoch"])
        )
    if kind == "sg-target-epoch":
        key = ShareGroupTargetAssignmentMetadataKey(group_id=group)
        if v is None:
            return key, None
        at_ms = int(v.get("at_ms", 0))
        return key, ShareGroupTargetAssignmentMetadataValue(
            assignment_epoch=int(v["epoch"]), assignment_timestamp_ms=at_ms
        )
    if kind == "sg-state":
        skey = SharePartitionStateKey(
            group_id=group, topic_id=uuid.UUID(str(doc["topic"])), partition=int(doc["partition"])
        )
        if v is None:
            return skey, None
        batches = tuple(
            SharePartitionStateBatch(first_offset=int(f), last_offset=int(la), state=int(s), delivery_count=int(c))
            for f, la, s, c in v["batches"]
        )
        return skey, SharePartitionStateValue(start_offset=int(v["start"]), batches=batches)
    member = str(doc["member"])
    if kind == "sg-member":
        mkey = ShareGroupMemberMetadataKey(group_id=group, member_id=member)
        if v is None:
            return mkey, None
        return mkey, ShareGroupMemberMetadataValue(
            rack_id=None if v["rack"] is None else str(v["rack"]),
            client_id=str(v["client_id"]),
            client_host=str(v["host"]),
            subscribed_topic_names=tuple(str(t) for t in v["topics"]),
        )
    if kind == "sg-target":
        tkey = ShareGroupTargetAssignmentMemberKey(group_id=group, member_id=member)
        return tkey, None if v is None else ShareGroupTargetAssignmentMemberValue(partitions=_parts_in(v["partitions"]))
    if kind == "sg-current":
        ckey = ShareGroupCurrentMemberAssignmentKey(group_id=group, member_id=member)
        if v is None:
            return ckey, None
        return ckey, ShareGroupCurrentMemberAssignmentValue(
            member_epoch=int(v["epoch"]),
            previous_member_epoch=int(v["previous_epoch"]),
            assigned=_parts_in(v["assigned"]),
        )
    raise ValueError(f"unknown record kind {kind!r}")
