"""Consumer embedded protocol: Kafka byte layout, version handling (docs/protocol.md, P01-P02), interop with
kafka-python and kio."""

import contextlib
import io
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
from kio.schema.consumer_protocol_assignment.v0 import data as kio_a0
from kio.schema.consumer_protocol_assignment.v1 import data as kio_a1
from kio.schema.consumer_protocol_assignment.v2 import data as kio_a2
from kio.schema.consumer_protocol_assignment.v3 import data as kio_a3
from kio.schema.consumer_protocol_subscription.v0 import data as kio_s0
from kio.schema.consumer_protocol_subscription.v1 import data as kio_s1
from kio.schema.consumer_protocol_subscription.v2 import data as kio_s2
from kio.schema.consumer_protocol_subscription.v3 import data as kio_s3
from kio.schema.types import TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from regroup.assignors import consumer_protocol as cp
from regroup.assignors import consumer_protocol_kio as cpk
from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ProtocolDecodeError,
    decode_assignment,
    decode_cooperative_user_data,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_assignment_of,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    encode_subscription,
    encode_subscription_sections,
    encode_topic_list,
    encode_topic_partitions,
)

VERSIONS = (0, 1, 2, 3)

# Hand-assembled from the format: int16 version, [string] topics, nullable bytes user data,
# [topic string, [int32]] owned partitions, int32 generation, nullable string rack.
FULL = ConsumerProtocolSubscription(topics=("t1",), user_data=b"\x01", owned={"t1": (0, 2)}, generation=4, rack="r")
FULL_V3 = bytes.fromhex(
    "0003"  # version 3
    "00000001"
    "0002"
    "7431"  # topics: 1 x "t1"
    "00000001"
    "01"  # user data: 1 byte
    "00000001"
    "0002"
    "7431"
    "00000002"
    "00000000"
    "00000002"  # owned: "t1" -> [0, 2]
    "00000004"  # generation 4
    "0001"
    "72"  # rack "r"
)
FULL_V0 = bytes.fromhex("000000000001000274310000000101")


def _drop_to(sub: ConsumerProtocolSubscription, version: int) -> ConsumerProtocolSubscription:
    """What survives encoding ``sub`` at ``version`` (newer fields fall back to their defaults)."""
    return ConsumerProtocolSubscription(
        topics=sub.topics,
        user_data=sub.user_data,
        owned=dict(sub.owned) if version >= 1 else {},
        generation=sub.generation if version >= 2 else -1,
        rack=sub.rack if version >= 3 else None,
    )


# --- conformance scenarios -------------------------------------------------------------------------


def test_P01_subscription_v3_round_trip_and_v0_defaults() -> None:
    assert encode_subscription(FULL) == FULL_V3
    assert decode_subscription(FULL_V3) == FULL
    v0 = decode_subscription(FULL_V0)
    assert v0 == ConsumerProtocolSubscription(topics=("t1",), user_data=b"\x01")
    assert v0.owned == {} and v0.generation == -1 and v0.rack is None


def test_P02_unknown_newer_version_parsed_with_v3_layout_trailing_ignored() -> None:
    v5 = b"\x00\x05" + FULL_V3[2:] + b"\xde\xad\xbe\xef future fields"
    assert decode_subscription(v5) == FULL
    assignment_v5 = (
        b"\x00\x05" + encode_assignment(ConsumerProtocolAssignment(partitions={"t": (1,)}))[2:] + b"\x00\x07"
    )
    assert decode_assignment(assignment_v5) == ConsumerProtocolAssignment(partitions={"t": (1,)})


# --- exact bytes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (0, FULL_V0),
        (1, bytes.fromhex("0001000000010002743100000001010000000100027431000000020000000000000002")),
        (2, bytes.fromhex("000200000001000274310000000101000000010002743100000002000000000000000200000004")),
        (3, FULL_V3),
    ],
)
def test_subscription_exact_bytes_per_version(version: int, expected: bytes) -> None:
    assert encode_subscription(FULL, version) == expected
    assert decode_subscription(expected) == _drop_to(FULL, version)


