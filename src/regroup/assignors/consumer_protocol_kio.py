"""The kio side of the consumer embedded protocol: the kio entity definitions and the kio-based encode/decode
fallbacks behind ``consumer_protocol``.

``consumer_protocol`` reads and writes the ordinary subscriptions, assignments and sticky user data with
``struct`` and hands everything else to the functions here, which give Kafka's exact bytes, fallbacks and
errors. kio does the struct work: its generated entities (``kio.schema.consumer_protocol_*``) and
``entity_reader``/``entity_writer`` encode and decode each version's body, and kio's primitive
readers/writers do the int16/int32 fields; the sticky user data uses two small entity classes declared
here in kio's format, since kio ships no schema for it. Written by hand here, because kio does not do it:
the version prefix (kio's entities are bare structs), clamping unknown versions to v3, rejecting a null
(-1) count for a non-nullable array (kio reads it as ``None``), and mapping kio's errors to
``ProtocolDecodeError``.

This module stays interpreted in the compiled build (``setup.py``): mypyc does not compile kio's entity
dataclasses with their ``ClassVar`` fields.
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

from regroup.assignors.consumer_protocol_types import (
    DEFAULT_GENERATION,
    HIGHEST_VERSION,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ProtocolDecodeError,
)

_I32_MIN: Final = -(2**31)
_I32_MAX: Final = 2**31 - 1
# What kio (and the bytes() conversion) may raise on malformed input; ProtocolDecodeError is a ValueError.
_DECODE_ERRORS: Final = (SerialError, ValueError, OverflowError)


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


def kio_encode_subscription(sub: ConsumerProtocolSubscription, version: int) -> bytes:
    """Version-prefixed subscription bytes (``version`` already checked); raises ``ValueError`` naming a value
    that does not fit."""
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


def kio_decode_subscription(buffer: bytes) -> ConsumerProtocolSubscription:
    """Parse subscription bytes of any version; raises ``ProtocolDecodeError`` if malformed."""
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
    return ConsumerProtocolSubscription(
        topics=tuple(entity.topics), user_data=entity.user_data, owned=owned, generation=generation, rack=rack
    )


def kio_encode_assignment(assignment: ConsumerProtocolAssignment, version: int) -> bytes:
    """Version-prefixed assignment bytes (``version`` already checked); raises ``ValueError`` naming a value
    that does not fit."""
    entity = a3.ConsumerProtocolAssignment(
        assigned_partitions=_topic_partitions(a3.TopicPartition, assignment.partitions),
        user_data=assignment.user_data,
    )
    return _serialize(entity, version)


def kio_decode_assignment(buffer: bytes) -> ConsumerProtocolAssignment:
    """Parse assignment bytes of any version; raises ``ProtocolDecodeError`` if malformed."""
    version = _read_version(buffer, "assignment")
    entity = _read_body(buffer, a3.ConsumerProtocolAssignment, f"assignment v{version}")
    what = f"assignment v{version} partitions"
    partitions = _group(entity.assigned_partitions, what)
    return ConsumerProtocolAssignment(partitions=partitions, user_data=entity.user_data)


def kio_encode_sticky_user_data(partitions: Mapping[str, Sequence[int]], generation: int | None) -> bytes:
    """``sticky`` user data, V1 or (``generation`` None) V0; raises ``ValueError`` naming a value that does
    not fit."""
    previous = _topic_partitions(a3.TopicPartition, partitions)
    if generation is None:
        return _serialize(_StickyUserDataV0(previous_assignment=previous))
    return _serialize(_StickyUserDataV1(previous_assignment=previous, generation=_int32(generation, "generation")))


def kio_decode_sticky_user_data(buffer: bytes) -> tuple[dict[str, tuple[int, ...]], int | None]:
    """(previous assignment, generation) from non-empty ``sticky`` user data: V1, else V0 (generation
    ``None``); neither parses: nothing owned, generation -1."""
    what = "sticky user data"
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


def kio_encode_cooperative_user_data(generation: int) -> bytes:
    """``cooperative-sticky`` user data: the generation as one int32."""
    buffer = io.BytesIO()
    write_int32(buffer, _int32(generation, "generation"))
    return buffer.getvalue()


def kio_decode_cooperative_user_data(data: bytes) -> int:
    """The generation in ``cooperative-sticky`` user data, -1 if unparsable."""
    try:
        generation, _ = read_int32(bytes(data), 0)
    except _DECODE_ERRORS:
        return DEFAULT_GENERATION
    return int(generation)
