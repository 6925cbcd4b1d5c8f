"""Kafka's consumer embedded protocol: the bytes inside JoinGroup metadata and SyncGroup assignments.

When a classic group's protocol type is ``"consumer"`` the broker treats member metadata and assignments
as opaque bytes; this module owns their layout, byte-compatible with the Java client:

* ``ConsumerProtocolSubscription`` v0-v3 and ``ConsumerProtocolAssignment`` v0-v3: an int16 big-endian
  version, then the struct in classic (non-flexible) encoding. A version newer than v3 is read with the
  v3 layout and trailing bytes are ignored (fields are only ever appended). Lower encode versions drop
  the fields they lack, as Kafka does for its ``ignorable`` fields.
* The ``sticky`` assignor's user data (KIP-54): ``[topic, [partition]]`` then, in V1, an int32
  generation. No version prefix; decoding tries V1, then V0, then gives up with no partitions and
  generation -1.
* The ``cooperative-sticky`` assignor's user data: one int32 generation.

The ordinary subscriptions, assignments and sticky user data are read and written here with ``struct``
(see "Fast paths" below); anything else, and the cooperative user data, goes to the kio-based codec in
``consumer_protocol_kio``, which gives Kafka's exact bytes, fallbacks and errors. A subscription can also be
written from sections encoded before (its topic array and owned-partitions array, see "Sections" below), so
that a member rejoining with the same topics and partitions does not encode them again. The plain values
(``ConsumerProtocolSubscription``, ``ConsumerProtocolAssignment``, ``ProtocolDecodeError``) live in
``consumer_protocol_types`` so that both modules share them; import them from here.

Deliberate differences from the Java client: topics and owned partitions are encoded in the order given
(Java's ``serializeSubscription`` sorts them; pass sorted input for identical bytes); invalid UTF-8 in a
string and negative lengths other than -1 are rejected (Java substitutes U+FFFD and reads any negative
nullable length as null). As in Java, an empty rack id decodes as ``None`` and repeated topic entries
are merged.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Final, TypeVar

from regroup.assignors.consumer_protocol_kio import (
    kio_decode_assignment,
    kio_decode_cooperative_user_data,
    kio_decode_sticky_user_data,
    kio_decode_subscription,
    kio_encode_assignment,
    kio_encode_cooperative_user_data,
    kio_encode_sticky_user_data,
    kio_encode_subscription,
)
from regroup.assignors.consumer_protocol_types import (
    DEFAULT_GENERATION,
    HIGHEST_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    Partitions,
    ProtocolDecodeError,
)

__all__ = [
    "DEFAULT_GENERATION",
    "HIGHEST_VERSION",
    "ConsumerProtocolAssignment",
    "ConsumerProtocolSubscription",
    "Partitions",
    "ProtocolDecodeError",
    "decode_assignment",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_assignment_of",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "encode_subscription",
    "encode_subscription_sections",
    "encode_topic_list",
    "encode_topic_partitions",
]

_V = TypeVar("_V")
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_V3_PREFIX: Final = _I16.pack(HIGHEST_VERSION)
_TOPIC_NAMES: Final[dict[bytes, str]] = {}  # decoded topic names (bounded): the same names recur in every member

#: Recently decoded subscriptions and assignments by their bytes. The same bytes are decoded several times
#: on their way (a JoinGroup's metadata by whoever logs it, then by the leader; an assignment by the member
#: and by whoever logs it); the values are immutable, so each is decoded once. Bounded: cleared when full.
_SUBSCRIPTIONS: Final[dict[bytes, ConsumerProtocolSubscription]] = {}
_ASSIGNMENTS: Final[dict[bytes, ConsumerProtocolAssignment]] = {}
_REMEMBERED: Final = 4096


def _remember(memo: dict[bytes, _V], key: bytes, value: _V) -> None:
    if len(memo) >= _REMEMBERED:
        memo.clear()
    memo[key] = value


def _check_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"consumer protocol version must be 0..{HIGHEST_VERSION}, got {version}")


def encode_subscription(sub: ConsumerProtocolSubscription, version: int = HIGHEST_VERSION) -> bytes:
    """Version-prefixed subscription bytes; fields newer than ``version`` are left out."""
    _check_version(version)
    fast = _fast_subscription(sub, version)
    return fast if fast is not None else kio_encode_subscription(sub, version)


def decode_subscription(data: bytes | bytearray | memoryview) -> ConsumerProtocolSubscription:
    """Parse subscription bytes of any version; raises ``ProtocolDecodeError`` if malformed."""
    buffer = bytes(data)
    known = _SUBSCRIPTIONS.get(buffer)
    if known is not None:
        return known
    fast = _read_subscription_fast(buffer)
    decoded = fast if fast is not None else kio_decode_subscription(buffer)
    _remember(_SUBSCRIPTIONS, buffer, decoded)
    return decoded


def encode_assignment(assignment: ConsumerProtocolAssignment, version: int = HIGHEST_VERSION) -> bytes:
    """Version-prefixed assignment bytes (v0-v3 share one layout)."""
    _check_version(version)
    fast = _fast_assignment(assignment, version)
    return fast if fast is not None else kio_encode_assignment(assignment, version)


def encode_assignment_of(partitions: Partitions) -> bytes:
    """``encode_assignment(ConsumerProtocolAssignment(partitions=partitions))`` (no user data, the highest
    version) without building the ``ConsumerProtocolAssignment``."""
    fast = _fast_assignment_of(partitions, None, HIGHEST_VERSION)
    return (
        fast
        if fast is not None
        else kio_encode_assignment(ConsumerProtocolAssignment(partitions=partitions), HIGHEST_VERSION)
    )


def decode_assignment(data: bytes | bytearray | memoryview) -> ConsumerProtocolAssignment:
    """Parse assignment bytes of any version; raises ``ProtocolDecodeError`` if malformed."""
    buffer = bytes(data)
    known = _ASSIGNMENTS.get(buffer)
    if known is not None:
        return known
    fast = _read_assignment_fast(buffer)
    decoded = fast if fast is not None else kio_decode_assignment(buffer)
    _remember(_ASSIGNMENTS, buffer, decoded)
    return decoded


def encode_sticky_user_data(partitions: Mapping[str, Sequence[int]], generation: int | None) -> bytes:
    """``sticky`` user data: V1 (with ``generation``) or, when it is ``None``, the pre-generation V0."""
    try:
        out: list[bytes] = []
        _put_topic_partitions(out, partitions)
        if generation is not None:
            out.append(_I32.pack(generation))
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return kio_encode_sticky_user_data(partitions, generation)  # (which names the bad value)


def decode_sticky_user_data(data: bytes | None) -> tuple[dict[str, tuple[int, ...]], int | None]:
    """(previous assignment, generation) from ``sticky`` user data, with Kafka's fallbacks.

    No user data: nothing owned, generation unknown (``None``). V1, else V0 (generation ``None``).
    Neither parses: nothing owned, generation -1.
    """
    if not data:
        return {}, None
    buffer = bytes(data)
    fast = _decode_sticky_fast(buffer)
    return fast if fast is not None else kio_decode_sticky_user_data(buffer)


def _decode_sticky_fast(buffer: bytes) -> tuple[dict[str, tuple[int, ...]], int | None] | None:
    """The common case of ``decode_sticky_user_data`` without kio (see "Fast paths" below). Returns None
    for anything unusual so the kio path decides with Kafka's exact fallbacks."""
    try:
        read = _read_topic_partitions(buffer, 0)
        if read is None:
            return None
        grouped, pos = read
        if len(buffer) - pos >= 4:
            return grouped, _i32(buffer, pos)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return grouped, None