def test_subscription_nulls_exact_bytes() -> None:
    sub = ConsumerProtocolSubscription(topics=())
    assert encode_subscription(sub) == bytes.fromhex("000300000000ffffffff00000000ffffffffffff")
    assert decode_subscription(encode_subscription(sub)) == sub


def test_assignment_exact_bytes() -> None:
    expected = bytes.fromhex("0001000000010001740000000100000005ffffffff")
    assignment = ConsumerProtocolAssignment(partitions={"t": (5,)})
    assert encode_assignment(assignment, 1) == expected
    assert decode_assignment(expected) == assignment
    with_data = ConsumerProtocolAssignment(partitions={}, user_data=b"ab")
    assert encode_assignment(with_data, 0) == bytes.fromhex("000000000000000000026162")


def test_topic_order_is_kept_on_encode_and_decode() -> None:
    sub = ConsumerProtocolSubscription(topics=("z", "a", "m"), owned={"z": (3, 1), "a": (2,)})
    decoded = decode_subscription(encode_subscription(sub))
    assert decoded.topics == ("z", "a", "m")
    assert list(decoded.owned.items()) == [("z", (3, 1)), ("a", (2,))]
    assignment = decode_assignment(encode_assignment(ConsumerProtocolAssignment(partitions={"y": (0,), "b": (1,)})))
    assert list(assignment.partitions) == ["y", "b"]


def test_repeated_topic_entries_are_merged() -> None:
    data = bytes.fromhex("00000000000200017400000001000000000001740000000100000003ffffffff")
    assert decode_assignment(data).partitions == {"t": (0, 3)}


def test_empty_rack_decodes_as_none_like_kafka() -> None:
    data = encode_subscription(ConsumerProtocolSubscription(topics=("t",), rack=""))
    assert data.endswith(b"\x00\x00")
    assert decode_subscription(data).rack is None


def test_buffer_types_accepted() -> None:
    assert decode_subscription(bytearray(FULL_V3)) == FULL
    assert decode_subscription(memoryview(FULL_V3)) == FULL


# --- round trips -----------------------------------------------------------------------------------

int32s = st.integers(min_value=-(2**31), max_value=2**31 - 1)
names = st.text(max_size=12)
subscriptions = st.builds(
    ConsumerProtocolSubscription,
    topics=st.lists(names, max_size=5).map(tuple),
    user_data=st.none() | st.binary(max_size=20),
    owned=st.dictionaries(names, st.lists(int32s, max_size=5).map(tuple), max_size=4),
    generation=int32s,
    rack=st.none() | st.text(min_size=1, max_size=8),
)
assignments = st.builds(
    ConsumerProtocolAssignment,
    partitions=st.dictionaries(names, st.lists(int32s, max_size=5).map(tuple), max_size=4),
    user_data=st.none() | st.binary(max_size=20),
)


@given(sub=subscriptions, version=st.sampled_from(VERSIONS))
def test_subscription_round_trip_all_versions(sub: ConsumerProtocolSubscription, version: int) -> None:
    data = encode_subscription(sub, version)
    assert data[:2] == version.to_bytes(2, "big")
    assert decode_subscription(data) == _drop_to(sub, version)


@given(assignment=assignments, version=st.sampled_from(VERSIONS))
def test_assignment_round_trip_all_versions(assignment: ConsumerProtocolAssignment, version: int) -> None:
    data = encode_assignment(assignment, version)
    assert data[:2] == version.to_bytes(2, "big")
    assert decode_assignment(data) == assignment


@pytest.mark.parametrize("version", [-1, 4])
def test_encode_rejects_unknown_versions(version: int) -> None:
    with pytest.raises(ValueError, match="version"):
        encode_subscription(FULL, version)
    with pytest.raises(ValueError, match="version"):
        encode_assignment(ConsumerProtocolAssignment(partitions={}), version)


