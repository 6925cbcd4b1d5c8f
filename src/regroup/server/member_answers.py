"""The classic group's answers encoded by hand: the member arrays of the leader's JoinGroup answer and of a
batched LeaveGroup's answer, a chunk at a time with the event loop given back between chunks, and every other
JoinGroup and SyncGroup answer whole.

The leader of a classic group is answered with every member's id and subscription metadata, and a LeaveGroup of
many members with each one's outcome. Built as kio entities (a dictionary, then a validated entity per member)
and written by kio's generic writer, a 10,000-member answer held the loop about 50 ms in one step. Here each
member is a few fields packed by hand, and an answer of more than ``offset_answers.CHUNK`` members yields to the
loop after each chunk (``Pacer``); the fields around the member array are kio's (``encoded.splice_pieces``). The
tests hold every version's bytes to kio's encoding of the straightforward entity.

Layouts of a member (Kafka's JSON schemas; flexible versions use compact strings and bytes and end every member
with an empty tagged-field section):

- JoinGroup (flexible from v6): member_id string, group_instance_id nullable string (v5+), metadata bytes;
- LeaveGroup v3+ (flexible from v4): member_id string, group_instance_id nullable string, error_code int16.

A 10,000-member rebalance answers 20,000 JoinGroups (the two phases of KIP-394) and 10,000 SyncGroups, none but
the leader's carrying members: built as kio entities and written by kio's writer they cost 7-10 µs each, about a
fifth of the rebalance's work on the loop; ``join_answer`` and ``sync_answer`` pack their few fields in about a
microsecond (the tests hold them to kio's bytes over every version and any field values):

- JoinGroup: throttle_time_ms int32 (v2+), error_code int16, generation_id int32, protocol_type nullable string
  (v7+), protocol_name string (nullable from v7), leader string, skip_assignment bool (v9+), member_id string,
  members array (empty here), tagged fields (v6+);
- SyncGroup: throttle_time_ms int32 (v1+), error_code int16, protocol_type and protocol_name nullable strings
  (v5+), assignment bytes, tagged fields (v4+).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from regroup.network.codec import response_class
from regroup.protocol.classic import JoinGroupMember, JoinGroupResponse, LeaveGroupMemberResponse, SyncGroupResponse
from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import CHUNK, Pacer, nullable_string, pause, string

__all__ = [
    "JOIN_INSTANCE_ID_FROM",
    "JOIN_NULLABLE_PROTOCOL_FROM",
    "SYNC_PROTOCOL_FIELDS_FROM",
    "join_answer",
    "join_members",
    "leave_members",
    "sync_answer",
]

#: the first JoinGroup version whose members carry their group instance id (KIP-345)
JOIN_INSTANCE_ID_FROM = 5
#: the first JoinGroup version with a protocol type and a nullable protocol name (KIP-559)
JOIN_NULLABLE_PROTOCOL_FROM = 7
#: the first SyncGroup version with the protocol type and name (KIP-559)
SYNC_PROTOCOL_FIELDS_FROM = 5
#: JoinGroup, SyncGroup: the first version with a throttle time, the first flexible one
_JOIN_THROTTLE_FROM, _JOIN_FLEXIBLE_FROM, _JOIN_SKIP_FROM = 2, 6, 9
_SYNC_THROTTLE_FROM, _SYNC_FLEXIBLE_FROM = 1, 4
_JOIN_GROUP, _SYNC_GROUP = 11, 14

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_ERROR_AND_GENERATION = struct.Struct(">hi")
_NO_THROTTLE = b"\x00\x00\x00\x00"


def _bytes(value: bytes, flexible: bool) -> bytes:
    """Non-null bytes: a compact length (varint of length + 1) in flexible versions, an int32 length before."""
    return (array_header(len(value), True) if flexible else _INT32.pack(len(value))) + value


async def join_members(empty: Any, members: Sequence[JoinGroupMember], version: int, error: int) -> PreEncoded:
    """The JoinGroup answer ``empty`` (the response entity of ``version``, its ``members`` empty) with
    ``members``; ``error``: its top-level error code (for the metrics)."""
    flexible = bool(type(empty).__flexible__)
    with_instance = version >= JOIN_INSTANCE_ID_FROM
    tail = b"\x00" if flexible else b""
    pacer, parts = Pacer(), list[bytes]()
    for start in range(0, len(members), CHUNK):
        chunk = members[start : start + CHUNK]
        if pacer.due(len(chunk)):
            await pause()
        if with_instance:
            parts.extend(
                [
                    string(m.member_id, flexible)
                    + nullable_string(m.group_instance_id, flexible)
                    + _bytes(m.metadata, flexible)
                    + tail
                    for m in chunk
                ]
            )
        else:
            parts.extend([string(m.member_id, flexible) + _bytes(m.metadata, flexible) + tail for m in chunk])
    body = splice_pieces(empty, "members", len(members), parts)
    return PreEncoded(response_type(empty), body, (error,) if error else ())


async def leave_members(empty: Any, members: Sequence[LeaveGroupMemberResponse], error: int) -> PreEncoded:
    """The batched LeaveGroup answer ``empty`` (the response entity of a version from 3, its ``members`` empty)
    with ``members``' outcomes; ``error``: its top-level error code (for the metrics, with the members')."""
    flexible = bool(type(empty).__flexible__)
    tail = b"\x00" if flexible else b""
    pacer, parts, errors = Pacer(), list[bytes](), [error] if error else []
    for start in range(0, len(members), CHUNK):
        chunk = members[start : start + CHUNK]
        if pacer.due(len(chunk)):
            await pause()
        parts.extend(
            [
                string(m.member_id, flexible)
                + nullable_string(m.group_instance_id, flexible)
                + _INT16.pack(m.error)
                + tail
                for m in chunk
            ]
        )
        errors.extend(int(m.error) for m in chunk if m.error)
    body = splice_pieces(empty, "members", len(members), parts)
    return PreEncoded(response_type(empty), body, tuple(errors))


def join_answer(version: int, resp: JoinGroupResponse) -> PreEncoded:
    """A JoinGroup answer of ``version`` without members (every member's but the leader's, and every error)."""
    flexible = version >= _JOIN_FLEXIBLE_FROM
    nullable = version >= JOIN_NULLABLE_PROTOCOL_FROM
    parts = [
        _NO_THROTTLE if version >= _JOIN_THROTTLE_FROM else b"",
        _ERROR_AND_GENERATION.pack(resp.error, resp.generation_id),
    ]
    if nullable:
        parts.append(nullable_string(resp.protocol_type, flexible))
        parts.append(nullable_string(resp.protocol_name, flexible))
    else:
        parts.append(string(resp.protocol_name or "", flexible))
    parts.append(string(resp.leader, flexible))
    if version >= _JOIN_SKIP_FROM:
        parts.append(b"\x01" if resp.skip_assignment else b"\x00")
    parts.append(string(resp.member_id, flexible))
    parts.append(b"\x01\x00" if flexible else b"\x00\x00\x00\x00")  # (no members; the tagged fields)
    code = int(resp.error)
    return PreEncoded(response_class(_JOIN_GROUP, version), b"".join(parts), (code,) if code else ())


def sync_answer(version: int, resp: SyncGroupResponse) -> PreEncoded:
    """A SyncGroup answer of ``version``."""
    flexible = version >= _SYNC_FLEXIBLE_FROM
    parts = [_NO_THROTTLE if version >= _SYNC_THROTTLE_FROM else b"", _INT16.pack(resp.error)]
    if version >= SYNC_PROTOCOL_FIELDS_FROM:
        parts.append(nullable_string(resp.protocol_type, flexible))
        parts.append(nullable_string(resp.protocol_name, flexible))
    parts.append(_bytes(resp.assignment, flexible))
    if flexible:
        parts.append(b"\x00")
    code = int(resp.error)
    return PreEncoded(response_class(_SYNC_GROUP, version), b"".join(parts), (code,) if code else ())
