"""The answers of the group-inspection APIs (ListGroups, DescribeGroups, ConsumerGroupDescribe,
ShareGroupDescribe) for many groups or members, encoded a chunk of items at a time with the event loop given back
between chunks.

The handler reads what it answers from the core in its first step (``read``: one coordinator call, so a request
pipelined behind it on the same connection sees the state after it, never a half of it): the core hands back
plain rows, cheap to take (``coordinator/inspect.py``'s ``listed_rows`` and ``described_rows``,
``coordinator/consumer/describe.py``'s ``consumer_group_rows``, ``coordinator/share/describe.py``'s
``share_group_rows``: about 0.5 µs a group or member). Turning the rows into the answer's bytes is the rest, and
is done here a chunk at a time (``Pacer``, the handlers weighing each item by its size, ``read_pacer`` counting the
read itself): ListGroups groups and DescribeGroups members are written by hand from their kio entity's fields
(``flat_plan``: strings, nullable strings and bytes, no tagged fields; about 1-2 µs an item where kio takes 8),
ConsumerGroupDescribe and ShareGroupDescribe members by ``consumer_member`` and ``share_member`` (their layouts
checked against kio's classes first; about 15 µs a member with its assignments where kio takes 50); anything
else is built and written by kio item by item (``encode_items``). ``encoded.splice`` writes the fields around
each array (``spliced``: a big array joined in a step of its own), so the bytes are kio's encoding of the
straightforward response (tests/server_data/test_inspection_answers.py holds them equal). An answer of at most
one chunk never yields, so it still costs no task (``network/eager.py``)."""

from __future__ import annotations

import dataclasses
import io
import struct
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from kio.serial import entity_writer

from regroup.coordinator.result import Completion, Result
from regroup.server import share_answers
from regroup.server.api import Broker
from regroup.server.encoded import PreEncoded, array_header, entity_bytes, response_type, splice
from regroup.server.entities import build
from regroup.server.offset_answers import Pacer, pause

__all__ = [
    "element_class",
    "encode_array",
    "encode_items",
    "entity_bytes",
    "flat_plan",
    "read",
    "read_pacer",
    "spliced",
]

_STRING, _NULLABLE_STRING, _BYTES = 0, 1, 2
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")
_INT16_MAX = 0x7FFF
#: per kind: the encoding of a length (or -1 for null) in flexible versions, and before them
_NULL = {True: b"\x00", False: b"\xff\xff"}
#: an item's fields as a flat plan: (field names, their kinds, flexible)
FlatPlan = tuple[tuple[str, ...], tuple[int, ...], bool]


async def read(broker: Broker, query: Callable[[Any], Any]) -> Any:
    """What ``query(coordinator)`` returns, read in one coordinator call (the handler's first step), after the
    timers due fired, as the coordinator's own operations see the groups (``GroupCoordinator.advance``; with
    nothing due the read writes no record and is answered on the runtime's fast path)."""

    def op(coordinator: Any, key: Any, now_ms: int) -> Result:
        result: Result = coordinator.advance(now_ms, paced=False)
        result.completions.append(Completion(key, query(coordinator)))
        return result

    return await broker.coordinator.call(op)


def read_pacer(units: int) -> Pacer:
    """A ``Pacer`` that counts the core read of ``units`` items as a chunk's work done: an answer of more than a
    chunk yields once right after its read, before it encodes anything."""
    pacer = Pacer()
    pacer.due(units)
    return pacer


_ELEMENTS: dict[tuple[type[Any], str], type[Any]] = {}


def element_class(entity_class: type[Any], field: str) -> type[Any]:
    """The kio entity class of the items of ``entity_class``'s array field ``field``."""
    found = _ELEMENTS.get((entity_class, field))
    if found is None:
        found = _ELEMENTS[(entity_class, field)] = _element_class(entity_class, field)
    return found


def _element_class(entity_class: type[Any], field: str) -> type[Any]:
    hint = typing.get_type_hints(entity_class)[field]
    for candidate in typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,):
        args = typing.get_args(candidate)
        if typing.get_origin(candidate) is tuple and args and dataclasses.is_dataclass(args[0]):
            return typing.cast(type[Any], args[0])
    raise TypeError(f"{entity_class.__name__}.{field} is not an array of entities")