def test_encode_rejects_out_of_range_values() -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_subscription(ConsumerProtocolSubscription(topics=(), owned={"t": (2**31,)}))
    with pytest.raises(ValueError, match="int32"):
        encode_subscription(ConsumerProtocolSubscription(topics=(), generation=-(2**31) - 1))
    with pytest.raises(ValueError, match="too long"):
        encode_assignment(ConsumerProtocolAssignment(partitions={"x" * 40_000: ()}))


# --- malformed input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\xff\xff" + FULL_V3[2:],  # negative version
        b"\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff",  # null topic array
        b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff",  # null topic string
        b"\x00\x00\x7f\xff\xff\xff",  # absurd array count
        b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff",  # null owned array
        b"\x00\x00\x00\x00\x00\x01\x00\x02\xff\xfe\xff\xff\xff\xff",  # invalid UTF-8
        b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xfe",  # user data length -2
    ],
)
def test_malformed_subscription_raises(data: bytes) -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_subscription(data)


def test_every_truncation_raises() -> None:
    full_assignment = encode_assignment(ConsumerProtocolAssignment(partitions={"t": (0, 1)}, user_data=b"u"))
    for cut in range(len(FULL_V3)):
        with pytest.raises(ProtocolDecodeError):
            decode_subscription(FULL_V3[:cut])
    for cut in range(len(full_assignment)):
        with pytest.raises(ProtocolDecodeError):
            decode_assignment(full_assignment[:cut])


@settings(max_examples=500)
@given(
    data=st.binary(max_size=64)
    | st.sampled_from(VERSIONS).flatmap(lambda v: st.binary(max_size=64).map(lambda rest: v.to_bytes(2, "big") + rest))
)
def test_random_bytes_decode_or_raise_protocol_decode_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ProtocolDecodeError):
            decode(data)


@settings(max_examples=300)
@given(
    sub=subscriptions,
    version=st.sampled_from(VERSIONS),
    position=st.integers(min_value=0),
    byte=st.sampled_from([0x00, 0x7F, 0x80, 0xFE, 0xFF]),
    cut=st.integers(min_value=0),
)
def test_corrupted_encodings_decode_or_raise_protocol_decode_error(
    sub: ConsumerProtocolSubscription, version: int, position: int, byte: int, cut: int
) -> None:
    """Valid bytes with one byte overwritten and the tail cut: random bytes rarely get past the header."""
    data = bytearray(encode_subscription(sub, version))
    data[position % len(data)] = byte
    corrupted = bytes(data[: len(data) - cut % len(data)])
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ProtocolDecodeError):
            decode(corrupted)


@given(data=st.binary(max_size=64))
def test_random_user_data_never_raises(data: bytes) -> None:
    partitions, generation = decode_sticky_user_data(data)
    assert isinstance(partitions, dict) and (generation is None or isinstance(generation, int))
    assert isinstance(decode_cooperative_user_data(data), int)


# --- sticky and cooperative-sticky user data -------------------------------------------------------

STICKY_V1 = bytes.fromhex("0000000100017400000002000000000000000100000007")
STICKY_V0 = STICKY_V1[:-4]


def test_sticky_user_data_v1_and_v0_exact_bytes() -> None:
    assert encode_sticky_user_data({"t": [0, 1]}, 7) == STICKY_V1
    assert encode_sticky_user_data({"t": [0, 1]}, None) == STICKY_V0
    assert decode_sticky_user_data(STICKY_V1) == ({"t": (0, 1)}, 7)
    assert decode_sticky_user_data(STICKY_V0) == ({"t": (0, 1)}, None)


