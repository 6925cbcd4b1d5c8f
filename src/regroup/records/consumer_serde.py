"""JSON forms of the consumer-group records (see ``records.consumer``), used by ``records.serde``.

Each record is ``{"k": <kind>, "group": ..., ["member": ...,] ["regex": ...,] "v": <value or null>}``; topic ids are
strings, classic protocol metadata base64."""

from __future__ import annotations

import base64
import uuid
from typing import Any

from regroup.records.consumer import (
    ClassicProtocolMetadata,
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
    ConsumerRecordKey,
    ConsumerRecordValue,
    PartitionSet,
    SubscribedTopic,
)

KINDS = {
    ConsumerGroupMetadataKey: "cg-epoch",
    ConsumerGroupPartitionMetadataKey: "cg-topics",
    ConsumerGroupMemberMetadataKey: "cg-member",
    ConsumerGroupTargetAssignmentMetadataKey: "cg-target-epoch",
    ConsumerGroupTargetAssignmentMemberKey: "cg-target",
    ConsumerGroupCurrentMemberAssignmentKey: "cg-current",
    ConsumerGroupRegularExpressionKey: "cg-regex",
}
KEY_OF_KIND = {kind: key_type for key_type, kind in KINDS.items()}


def _parts_out(parts: PartitionSet) -> list[list[Any]]:
    return [[str(topic_id), list(partitions)] for topic_id, partitions in parts]


def _parts_in(doc: Any) -> PartitionSet:
    return tuple((uuid.UUID(str(t)), tuple(int(p) for p in ps)) for t, ps in doc)


def encode_consumer(key: ConsumerRecordKey, value: ConsumerRecordValue | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"k": KINDS[type(key)], "group": key.group_id}
    member = getattr(key, "member_id", None)
    if member is not None:
        doc["member"] = member
    if isinstance(key, ConsumerGroupRegularExpressionKey):
        doc["regex"] = key.regex
    doc["v"] = None if value is None else _value_out(value)
    return doc


def _value_out(value: ConsumerRecordValue) -> dict[str, Any]:
    if isinstance(value, ConsumerGroupMetadataValue):
        return {"epoch": value.epoch}
    if isinstance(value, ConsumerGroupPartitionMetadataValue):
        return {
            "topics": [
                {"id": str(t.topic_id), "name": t.name, "partitions": t.partitions, "racks": [list(r) for r in t.racks]}
                for t in value.topics
            ]
        }
    if isinstance(value, ConsumerGroupMemberMetadataValue):
        classic = value.classic
        return {
            "instance": value.instance_id,
            "rack": value.rack_id,
            "client_id": value.client_id,
            "host": value.client_host,
            "topics": list(value.subscribed_topic_names),
            "regex": value.subscribed_topic_regex,
            "assignor": value.server_assignor,
            "rebalance_ms": value.rebalance_timeout_ms,
            "classic": None
            if classic is None
            else {
                "session_ms": classic.session_timeout_ms,
                "protocols": [[n, base64.b64encode(m).decode("ascii")] for n, m in classic.protocols],
            },
        }
    if isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        if value.assignment_timestamp_ms:
            return {"epoch": value.assignment_epoch, "at_ms": value.assignment_timestamp_ms}
        return {"epoch": value.assignment_epoch}
    if isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        return {"partitions": _parts_out(value.partitions)}
    if isinstance(value, ConsumerGroupRegularExpressionValue):
        return {"topics": list(value.topics), "resolved_ms": value.resolved_at_ms}
    return {
        "epoch": value.member_epoch,
        "previous_epoch": value.previous_member_epoch,
        "state": value.state,
        "assigned": _parts_out(value.assigned),
        "revoking": _parts_out(value.pending_revocation),
    }


def decode_consumer(doc: dict[str, Any]) -> tuple[ConsumerRecordKey, ConsumerRecordValue | None]:
    """Raises KeyError/ValueError/TypeError on malformed input (the caller turns them into one error)."""
    kind = doc["k"]
    group = str(doc["group"])
    v = doc["v"]
    key: ConsumerRecordKey
    if kind == "cg-epoch":
        key = ConsumerGroupMetadataKey(group_id=group)
        return key, None if v is None else ConsumerGroupMetadataValue(epoch=int(v["epoch"]))
    if kind == "cg-topics":
        key = ConsumerGroupPartitionMetadataKey(group_id=group)
        if v is None:
            return key, None
        topics = tuple(
            SubscribedTopic(
                topic_id=uuid.UUID(str(t["id"])),
                name=str(t["name"]),
                partitions=int(t["partitions"]),
                racks=tuple(tuple(str(r) for r in racks) for racks in t["racks"]),
            )
            for t in v["topics"]
        )
        return key, ConsumerGroupPartitionMetadataValue(topics=topics)
    if kind == "cg-target-epoch":
        key = ConsumerGroupTargetAssignmentMetadataKey(group_id=group)
        if v is None:
            return key, None
        at_ms = int(v.get("at_ms", 0))
        return key, ConsumerGroupTargetAssignmentMetadataValue(
            assignment_epoch=int(v["epoch"]), assignment_timestamp_ms=at_ms
        )
    if kind == "cg-regex":
        key = ConsumerGroupRegularExpressionKey(group_id=group, regex=str(doc["regex"]))
        if v is None:
            return key, None
        matched = tuple(str(t) for t in v["topics"])
        return key, ConsumerGroupRegularExpressionValue(topics=matched, resolved_at_ms=int(v["resolved_ms"]))
    member = str(doc["member"])
    if kind == "cg-member":
        key = ConsumerGroupMemberMetadataKey(group_id=group, member_id=member)
        if v is None:
            return key, None
        c = v["classic"]
        classic = (
            None
            if c is None
            else ClassicProtocolMetadata(
                session_timeout_ms=int(c["session_ms"]),
                protocols=tuple((str(n), base64.b64decode(m, validate=True)) for n, m in c["protocols"]),
            )
        )
        return key, ConsumerGroupMemberMetadataValue(
            instance_id=v["instance"],
            rack_id=v["rack"],
            client_id=str(v["client_id"]),
            client_host=str(v["host"]),
            subscribed_topic_names=tuple(str(t) for t in v["topics"]),
            subscribed_topic_regex=v["regex"],
            server_assignor=v["assignor"],
            rebalance_timeout_ms=int(v["rebalance_ms"]),
            classic=classic,
        )
    if kind == "cg-target":
        key = ConsumerGroupTargetAssignmentMemberKey(group_id=group, member_id=member)
        return key, None if v is None else ConsumerGroupTargetAssignmentMemberValue(
            partitions=_parts_in(v["partitions"])
        )
    if kind == "cg-current":
        key = ConsumerGroupCurrentMemberAssignmentKey(group_id=group, member_id=member)
        if v is None:
            return key, None
        return key, ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=int(v["epoch"]),
            previous_member_epoch=int(v["previous_epoch"]),
            state=str(v["state"]),
            assigned=_parts_in(v["assigned"]),
            pending_revocation=_parts_in(v["revoking"]),
        )
    raise ValueError(f"unknown record kind {kind!r}")