async def encode_items(
    item_class: type[Any],
    items: Iterable[Any],
    pacer: Pacer,
    fields: Callable[[Any], dict[str, Any]],
    weight: int | Callable[[Any], int] = 1,
) -> list[bytes]:
    """Each of ``items`` as an ``item_class`` entity built from ``fields(item)``: packed by hand when the class is
    one ``share_answers`` packs, else encoded by kio; ``pacer`` counts ``weight`` units an item, or ``weight(item)``
    (and asks for the yields)."""
    write = entity_writer(item_class)
    packed = share_answers.writer_for(item_class)
    plan = flat_plan(item_class)
    buffer = io.BytesIO()
    out: list[bytes] = []
    for item in items:
        if pacer.due(weight if isinstance(weight, int) else weight(item)):
            await pause()
        values = fields(item)
        if packed is not None:
            out.append(packed(values))
            continue
        encoded = None if plan is None else _flat(plan, values)
        if encoded is None:
            buffer.seek(0)
            buffer.truncate()
            write(buffer, build(item_class, **values))
            encoded = buffer.getvalue()
        out.append(encoded)
    return out


_PLANS: dict[type[Any], FlatPlan | None] = {}


def flat_plan(item_class: type[Any]) -> FlatPlan | None:
    """How to write ``item_class`` by hand when its fields are all strings, nullable strings and bytes with no
    tagged fields (a ListGroups group, a DescribeGroups member), else None (kio writes it)."""
    if item_class not in _PLANS:
        _PLANS[item_class] = _flat_plan(item_class)
    return _PLANS[item_class]


def _flat_plan(item_class: type[Any]) -> FlatPlan | None:
    hints = typing.get_type_hints(item_class)
    names: list[str] = []
    kinds: list[int] = []
    for f in dataclasses.fields(item_class):
        kafka_type = f.metadata.get("kafka_type")
        nullable = type(None) in typing.get_args(hints[f.name])
        if f.metadata.get("tag") is not None:
            return None
        if kafka_type == "string":
            kinds.append(_NULLABLE_STRING if nullable else _STRING)
        elif kafka_type == "bytes" and not nullable:
            kinds.append(_BYTES)
        else:
            return None
        names.append(f.name)
    return tuple(names), tuple(kinds), bool(item_class.__flexible__)


def _flat(plan: FlatPlan, values: dict[str, Any]) -> bytes | None:
    """The item ``values`` describe written by ``plan``, as kio writes it; None for a value kio would refuse (a
    string too long for an int16 length, a null where none is allowed): kio then writes it, and raises."""
    names, kinds, flexible = plan
    parts: list[bytes] = []
    for name, kind in zip(names, kinds, strict=True):
        value = values.get(name)
        if value is None:
            if kind != _NULLABLE_STRING:
                return None
            parts.append(_NULL[flexible])
            continue
        data = value.encode() if kind != _BYTES else bytes(value)
        if flexible:
            parts.append(array_header(len(data), True))
        elif kind == _BYTES:
            parts.append(_INT32.pack(len(data)))
        elif len(data) <= _INT16_MAX:
            parts.append(_INT16.pack(len(data)))
        else:
            return None
        parts.append(data)
    if flexible:
        parts.append(b"\x00")  # no tagged fields
    return b"".join(parts)


async def encode_array(
    empty: Any,
    field: str,
    items: Sequence[Any],
    fields: Callable[[Any], dict[str, Any]],
    error_codes: Iterable[int] = (),
    weight: int = 1,
    pacer: Pacer | None = None,
) -> PreEncoded:
    """The answer ``empty`` (an entity whose array ``field`` is empty) with ``items`` in that array, each item
    built from ``fields(item)``; ``error_codes``: the non-zero error codes the answer carries (for the metrics)."""
    pacer = pacer or Pacer()
    parts = await encode_items(element_class(type(empty), field), items, pacer, fields, weight)
    body = await spliced(empty, field, parts, pacer)
    return PreEncoded(response_type(empty), body, tuple(int(code) for code in error_codes if code))


async def topics_answer(
    empty: Any, topics: Sequence[dict[str, Any]], weight: int = 1, pacer: Pacer | None = None
) -> PreEncoded:
    """The answer ``empty`` (its ``responses`` array empty) with ``topics``: each a dict of a topic's fields whose
    ``partitions`` are dicts of each partition's, written ``weight`` units a partition between yields (a share
    group's answers of thousands of partitions; ``encode_items``); the partitions' non-zero error codes counted."""
    pacer = pacer or Pacer()
    topic_class = element_class(type(empty), "responses")
    partition_class = element_class(topic_class, "partitions")
    written: list[bytes] = []
    for topic in topics:
        parts = await encode_items(partition_class, topic["partitions"], pacer, _as_given, weight)
        head = build(topic_class, **{**topic, "partitions": []})
        written.append(await spliced(head, "partitions", parts, pacer))
    errors = tuple(int(p["error_code"]) for topic in topics for p in topic["partitions"] if p["error_code"])
    return PreEncoded(response_type(empty), await spliced(empty, "responses", written, pacer), errors)