def test_sticky_user_data_fallbacks() -> None:
    assert decode_sticky_user_data(None) == ({}, None)
    assert decode_sticky_user_data(b"") == ({}, None)
    assert decode_sticky_user_data(b"\x00\x00\x00\x05garbage") == ({}, -1)
    assert decode_sticky_user_data(b"\xff\xff\xff\xff") == ({}, -1)  # null array is not allowed
    assert decode_sticky_user_data(STICKY_V1 + b"trailing") == ({"t": (0, 1)}, 7)


@given(
    partitions=st.dictionaries(names, st.lists(int32s, max_size=4).map(tuple), max_size=4),
    generation=st.none() | int32s,
)
def test_sticky_user_data_round_trip(partitions: dict[str, tuple[int, ...]], generation: int | None) -> None:
    assert decode_sticky_user_data(encode_sticky_user_data(partitions, generation)) == (
        partitions,
        generation,
    )


def test_cooperative_user_data() -> None:
    assert encode_cooperative_user_data(9) == b"\x00\x00\x00\x09"
    assert encode_cooperative_user_data(-1) == b"\xff\xff\xff\xff"
    assert decode_cooperative_user_data(b"\x00\x00\x00\x09") == 9
    assert decode_cooperative_user_data(b"\x00\x00\x00\x09extra") == 9
    assert decode_cooperative_user_data(None) is None
    assert decode_cooperative_user_data(b"") == -1
    assert decode_cooperative_user_data(b"\x01\x02") == -1


# --- interop: kafka-python ---------------------------------------------------------------------------


def _kp_subscription(sub: ConsumerProtocolSubscription, version: int) -> bytes:
    tps = [KpSubscription.TopicPartition(topic=t, partitions=list(ps)) for t, ps in sub.owned.items()]
    kp = KpSubscription(
        version=version,
        topics=list(sub.topics),
        user_data=sub.user_data,
        owned_partitions=tps,
        generation_id=sub.generation,
        rack_id=sub.rack,
    )
    return bytes(kp.encode())


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_subscription_interop(version: int) -> None:
    sub = ConsumerProtocolSubscription(
        topics=("a", "b"), user_data=b"xy", owned={"a": (0, 1), "b": (2,)}, generation=5, rack="rack-1"
    )
    ours = encode_subscription(sub, version)
    assert _kp_subscription(sub, version) == ours
    assert decode_subscription(_kp_subscription(sub, version)) == _drop_to(sub, version)
    theirs: Any = KpSubscription.decode(ours)
    assert theirs.version == version
    assert list(theirs.topics) == ["a", "b"] and theirs.user_data == b"xy"
    if version >= 1:
        assert [(tp.topic, list(tp.partitions)) for tp in theirs.owned_partitions] == [
            ("a", [0, 1]),
            ("b", [2]),
        ]
    if version >= 2:
        assert theirs.generation_id == 5
    if version >= 3:
        assert theirs.rack_id == "rack-1"


@given(sub=subscriptions, version=st.sampled_from(VERSIONS))
def test_kafka_python_subscription_bytes_match(sub: ConsumerProtocolSubscription, version: int) -> None:
    assert encode_subscription(sub, version) == _kp_subscription(sub, version)


@pytest.mark.parametrize("version", VERSIONS)
def test_kafka_python_assignment_interop(version: int) -> None:
    assignment = ConsumerProtocolAssignment(partitions={"t": (0, 1), "u": (4,)}, user_data=b"\x00\x01")
    theirs_bytes = bytes(
        KpAssignment(version=version, assigned_partitions=[("t", [0, 1]), ("u", [4])], user_data=b"\x00\x01").encode()
    )
    ours = encode_assignment(assignment, version)
    assert ours == theirs_bytes
    assert decode_assignment(theirs_bytes) == assignment
    theirs: Any = KpAssignment.decode(ours)
    assert [(tp.topic, list(tp.partitions)) for tp in theirs.assigned_partitions] == [
        ("t", [0, 1]),
        ("u", [4]),
    ]
    assert theirs.user_data == b"\x00\x01"