# --- Fast paths ----------------------------------------------------------------------------------------
# A group leader decodes every member's subscription and encodes every member's assignment on every
# rebalance, and kio's generic entity code costs tens of microseconds per topic entry (one validated
# ``i32`` per partition). These read and write the same bytes with ``struct`` for the ordinary case and
# defer to the kio paths (``consumer_protocol_kio``) for anything else: a writer on a value that does not
# fit (the kio path then raises its error naming the value), a reader on anything unusual (negative
# lengths, bad UTF-8, short data), so malformed input gets kio's verdict. Tests check fast and kio paths
# agree, byte for byte and value for value, on generated values and on truncated or arbitrary bytes.
_TOPIC_BYTES: Final[dict[str, bytes]] = {}  # encoded topic names (bounded), the counterpart of _TOPIC_NAMES


def _name_bytes(name: str) -> bytes:
    raw = _TOPIC_BYTES.get(name)
    if raw is None:
        encoded = name.encode("utf-8")
        raw = _I16.pack(len(encoded)) + encoded
        if len(_TOPIC_BYTES) < 65_536:
            _TOPIC_BYTES[name] = raw
    return raw


#: encoded partition arrays (int32 count, then each int32) by their tuple (bounded: cleared when full); a
#: leader encodes the same per-topic partitions for a member generation after generation
_PARTITION_BYTES: Final[dict[tuple[int, ...], bytes]] = {}
_INT_ARRAYS: Final[dict[int, struct.Struct]] = {}  # ">{n}i" by n (bounded)


def _ints(count: int) -> struct.Struct:
    """The ``struct.Struct`` of ``count`` big-endian int32s (compiled once per count)."""
    found = _INT_ARRAYS.get(count)
    if found is None:
        found = struct.Struct(f">{count}i")
        if len(_INT_ARRAYS) < 4096:
            _INT_ARRAYS[count] = found
    return found