def _as_given(fields: dict[str, Any]) -> dict[str, Any]:
    return fields


async def spliced(entity: Any, field: str, parts: list[bytes], pacer: Pacer) -> bytes:
    """``encoded.splice`` of ``parts``, the join counted as work (an eighth of a unit a part): after a full chunk,
    a big array is joined in a step of its own."""
    if pacer.due(len(parts) // 8):
        await pause()
    return splice(entity, field, len(parts), parts)


# ------------------------------------------------------------------------------ ConsumerGroupDescribe members
#: the fields of a ConsumerGroupDescribe member (v0; v1 adds ``member_type``), the layout ``consumer_member``
#: writes: a member class with other fields is written by kio
CONSUMER_MEMBER_FIELDS: Final = (
    "member_id",
    "instance_id",
    "rack_id",
    "member_epoch",
    "client_id",
    "client_host",
    "subscribed_topic_names",
    "subscribed_topic_regex",
    "assignment",
    "target_assignment",
)
_MEMBER_TYPE = "member_type"
_INT8 = struct.Struct(">b")


def consumer_member_layout(member_class: type[Any]) -> bool | None:
    """Whether ``member_class`` (a ConsumerGroupDescribe member) carries ``member_type``, or None when its fields
    are not the layout ``consumer_member`` writes."""
    names = tuple(f.name for f in dataclasses.fields(member_class))
    if not member_class.__flexible__ or any(
        f.metadata.get("tag") is not None for f in dataclasses.fields(member_class)
    ):
        return None
    if names == CONSUMER_MEMBER_FIELDS:
        return False
    if names == (*CONSUMER_MEMBER_FIELDS, _MEMBER_TYPE):
        return True
    return None


def _compact(value: str) -> bytes:
    data = value.encode()
    return array_header(len(data), True) + data


def _nullable_compact(value: str | None) -> bytes:
    return b"\x00" if value is None else _compact(value)


def _assignment(rows: Sequence[Any]) -> bytes:
    """An Assignment: its topics (id, name, partitions), each and itself with no tagged fields."""
    parts = [array_header(len(rows), True)]
    for row in rows:
        partitions = row.partitions
        parts.append(row.topic_id.bytes)
        parts.append(_compact(row.topic_name))
        parts.append(array_header(len(partitions), True))
        parts.append(struct.pack(f">{len(partitions)}i", *partitions))
        parts.append(b"\x00")
    parts.append(b"\x00")
    return b"".join(parts)


def consumer_member(member: Any, member_type: int | None) -> bytes:
    """A ConsumerGroupDescribe member (a ``protocol.consumer.DescribedConsumerMember``) as kio writes it;
    ``member_type`` for v1 (KIP-1099), None for v0."""
    names = member.subscribed_topic_names
    parts = [
        _compact(member.member_id),
        _nullable_compact(member.instance_id),
        _nullable_compact(member.rack_id),
        _INT32.pack(member.member_epoch),
        _compact(member.client_id),
        _compact(member.client_host),
        array_header(len(names), True),
        *[_compact(name) for name in names],
        _nullable_compact(member.subscribed_topic_regex),
        _assignment(member.assignment),
        _assignment(member.target_assignment),
    ]
    if member_type is not None:
        parts.append(_INT8.pack(member_type))
    parts.append(b"\x00")
    return b"".join(parts)


# --------------------------------------------------------------------------------- ShareGroupDescribe members
#: the fields of a ShareGroupDescribe member (v1), the layout ``share_member`` writes
SHARE_MEMBER_FIELDS: Final = (
    "member_id",
    "rack_id",
    "member_epoch",
    "client_id",
    "client_host",
    "subscribed_topic_names",
    "assignment",
)


def share_member_layout(member_class: type[Any]) -> bool:
    """Whether ``member_class`` (a ShareGroupDescribe member) has the fields ``share_member`` writes."""
    fields = dataclasses.fields(member_class)
    tagged = any(f.metadata.get("tag") is not None for f in fields)
    return bool(member_class.__flexible__) and not tagged and tuple(f.name for f in fields) == SHARE_MEMBER_FIELDS


def share_member(member: Any) -> bytes:
    """A ShareGroupDescribe member (a ``protocol.share.DescribedShareMember``) as kio writes it."""
    names = member.subscribed_topic_names
    parts = [
        _compact(member.member_id),
        _nullable_compact(member.rack_id),
        _INT32.pack(member.member_epoch),
        _compact(member.client_id),
        _compact(member.client_host),
        array_header(len(names), True),
        *[_compact(name) for name in names],
        _assignment(member.assignment),
        b"\x00",
    ]
    return b"".join(parts)