def test_kafka_python_unknown_version_agrees() -> None:
    v5 = b"\x00\x05" + FULL_V3[2:] + b"\x00\x00"
    theirs: Any = KpSubscription.decode(v5)
    assert (theirs.generation_id, theirs.rack_id) == (FULL.generation, FULL.rack)
    assert decode_subscription(v5) == FULL


@pytest.mark.parametrize("generation", [None, 7])
def test_kafka_python_sticky_user_data_interop(generation: int | None) -> None:
    # On the wire (embedded in the subscription) kafka-python writes this struct without a version header.
    version = 0 if generation is None else 1
    fields: dict[str, Any] = {"previous_assignment": [("t", [0, 1]), ("u", [3])]}
    if generation is not None:
        fields["generation"] = generation
    theirs_bytes = bytes(StickyAssignorUserData(version=version, **fields).encode(header=False))
    ours = encode_sticky_user_data({"t": [0, 1], "u": [3]}, generation)
    assert ours == theirs_bytes
    assert decode_sticky_user_data(theirs_bytes) == ({"t": (0, 1), "u": (3,)}, generation)
    theirs: Any = StickyAssignorUserData.decode(ours, version=version, header=False)
    assert [(tp.topic, list(tp.partitions)) for tp in theirs.previous_assignment] == [
        ("t", [0, 1]),
        ("u", [3]),
    ]
    if generation is not None:
        assert theirs.generation == generation


# --- interop: kio entities directly ------------------------------------------------------------------


def _kio_bytes(entity: Any, version: int) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return version.to_bytes(2, "big") + buffer.getvalue()


def test_kio_subscription_entities_interop() -> None:
    owned1 = (kio_s1.TopicPartition(topic=TopicName("t1"), partitions=(i32(0), i32(2))),)
    owned2 = (kio_s2.TopicPartition(topic=TopicName("t1"), partitions=(i32(0), i32(2))),)
    owned3 = (kio_s3.TopicPartition(topic=TopicName("t1"), partitions=(i32(0), i32(2))),)
    entities: list[Any] = [
        kio_s0.ConsumerProtocolSubscription(topics=("t1",), user_data=b"\x01"),
        kio_s1.ConsumerProtocolSubscription(topics=("t1",), user_data=b"\x01", owned_partitions=owned1),
        kio_s2.ConsumerProtocolSubscription(
            topics=("t1",), user_data=b"\x01", owned_partitions=owned2, generation_id=i32(4)
        ),
        kio_s3.ConsumerProtocolSubscription(
            topics=("t1",), user_data=b"\x01", owned_partitions=owned3, generation_id=i32(4), rack_id="r"
        ),
    ]
    for version, entity in enumerate(entities):
        kio_bytes = _kio_bytes(entity, version)
        ours = encode_subscription(FULL, version)
        assert ours == kio_bytes
        assert decode_subscription(kio_bytes) == _drop_to(FULL, version)
        decoded, _ = entity_reader(type(entity))(ours, 2)
        assert decoded == entity


def test_kio_assignment_entities_interop() -> None:
    assignment = ConsumerProtocolAssignment(partitions={"t": (0, 1)}, user_data=b"ud")
    for version, module in enumerate((kio_a0, kio_a1, kio_a2, kio_a3)):
        entity: Any = module.ConsumerProtocolAssignment(
            assigned_partitions=(module.TopicPartition(topic=TopicName("t"), partitions=(i32(0), i32(1))),),
            user_data=b"ud",
        )
        kio_bytes = _kio_bytes(entity, version)
        assert encode_assignment(assignment, version) == kio_bytes
        assert decode_assignment(kio_bytes) == assignment
        decoded, _ = entity_reader(type(entity))(encode_assignment(assignment, version), 2)
        assert decoded == entity


# --- the fast sticky user-data decoder agrees with the kio path ----------------------------------------