def _partition_bytes(partitions: Sequence[int]) -> bytes:
    """``[int32]``: the count, then each partition (raises ``struct.error`` for a value that does not fit)."""
    if type(partitions) is not tuple:
        return _ints(len(partitions) + 1).pack(len(partitions), *partitions)
    known = _PARTITION_BYTES.get(partitions)
    if known is None:
        known = _ints(len(partitions) + 1).pack(len(partitions), *partitions)
        if len(_PARTITION_BYTES) >= _REMEMBERED:
            _PARTITION_BYTES.clear()
        _PARTITION_BYTES[partitions] = known
    return known


#: int32 array counts up to 255, encoded (a method call on a ``struct.Struct`` per array saved)
_COUNTS: Final[tuple[bytes, ...]] = tuple(_I32.pack(n) for n in range(256))


def _put_topic_partitions(out: list[bytes], parts: Mapping[str, Sequence[int]]) -> None:
    count = len(parts)
    out.append(_COUNTS[count] if count < 256 else _I32.pack(count))
    if isinstance(parts, dict):  # (the usual case: iterated as a dict, not through the Mapping protocol)
        by_topic: dict[str, Sequence[int]] = parts
        for topic, partitions in by_topic.items():
            out.append(_name_bytes(topic))
            out.append(_partition_bytes(partitions))
        return
    for topic, partitions in parts.items():
        out.append(_name_bytes(topic))
        out.append(_partition_bytes(partitions))


def _put_nullable_bytes(out: list[bytes], data: bytes | None) -> None:
    if data is None:
        out.append(b"\xff\xff\xff\xff")
    else:
        out.append(_I32.pack(len(data)))
        out.append(data)


def _put_nullable_name(out: list[bytes], name: str | None) -> None:
    out.append(b"\xff\xff" if name is None else _name_bytes(name))


def _put_topic_list(out: list[bytes], topics: Sequence[str]) -> None:
    out.append(_I32.pack(len(topics)))
    out.extend(_name_bytes(topic) for topic in topics)


def _fast_subscription(sub: ConsumerProtocolSubscription, version: int) -> bytes | None:
    try:
        out = [_I16.pack(version)]
        _put_topic_list(out, sub.topics)
        _put_nullable_bytes(out, sub.user_data)
        if version >= 1:
            _put_topic_partitions(out, sub.owned)
        if version >= 2:
            out.append(_I32.pack(sub.generation))
        if version >= 3:
            _put_nullable_name(out, sub.rack)
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


def _fast_assignment(assignment: ConsumerProtocolAssignment, version: int) -> bytes | None:
    return _fast_assignment_of(assignment.partitions, assignment.user_data, version)


def _fast_assignment_of(partitions: Partitions, user_data: bytes | None, version: int) -> bytes | None:
    try:
        out = [_V3_PREFIX if version == HIGHEST_VERSION else _I16.pack(version)]
        _put_topic_partitions(out, partitions)
        _put_nullable_bytes(out, user_data)
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


# --- Sections ----------------------------------------------------------------------------------------
# A member sends the same topics, and often the same owned partitions, JoinGroup after JoinGroup while its
# generation and user data change: it can keep those sections' bytes and have only the rest written.
# ``encode_subscription_sections(encode_topic_list(s.topics), s.user_data, encode_topic_partitions(s.owned),
# s.generation, s.rack)`` is ``encode_subscription(s)`` whenever none of them returns None (a value the
# ``struct`` writers cannot take: ``encode_subscription`` then decides, with kio's bytes or error).
def encode_topic_list(topics: Sequence[str]) -> bytes | None:
    """A subscription's topic array (int32 count, then each name), or None for a name that does not fit."""
    try:
        out: list[bytes] = []
        _put_topic_list(out, topics)
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


def encode_topic_partitions(parts: Mapping[str, Sequence[int]]) -> bytes | None:
    """A ``[topic, [int32]]`` array (owned partitions, an assignment), or None for a value that does not fit."""
    try:
        out: list[bytes] = []
        _put_topic_partitions(out, parts)
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


def encode_subscription_sections(
    topic_list: bytes, user_data: bytes | None, owned: bytes, generation: int, rack: str | None
) -> bytes | None:
    """``ConsumerProtocolSubscription`` bytes of the highest version from a topic array and an owned-partitions
    array already encoded (``encode_topic_list``, ``encode_topic_partitions``); None for a generation or rack
    that does not fit."""
    try:
        out = [_V3_PREFIX, topic_list]
        _put_nullable_bytes(out, user_data)
        out.append(owned)
        out.append(_I32.pack(generation))
        _put_nullable_name(out, rack)
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


