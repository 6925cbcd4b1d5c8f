"""The member arrays of the leader's JoinGroup answer and of a batched LeaveGroup's answer, encoded by hand a
chunk at a time with the event loop given back between chunks.

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
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from regroup.protocol.classic import JoinGroupMember, LeaveGroupMemberResponse
from regroup.server.encoded import PreEncoded, array_header, response_type, splice_pieces
from regroup.server.offset_answers import CHUNK, Pacer, nullable_string, pause, string

__all__ = ["JOIN_INSTANCE_ID_FROM", "join_members", "leave_members"]

#: the first JoinGroup version whose members carry their group instance id (KIP-345)
JOIN_INSTANCE_ID_FROM = 5

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


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