def _slow_sticky(data: bytes) -> tuple[dict[str, tuple[int, ...]], int | None]:
    original = cp._decode_sticky_fast
    cp._decode_sticky_fast = lambda buffer: None  # type: ignore[assignment]
    try:
        return cp.decode_sticky_user_data(data)
    finally:
        cp._decode_sticky_fast = original  # type: ignore[assignment]


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.text(max_size=6), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=6), max_size=4),
    st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
    st.integers(0, 40),
    st.binary(max_size=6),
)
def test_fast_sticky_decoder_matches_kio_path(
    partitions: dict[str, list[int]], generation: int | None, cut: int, tail: bytes
) -> None:
    data = cp.encode_sticky_user_data(partitions, generation)
    for candidate in (data, data[: max(0, len(data) - cut)], data + tail, data[:cut] + tail):
        if candidate:
            assert cp.decode_sticky_user_data(candidate) == _slow_sticky(candidate)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_fast_sticky_decoder_matches_kio_path_on_garbage(data: bytes) -> None:
    if data:
        assert cp.decode_sticky_user_data(data) == _slow_sticky(data)


# --- the fast struct paths agree with the kio paths -------------------------------------------------------


def _verdict(decode: Any, data: bytes) -> object:
    """A decoder's verdict on ``data``: the decoded value, or the error class and message."""
    try:
        return decode(data)
    except ProtocolDecodeError as exc:
        return (ProtocolDecodeError, str(exc))


@settings(max_examples=300, deadline=None)
@given(sub=subscriptions, version=st.sampled_from(VERSIONS))
def test_fast_subscription_encoder_writes_kio_bytes(sub: ConsumerProtocolSubscription, version: int) -> None:
    assert cp._fast_subscription(sub, version) == cpk.kio_encode_subscription(sub, version)


@settings(max_examples=300, deadline=None)
@given(assignment=assignments, version=st.sampled_from(VERSIONS))
def test_fast_assignment_encoder_writes_kio_bytes(assignment: ConsumerProtocolAssignment, version: int) -> None:
    assert cp._fast_assignment(assignment, version) == cpk.kio_encode_assignment(assignment, version)


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(names, st.lists(int32s, max_size=6), max_size=4),
    st.one_of(st.none(), int32s),
)
def test_fast_sticky_encoder_writes_kio_bytes(partitions: dict[str, list[int]], generation: int | None) -> None:
    assert encode_sticky_user_data(partitions, generation) == cpk.kio_encode_sticky_user_data(partitions, generation)


def test_fast_encoders_defer_to_kio_for_values_that_do_not_fit() -> None:
    too_big = ConsumerProtocolSubscription(topics=("t",), owned={"t": (2**31,)})
    assert cp._fast_subscription(too_big, 3) is None
    assert cp._fast_assignment(ConsumerProtocolAssignment(partitions={"x" * 40_000: ()}), 0) is None
    assert cp._fast_subscription(ConsumerProtocolSubscription(topics=("\ud800",)), 0) is None  # not encodable as UTF-8
    with pytest.raises(ValueError, match="int32"):
        encode_sticky_user_data({"t": [2**31]}, None)


@settings(max_examples=300, deadline=None)
@given(
    value=subscriptions | assignments,
    version=st.sampled_from((*VERSIONS, 4, 9)),
    cut=st.integers(0, 60),
    tail=st.binary(max_size=6),
    position=st.integers(min_value=0),
    byte=st.sampled_from([0x00, 0x7F, 0x80, 0xFE, 0xFF]),
)
def test_fast_decoders_agree_with_kio_on_valid_cut_and_corrupted_bytes(
    value: ConsumerProtocolSubscription | ConsumerProtocolAssignment,
    version: int,
    cut: int,
    tail: bytes,
    position: int,
    byte: int,
) -> None:
    if isinstance(value, ConsumerProtocolSubscription):
        data = encode_subscription(value, min(version, 3))
    else:
        data = encode_assignment(value, min(version, 3))
    data = version.to_bytes(2, "big") + data[2:]  # versions past 3 are read with the v3 layout
    corrupted = bytearray(data)
    corrupted[position % len(corrupted)] = byte
    for candidate in (data, data[: max(0, len(data) - cut)], data + tail, data[:cut] + tail, bytes(corrupted)):
        assert _verdict(decode_subscription, candidate) == _verdict(cpk.kio_decode_subscription, candidate)
        assert _verdict(decode_assignment, candidate) == _verdict(cpk.kio_decode_assignment, candidate)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64))
