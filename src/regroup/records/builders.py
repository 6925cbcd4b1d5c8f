"""``new_xxx_record`` helpers: the only place records are constructed."""

from __future__ import annotations

from regroup.records.model import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
)


def new_group_metadata_record(group_id: str, value: GroupMetadataValue) -> Record:
    return Record(GroupMetadataKey(group_id=group_id), value)


def new_group_tombstone(group_id: str) -> Record:
    return Record(GroupMetadataKey(group_id=group_id), None)


def new_offset_commit_record(group_id: str, topic: str, partition: int, value: OffsetCommitValue) -> Record:
    return Record(OffsetCommitKey(group_id=group_id, topic=topic, partition=partition), value)


def new_offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    return Record(OffsetCommitKey(group_id=group_id, topic=topic, partition=partition), None)
