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

kio does the struct work: its generated entities (``kio.schema.consumer_protocol_*``) and
``entity_reader``/``entity_writer`` encode and decode each version's body, and kio's primitive
readers/writers do the int16/int32 fields; the sticky user data uses two small entity classes declared
here in kio's format, since kio ships no schema for it. Written by hand here, because kio does not do it:
the version prefix (kio's entities are bare structs), clamping unknown versions to v3, rejecting a null
(-1) count for a non-nullable array (kio reads it as ``None``), and mapping kio's errors to
``ProtocolDecodeError``.

Deliberate differences from the Java client: topics and owned partitions are encoded in the order given
(Java's ``serializeSubscription`` sorts them; pass sorted input for identical bytes); invalid UTF-8 in a
string and negative lengths other than -1 are rejected (Java substitutes U+FFFD and reads any negative
nullable length as null). As in Java, an empty rack id decodes as ``None`` and repeated topic entries
are merged.
"""

# No ``from __future__ import annotations``: kio reads the sticky entities' field types at runtime.
import io
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, Protocol, TypeAlias, TypeVar

from kio.schema.consumer_protocol_assignment.v3 import data as a3
from kio.schema.consumer_protocol_subscription.v0 import data as s0
from kio.schema.consumer_protocol_subscription.v1 import data as s1
from kio.schema.consumer_protocol_subscription.v2 import data as s2
from kio.schema.consumer_protocol_subscription.v3 import data as s3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.serial.readers import read_int16, read_int32
from kio.serial.writers import write_int16, write_int32
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32
from kio.static.protocol import Entity

#: Newest consumer protocol version this module knows; newer versions are read with this layout.
HIGHEST_VERSION: Final = 3
#: Generation Kafka reports when none is known.
DEFAULT_GENERATION: Final = -1

_I32_MIN: Final = -(2**31)
_I32_MAX: Final = 2**31 - 1
# What kio (and the bytes() conversion) may raise on malformed input; ProtocolDecodeError is a ValueError.
_I32: Final = struct.Struct(">i")
_I16: Final = struct.Struct(">h")
_TOPIC_NAMES: dict[bytes, str] = {}  # decoded topic names (bounded): the same names recur in every member
_DECODE_ERRORS: Final = (SerialError, ValueError, OverflowError)

Partitions: TypeAlias = Mapping[str, tuple[int, ...]]


class ProtocolDecodeError(ValueError):
    """Bytes that are not a valid consumer protocol subscription or assignment."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subscription:
    """A member's JoinGroup metadata: what it wants, what it owns (v1+), its generation (v2+), rack (v3+)."""

    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned: Partitions = field(default_factory=dict)
    generation: int = DEFAULT_GENERATION
    rack: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """A member's SyncGroup assignment: topic -> partitions, plus the assignor's user data."""

    partitions: Partitions
    user_data: bytes | None = None


# The sticky assignor's user data, declared in kio's entity format (kio has no schema for it). The
# partition list reuses kio's assignment TopicPartition, which has the same [topic, [int32]] layout.
@dataclass(frozen=True, slots=True, kw_only=True)
class _StickyUserDataV0:
    __type__: ClassVar[EntityType] = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    previous_assignment: tuple[a3.TopicPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class _StickyUserDataV1:
    __type__: ClassVar[EntityType] = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    previous_assignment: tuple[a3.TopicPartition, ...]
    generation: i32 = field(metadata={"kafka_type": "int32"})


_SubscriptionEntity: TypeAlias = (
    s0.ConsumerProtocolSubscription
    | s1.ConsumerProtocolSubscription
    | s2.ConsumerProtocolSubscription
    | s3.ConsumerProtocolSubscription
)
_SUBSCRIPTION_TYPES: Final[tuple[type[_SubscriptionEntity], ...]] = (
    s0.ConsumerProtocolSubscription,
    s1.ConsumerProtocolSubscription,
    s2.ConsumerProtocolSubscription,
    s3.ConsumerProtocolSubscription,
)
_TopicPartition = TypeVar("_TopicPartition", s1.TopicPartition, s2.TopicPartition, s3.TopicPartition, a3.TopicPartition)
_E = TypeVar("_E", bound=Entity)


def _int32(value: int, what: str) -> i32:
    if not _I32_MIN <= value <= _I32_MAX:
        raise ValueError(f"{what} {value} does not fit in an int32")
    return i32(value)


def _topic_partitions(cls: type[_TopicPartition], parts: Mapping[str, Sequence[int]]) -> tuple[_TopicPartition, ...]:
    return tuple(
        cls(topic=TopicName(topic), partitions=tuple(_int32(p, f"partition of {topic!r}") for p in ps))
        for topic, ps in parts.items()
    )


def _serialize(entity: _E, version: int | None = None) -> bytes:
    """The entity's classic encoding, after an int16 version prefix when ``version`` is given."""
    buffer = io.BytesIO()
    try:
        if version is not None:
            write_int16(buffer, i16(version))
        entity_writer(type(entity))(buffer, entity)
    except (SerialError, struct.error) as exc:
        raise ValueError(f"cannot encode {type(entity).__name__}: {exc}") from exc
    return buffer.getvalue()


def _check_version(version: int) -> None:
    if not 0 <= version <= HIGHEST_VERSION:
        raise ValueError(f"consumer protocol version must be 0..{HIGHEST_VERSION}, got {version}")


def _read_version(buffer: bytes, what: str) -> int:
    try:
        version, _ = read_int16(buffer, 0)
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(f"{what}: no int16 version header ({len(buffer)} bytes)") from exc
    if version < 0:
        raise ProtocolDecodeError(f"{what}: unsupported version {version}")
    return min(version, HIGHEST_VERSION)


def _read_body(buffer: bytes, entity_type: type[_E], what: str) -> _E:
    try:
        entity, _ = entity_reader(entity_type)(buffer, 2)
    except _DECODE_ERRORS as exc:
        raise ProtocolDecodeError(f"malformed {what}: {exc}") from exc
    return entity


class _TopicEntry(Protocol):
    """What every kio ``TopicPartition`` flavour offers."""

    @property
    def topic(self) -> str: ...
    @property
    def partitions(self) -> tuple[int, ...]: ...


def _group(entries: Sequence[_TopicEntry] | None, what: str) -> dict[str, tuple[int, ...]]:
    """topic -> partitions in wire order, merging repeated topic entries like Kafka does."""
    if entries is None:  # kio reads a -1 count as None; these arrays are not nullable
        raise ProtocolDecodeError(f"malformed {what}: null array")
    grouped: dict[str, tuple[int, ...]] = {}
    for entry in entries:
        if entry.partitions is None:
            raise ProtocolDecodeError(f"malformed {what}: null partition array for {entry.topic!r}")
        grouped[entry.topic] = grouped.get(entry.topic, ()) + tuple(entry.partitions)
    return grouped


def encode_subscription(sub: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    """Version-prefixed subscription bytes; fields newer than ``version`` are left out."""
    _check_version(version)
    fast = _fast_subscription(sub, version)
    return fast if fast is not None else _kio_encode_subscription(sub, version)


def _kio_encode_subscription(sub: Subscription, version: int) -> bytes:
    topics, user_data = tuple(sub.topics), sub.user_data
    entity: _SubscriptionEntity
    if version == 0:
        entity = s0.ConsumerProtocolSubscription(topics=topics, user_data=user_data)
    elif version == 1:
        owned1 = _topic_partitions(s1.TopicPartition, sub.owned)
        entity = s1.ConsumerProtocolSubscription(topics=topics, user_data=user_data, owned_partitions=owned1)
    elif version == 2:
        entity = s2.ConsumerProtocolSubscription(
            topics=topics,
            user_data=user_data,
            owned_partitions=_topic_partitions(s2.TopicPartition, sub.owned),
            generation_id=_int32(sub.generation, "generation"),
        )
    else:
        entity = s3.ConsumerProtocolSubscription(
            topics=topics,
            user_data=user_data,
            owned_partitions=_topic_partitions(s3.TopicPartition, sub.owned),
            generation_id=_int32(sub.generation, "generation"),
            rack_id=sub.rack,
        )
    return _serialize(entity, version)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Parse subscription bytes of any version; raises ``ProtocolDecodeError`` if malformed."""
    buffer = bytes(data)
    fast = _read_subscription_fast(buffer)
    return fast if fast is not None else _kio_decode_subscription(buffer)


def _kio_decode_subscription(buffer: bytes) -> Subscription:
    version = _read_version(buffer, "subscription")
    entity = _read_body(buffer, _SUBSCRIPTION_TYPES[version], f"subscription v{version}")
    if entity.topics is None:
        raise ProtocolDecodeError(f"malformed subscription v{version}: null topic array")
    owned: dict[str, tuple[int, ...]] = {}
    generation, rack = DEFAULT_GENERATION, None
    if not isinstance(entity, s0.ConsumerProtocolSubscription):
        what = f"subscription v{version} owned partitions"
        owned = _group(entity.owned_partitions, what)
    if isinstance(entity, s2.ConsumerProtocolSubscription | s3.ConsumerProtocolSubscription):
        generation = int(entity.generation_id)
    if isinstance(entity, s3.ConsumerProtocolSubscription):
        rack = entity.rack_id or None
    return Subscription(
        topics=tuple(entity.topics), user_data=entity.user_data, owned=owned, generation=generation, rack=rack
    )


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    """Version-prefixed assignment bytes (v0-v3 share one layout)."""
    _check_version(version)
    fast = _fast_assignment(assignment, version)
    return fast if fast is not None else _kio_encode_assignment(assignment, version)


def _kio_encode_assignment(assignment: Assignment, version: int) -> bytes:
    entity = a3.ConsumerProtocolAssignment(
        assigned_partitions=_topic_partitions(a3.TopicPartition, assignment.partitions),
        user_data=assignment.user_data,
    )
    return _serialize(entity, version)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Parse assignment bytes of any version; raises ``ProtocolDecodeError`` if malformed."""
    buffer = bytes(data)
    fast = _read_assignment_fast(buffer)
    return fast if fast is not None else _kio_decode_assignment(buffer)


def _kio_decode_assignment(buffer: bytes) -> Assignment:
    version = _read_version(buffer, "assignment")
    entity = _read_body(buffer, a3.ConsumerProtocolAssignment, f"assignment v{version}")
    what = f"assignment v{version} partitions"
    partitions = _group(entity.assigned_partitions, what)
    return Assignment(partitions=partitions, user_data=entity.user_data)


def encode_sticky_user_data(partitions: Mapping[str, Sequence[int]], generation: int | None) -> bytes:
    """``sticky`` user data: V1 (with ``generation``) or, when it is ``None``, the pre-generation V0."""
    try:
        out: list[bytes] = []
        _put_topic_partitions(out, partitions)
        if generation is not None:
            out.append(_I32.pack(generation))
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return _kio_encode_sticky_user_data(partitions, generation)  # (which names the bad value)


def _kio_encode_sticky_user_data(partitions: Mapping[str, Sequence[int]], generation: int | None) -> bytes:
    previous = _topic_partitions(a3.TopicPartition, partitions)
    if generation is None:
        return _serialize(_StickyUserDataV0(previous_assignment=previous))
    return _serialize(_StickyUserDataV1(previous_assignment=previous, generation=_int32(generation, "generation")))


def decode_sticky_user_data(data: bytes | None) -> tuple[dict[str, tuple[int, ...]], int | None]:
    """(previous assignment, generation) from ``sticky`` user data, with Kafka's fallbacks.

    No user data: nothing owned, generation unknown (``None``). V1, else V0 (generation ``None``).
    Neither parses: nothing owned, generation -1.
    """
    if not data:
        return {}, None
    buffer, what = bytes(data), "sticky user data"
    fast = _decode_sticky_fast(buffer)
    if fast is not None:
        return fast
    try:
        v1, _ = entity_reader(_StickyUserDataV1)(buffer, 0)
        return _group(v1.previous_assignment, what), int(v1.generation)
    except _DECODE_ERRORS:  # includes ProtocolDecodeError
        pass
    try:
        v0, _ = entity_reader(_StickyUserDataV0)(buffer, 0)
        return _group(v0.previous_assignment, what), None
    except _DECODE_ERRORS:  # includes ProtocolDecodeError
        return {}, DEFAULT_GENERATION


def _decode_sticky_fast(buffer: bytes) -> tuple[dict[str, tuple[int, ...]], int | None] | None:
    """The common case of ``decode_sticky_user_data`` without kio (see "Fast paths" below). Returns None
    for anything unusual so the kio path decides with Kafka's exact fallbacks."""
    try:
        read = _read_topic_partitions(buffer, 0)
        if read is None:
            return None
        grouped, pos = read
        if len(buffer) - pos >= 4:
            (generation,) = _I32.unpack_from(buffer, pos)
            return grouped, int(generation)
    except (struct.error, UnicodeDecodeError):
        return None
    return grouped, None


# --- Fast paths ----------------------------------------------------------------------------------------
# A group leader decodes every member's subscription and encodes every member's assignment on every
# rebalance, and kio's generic entity code costs tens of microseconds per topic entry (one validated
# ``i32`` per partition). These read and write the same bytes with ``struct`` for the ordinary case and
# defer to the kio paths above for anything else: a writer on a value that does not fit (the kio path then
# raises its error naming the value), a reader on anything unusual (negative lengths, bad UTF-8, short
# data), so malformed input gets kio's verdict. Tests check fast and kio paths agree, byte for byte and
# value for value, on generated values and on truncated or arbitrary bytes.
_TOPIC_BYTES: dict[str, bytes] = {}  # encoded topic names (bounded), the counterpart of _TOPIC_NAMES


def _name_bytes(name: str) -> bytes:
    raw = _TOPIC_BYTES.get(name)
    if raw is None:
        encoded = name.encode("utf-8")
        raw = _I16.pack(len(encoded)) + encoded
        if len(_TOPIC_BYTES) < 65_536:
            _TOPIC_BYTES[name] = raw
    return raw


def _put_topic_partitions(out: list[bytes], parts: Mapping[str, Sequence[int]]) -> None:
    out.append(_I32.pack(len(parts)))
    for topic, partitions in parts.items():
        out.append(_name_bytes(topic))
        out.append(struct.pack(f">i{len(partitions)}i", len(partitions), *partitions))


def _put_nullable_bytes(out: list[bytes], data: bytes | None) -> None:
    if data is None:
        out.append(b"\xff\xff\xff\xff")
    else:
        out.append(_I32.pack(len(data)))
        out.append(data)


def _fast_subscription(sub: Subscription, version: int) -> bytes | None:
    try:
        out = [_I16.pack(version), _I32.pack(len(sub.topics))]
        out.extend(_name_bytes(topic) for topic in sub.topics)
        _put_nullable_bytes(out, sub.user_data)
        if version >= 1:
            _put_topic_partitions(out, sub.owned)
        if version >= 2:
            out.append(_I32.pack(sub.generation))
        if version >= 3:
            out.append(b"\xff\xff" if sub.rack is None else _name_bytes(sub.rack))
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


def _fast_assignment(assignment: Assignment, version: int) -> bytes | None:
    try:
        out = [_I16.pack(version)]
        _put_topic_partitions(out, assignment.partitions)
        _put_nullable_bytes(out, assignment.user_data)
        return b"".join(out)
    except (struct.error, UnicodeEncodeError):
        return None


def _read_name(buffer: bytes, pos: int) -> tuple[str, int] | None:
    """A non-null int16-length string at ``pos`` (names repeat: decoded once)."""
    (length,) = _I16.unpack_from(buffer, pos)
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
    (length,) = _I32.unpack_from(buffer, pos)
    if length == -1:
        return None, pos + 4
    end = pos + 4 + length
    if length < 0 or end > len(buffer):
        return None
    return buffer[pos + 4 : end], end


def _read_topic_partitions(buffer: bytes, pos: int) -> tuple[dict[str, tuple[int, ...]], int] | None:
    """``[topic, [int32]]`` at ``pos``, repeated topics merged; None when unusual."""
    (count,) = _I32.unpack_from(buffer, pos)
    if count < 0:
        return None
    pos += 4
    grouped: dict[str, tuple[int, ...]] = {}
    for _ in range(count):
        read = _read_name(buffer, pos)
        if read is None:
            return None
        name, pos = read
        (n,) = _I32.unpack_from(buffer, pos)
        if n < 0:
            return None
        partitions: tuple[int, ...] = struct.unpack_from(f">{n}i", buffer, pos + 4)
        pos += 4 + 4 * n
        grouped[name] = grouped[name] + partitions if name in grouped else partitions
    return grouped, pos


def _read_subscription_fast(buffer: bytes) -> Subscription | None:
    try:
        (version,) = _I16.unpack_from(buffer, 0)
        (count,) = _I32.unpack_from(buffer, 2)
        if version < 0 or count < 0:
            return None
        pos, topics = 6, []
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
        generation, rack = DEFAULT_GENERATION, None
        if version >= 1:
            read = _read_topic_partitions(buffer, pos)
            if read is None:
                return None
            owned, pos = read
        if version >= 2:
            (generation,) = _I32.unpack_from(buffer, pos)
            pos += 4
        if version >= 3:
            (length,) = _I16.unpack_from(buffer, pos)
            if length != -1:
                rack_read = _read_name(buffer, pos)
                if rack_read is None:
                    return None
                rack = rack_read[0] or None
    except (struct.error, UnicodeDecodeError):
        return None
    return Subscription(topics=tuple(topics), user_data=user_data[0], owned=owned, generation=generation, rack=rack)


def _read_assignment_fast(buffer: bytes) -> Assignment | None:
    try:
        (version,) = _I16.unpack_from(buffer, 0)
        read = _read_topic_partitions(buffer, 2) if version >= 0 else None
        if read is None:
            return None
        partitions, pos = read
        user_data = _read_nullable_bytes(buffer, pos)
    except (struct.error, UnicodeDecodeError):
        return None
    return None if user_data is None else Assignment(partitions=partitions, user_data=user_data[0])


def encode_cooperative_user_data(generation: int) -> bytes:
    """``cooperative-sticky`` user data: the generation as one int32."""
    buffer = io.BytesIO()
    write_int32(buffer, _int32(generation, "generation"))
    return buffer.getvalue()


def decode_cooperative_user_data(data: bytes | None) -> int | None:
    """The generation in ``cooperative-sticky`` user data: ``None`` if absent, -1 if unparsable."""
    if data is None:
        return None
    try:
        generation, _ = read_int32(bytes(data), 0)
    except _DECODE_ERRORS:
        return DEFAULT_GENERATION
    return int(generation)
