"""The partition entries of the ShareFetch and ShareAcknowledge answers (KIP-932; both flexible in every version
served, 1 and 2), packed by hand from the handler's rows: an answer of 10,000 partitions wrote each entry through
kio's generic writer, about ten times the cost of packing it (tests/server_data/test_share_answers.py holds the
bytes equal to kio's over random rows and both versions).

A row is the dict of a partition's fields the handlers build (``handlers/share_fetch.py``): ``partition_index``,
``error_code``, ``current_leader`` (``leader_id``, ``leader_epoch``), for ShareFetch also
``acknowledge_error_code``, ``records`` and ``acquired_records`` (``first_offset``, ``last_offset``,
``delivery_count``); the error messages may be absent (null). ``writer_for`` gives the packer of a kio partition
class whose fields are the ones written here, None for any other (kio writes those)."""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any, Final

from regroup.server.encoded import array_header
from regroup.server.offset_answers import nullable_string

__all__ = ["ACKNOWLEDGE_FIELDS", "FETCH_FIELDS", "acknowledge_partition", "fetch_partition", "writer_for"]

#: the fields of a ShareFetch answer's partition, in the order the answer writes them
FETCH_FIELDS: Final = (
    "partition_index",
    "error_code",
    "error_message",
    "acknowledge_error_code",
    "acknowledge_error_message",
    "current_leader",
    "records",
    "acquired_records",
)
#: the fields of a ShareAcknowledge answer's partition, in the order the answer writes them
ACKNOWLEDGE_FIELDS: Final = ("partition_index", "error_code", "error_message", "current_leader")

_INDEX_AND_CODE = struct.Struct(">ih")
_CODE = struct.Struct(">h")
#: a leader (its id and epoch) and its empty tagged fields
_LEADER = struct.Struct(">iiB")
#: an acquired batch (first and last offsets, delivery count) and its empty tagged fields
_ACQUIRED = struct.Struct(">qqhB")
_NO_TAGS = b"\x00"

Writer = Callable[[dict[str, Any]], bytes]


def _leader(row: dict[str, Any]) -> bytes:
    leader = row["current_leader"]
    return _LEADER.pack(leader["leader_id"], leader["leader_epoch"], 0)


def fetch_partition(row: dict[str, Any]) -> bytes:
    """A ShareFetch answer's partition entry."""
    records = row["records"]
    acquired = row["acquired_records"]
    return b"".join(
        (
            _INDEX_AND_CODE.pack(row["partition_index"], row["error_code"]),
            nullable_string(row.get("error_message"), True),
            _CODE.pack(row["acknowledge_error_code"]),
            nullable_string(row.get("acknowledge_error_message"), True),
            _leader(row),
            array_header(len(records), True),
            records,
            array_header(len(acquired), True),
            *(_ACQUIRED.pack(a["first_offset"], a["last_offset"], a["delivery_count"], 0) for a in acquired),
            _NO_TAGS,
        )
    )


def acknowledge_partition(row: dict[str, Any]) -> bytes:
    """A ShareAcknowledge answer's partition entry."""
    return b"".join(
        (
            _INDEX_AND_CODE.pack(row["partition_index"], row["error_code"]),
            nullable_string(row.get("error_message"), True),
            _leader(row),
            _NO_TAGS,
        )
    )


_WRITERS: dict[type[Any], Writer | None] = {}


def writer_for(partition_class: type[Any]) -> Writer | None:
    """The packer of ``partition_class``'s entries: a flexible class whose fields are ``FETCH_FIELDS`` or
    ``ACKNOWLEDGE_FIELDS`` (with no tagged fields of their own), else None."""
    if partition_class not in _WRITERS:
        _WRITERS[partition_class] = _writer_for(partition_class)
    return _WRITERS[partition_class]


def _writer_for(partition_class: type[Any]) -> Writer | None:
    if not dataclasses.is_dataclass(partition_class) or not getattr(partition_class, "__flexible__", False):
        return None
    fields = dataclasses.fields(partition_class)
    if any(f.metadata.get("tag") is not None for f in fields):
        return None
    names = tuple(f.name for f in fields)
    if names == FETCH_FIELDS:
        return fetch_partition
    if names == ACKNOWLEDGE_FIELDS:
        return acknowledge_partition
    return None