def test_fast_decoders_agree_with_kio_on_garbage(data: bytes) -> None:
    assert _verdict(decode_subscription, data) == _verdict(cpk.kio_decode_subscription, data)
    assert _verdict(decode_assignment, data) == _verdict(cpk.kio_decode_assignment, data)


def test_fast_decoders_take_the_ordinary_case() -> None:
    """The struct readers do decode valid bytes themselves (the agreement tests would also pass if they
    always deferred to kio)."""
    assert cp._read_subscription_fast(FULL_V3) == FULL
    assignment = ConsumerProtocolAssignment(partitions={"t": (0, 1), "u": ()}, user_data=b"u")
    assert cp._read_assignment_fast(encode_assignment(assignment)) == assignment
    assert cp._decode_sticky_fast(encode_sticky_user_data({"t": [3, 1]}, 7)) == ({"t": (3, 1)}, 7)


@given(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=12))
def test_cooperative_user_data_fast_path_matches_kio(generation: int, data: bytes) -> None:
    assert encode_cooperative_user_data(generation) == cpk.kio_encode_cooperative_user_data(generation)
    assert decode_cooperative_user_data(data) == cpk.kio_decode_cooperative_user_data(data)


# --- sections: a subscription written from its parts, an assignment without the value ----------------------


@settings(max_examples=300, deadline=None)
@given(sub=subscriptions)
def test_subscription_from_sections_is_the_encoded_subscription(sub: ConsumerProtocolSubscription) -> None:
    topic_list, owned = encode_topic_list(sub.topics), encode_topic_partitions(sub.owned)
    assert topic_list is not None and owned is not None
    data = encode_subscription_sections(topic_list, sub.user_data, owned, sub.generation, sub.rack)
    assert data == encode_subscription(sub)


def test_sections_refuse_values_that_do_not_fit() -> None:
    assert encode_topic_list(("\ud800",)) is None
    assert encode_topic_list(("x" * 40_000,)) is None
    assert encode_topic_partitions({"t": (2**31,)}) is None
    assert encode_subscription_sections(b"\x00\x00\x00\x00", None, b"\x00\x00\x00\x00", 2**31, None) is None
    assert encode_subscription_sections(b"\x00\x00\x00\x00", None, b"\x00\x00\x00\x00", 1, "\ud800") is None


@settings(max_examples=300, deadline=None)
@given(assignment=assignments)
def test_assignment_of_partitions_is_the_encoded_assignment(assignment: ConsumerProtocolAssignment) -> None:
    assert encode_assignment_of(assignment.partitions) == encode_assignment(
        ConsumerProtocolAssignment(partitions=assignment.partitions)
    )


def test_assignment_of_partitions_raises_like_encode_assignment() -> None:
    with pytest.raises(ValueError, match="int32"):
        encode_assignment_of({"t": (2**31,)})


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(int32s, max_size=5).map(tuple), min_size=1, max_size=6))
def test_remembered_partition_arrays_are_the_packed_ones(arrays: list[tuple[int, ...]]) -> None:
    """The partition arrays kept by their tuple are the ones packed afresh, and lists are packed as tuples."""
    for partitions in arrays + arrays:
        packed = struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
        assert cp._partition_bytes(partitions) == packed
        assert cp._partition_bytes(list(partitions)) == packed