def _i16(buffer: bytes, pos: int) -> int:
    """The big-endian int16 at ``pos`` (``IndexError`` past the end): read byte by byte, which the compiled
    build does without a call into ``struct``."""
    value = buffer[pos] << 8 | buffer[pos + 1]
    return value - 0x10000 if value >= 0x8000 else value


def _i32(buffer: bytes, pos: int) -> int:
    """The big-endian int32 at ``pos`` (``IndexError`` past the end)."""
    value = buffer[pos] << 24 | buffer[pos + 1] << 16 | buffer[pos + 2] << 8 | buffer[pos + 3]
    return value - 0x1_0000_0000 if value >= 0x8000_0000 else value


def _read_name(buffer: bytes, pos: int) -> tuple[str, int] | None:
    """A non-null int16-length string at ``pos`` (names repeat: decoded once)."""
    length = _i16(buffer, pos)
    end = pos + 2 + length
    if length < 0 or end > len(buffer):
        return None
    raw = buffer[pos + 2 : end]
    name = _TOPIC_NAMES.get(raw)
    if name is None:
        name = raw.decode("utf-8")
        if len(_TOPIC_NAMES) < 65_536:
            _TOPIC_NAMES[raw] = name
    return name, end


def _read_nullable_bytes(buffer: bytes, pos: int) -> tuple[bytes | None, int] | None:
    length = _i32(buffer, pos)
    if length == -1:
        return None, pos + 4
    end = pos + 4 + length
    if length < 0 or end > len(buffer):
        return None
    return buffer[pos + 4 : end], end


def _read_topic_partitions(buffer: bytes, pos: int) -> tuple[dict[str, tuple[int, ...]], int] | None:
    """``[topic, [int32]]`` at ``pos``, repeated topics merged; None when unusual."""
    count = _i32(buffer, pos)
    if count < 0:
        return None
    pos += 4
    grouped: dict[str, tuple[int, ...]] = {}
    for _ in range(count):
        read = _read_name(buffer, pos)
        if read is None:
            return None
        name, pos = read
        n = _i32(buffer, pos)
        end = pos + 4 + 4 * n
        if n < 0 or end > len(buffer):
            return None
        partitions: tuple[int, ...] = _ints(n).unpack_from(buffer, pos + 4)
        pos = end
        grouped[name] = grouped[name] + partitions if name in grouped else partitions
    return grouped, pos


def _read_subscription_fast(buffer: bytes) -> ConsumerProtocolSubscription | None:
    try:
        version = _i16(buffer, 0)
        count = _i32(buffer, 2)
        if version < 0 or count < 0:
            return None
        pos = 6
        topics: list[str] = []
        for _ in range(count):
            name = _read_name(buffer, pos)
            if name is None:
                return None
            topics.append(name[0])
            pos = name[1]
        user_data = _read_nullable_bytes(buffer, pos)
        if user_data is None:
            return None
        pos = user_data[1]
        owned: dict[str, tuple[int, ...]] = {}
        generation = DEFAULT_GENERATION
        rack: str | None = None
        if version >= 1:
            read = _read_topic_partitions(buffer, pos)
            if read is None:
                return None
            owned, pos = read
        if version >= 2:
            generation = _i32(buffer, pos)
            pos += 4
        if version >= 3 and _i16(buffer, pos) != -1:
            rack_read = _read_name(buffer, pos)
            if rack_read is None:
                return None
            rack = rack_read[0] or None
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return ConsumerProtocolSubscription(
        topics=tuple(topics), user_data=user_data[0], owned=owned, generation=generation, rack=rack
    )


def _read_assignment_fast(buffer: bytes) -> ConsumerProtocolAssignment | None:
    try:
        version = _i16(buffer, 0)
        read = _read_topic_partitions(buffer, 2) if version >= 0 else None
        if read is None:
            return None
        partitions, pos = read
        user_data = _read_nullable_bytes(buffer, pos)
    except (IndexError, struct.error, UnicodeDecodeError):
        return None
    return None if user_data is None else ConsumerProtocolAssignment(partitions=partitions, user_data=user_data[0])


def encode_cooperative_user_data(generation: int) -> bytes:
    """``cooperative-sticky`` user data: the generation as one int32 (kio's writer for a value that does not
    fit, which raises its error)."""
    if -(2**31) <= generation < 2**31:
        return _I32.pack(generation)
    return kio_encode_cooperative_user_data(generation)


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """The generation in ``cooperative-sticky`` user data: ``None`` if absent, -1 if unparsable."""
    if data is None:
        return None
    if len(data) >= 4:
        generation: int = _I32.unpack_from(data)[0]
        return generation
    return kio_decode_cooperative_user_data(data)
