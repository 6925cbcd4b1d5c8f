"""The schema walk that guards kio's native reader (``regroup.network.precheck``): it measures every valid
encoding exactly as kio reads it, refuses lengths the bytes cannot hold and nulls the schema forbids, and
whatever it accepts, kio reads without reserving more than the frame holds."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_reader, entity_writer

from regroup.network import precheck
from regroup.network.codec import decode_request
from regroup.network.errors import MalformedRequest
from regroup.network.limits import CLIENT_ID, GROUP_ID, MEMBER_ID, TOPIC_NAME, Limits
from regroup.server.handlers.registry import load_specs
from tests.server.fuzz.values import entity_strategy

SPECS = load_specs()
VERSIONS = {key: (spec.min_version, spec.max_version) for key, spec in SPECS.items()}
REQUEST_CLASSES = [
    load_request_schema(key, version)
    for key, spec in sorted(SPECS.items())
    for version in range(spec.min_version, spec.max_version + 1)
]
NO_LIMITS: Limits = {}


def encode(entity: object) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@st.composite
def requests(draw: st.DrawFn) -> tuple[type, bytes]:
    cls = draw(st.sampled_from(REQUEST_CLASSES))
    return cls, encode(draw(entity_strategy(cls, edge=draw(st.booleans()))))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_every_valid_request_is_measured_as_kio_reads_it(request: tuple[type, bytes]) -> None:
    cls, data = request
    end, over_limit = precheck.check(cls, data, 0, NO_LIMITS)
    _, used = entity_reader(cls)(data, 0)
    assert (end, over_limit) == (len(data), None)
    assert used == len(data)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[type, bytes]:
    cls, data = draw(requests())
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        action = draw(st.sampled_from(["byte", "ff", "cut", "count"]))
        if action == "byte":
            data[at] = draw(st.integers(0, 255))
        elif action == "ff":  # a length or count of -1, or a huge varint
            data[at : at + 4] = b"\xff\xff\xff\xff"
        elif action == "cut":
            del data[at:]
        else:
            data[at : at + 5] = b"\xff\xff\xff\xff\x0f"
    return cls, bytes(data)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_whatever_the_walk_accepts_kio_reads_to_the_same_end(request: tuple[type, bytes]) -> None:
    cls, data = request
    try:
        end, _ = precheck.check(cls, data, 0, NO_LIMITS)
    except precheck.SchemaViolation:
        return
    try:
        _, used = entity_reader(cls)(data, 0)
    except Exception:  # kio refuses what the walk does not look at (bad UTF-8, a bool of 2): still safe
        return
    assert used == end


def _outcome(walk: object, cls: type, data: bytes, limits: Limits) -> object:
    try:
        return walk(cls, data, 0, limits)  # type: ignore[operator]
    except precheck.SchemaViolation as exc:
        return ("refused", str(exc))


LIMITS: Limits = {GROUP_ID: 3, TOPIC_NAME: 5, MEMBER_ID: 4, CLIENT_ID: 2}


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.booleans())
def test_the_written_walker_agrees_with_the_plan_walk(request: tuple[type, bytes], limited: bool) -> None:
    """Valid and mutated requests of every API and version: the written walker (``check``) returns the same end
    and the same first over-limit identifier as the walk field by field, or refuses with the same message."""
    cls, data = request
    limits = LIMITS if limited else NO_LIMITS
    assert _outcome(precheck.check, cls, data, limits) == _outcome(precheck.check_by_plan, cls, data, limits)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_the_written_walker_measures_valid_requests_with_limits_as_the_plan_walk(request: tuple[type, bytes]) -> None:
    cls, data = request
    assert _outcome(precheck.check, cls, data, LIMITS) == _outcome(precheck.check_by_plan, cls, data, LIMITS)


def frame_body(hex_frame: str) -> bytes:
    data = bytes.fromhex(hex_frame)
    (size,) = struct.unpack(">i", data[:4])
    assert size == len(data) - 4
    return data[4:]


@pytest.mark.parametrize(
    "hex_frame",
    [
        # Metadata v9 whose topics array claims 2^32 - 2 elements: kio alone aborts the process on it
        "0000001a0003000900000001000672656c69616200ffffffff0f00000000",
        # DescribeGroups v0 whose non-nullable groups array is null (-1)
        "00000014000f000000000005000672656c696162ffffffff",
    ],
)
def test_reported_frames_are_malformed_requests(hex_frame: str) -> None:
    with pytest.raises(MalformedRequest):
        decode_request(frame_body(hex_frame), VERSIONS)


def test_huge_counts_are_refused_in_every_array_of_every_request() -> None:
    """Each array field of each request, given a count of 2^32 - 2 (compact) or 2^31 - 1 (classic)."""
    refused = 0
    for cls in REQUEST_CLASSES:
        plan = precheck.plan_of(cls)
        for index, field in enumerate(plan.fields):
            if field.element is None:
                continue
            prefix = b"".join(_smallest(f) for f in plan.fields[:index])
            count = b"\xff\xff\xff\xff\x0f" if field.compact else struct.pack(">i", 2**31 - 1)
            with pytest.raises(precheck.SchemaViolation, match="elements claimed"):
                precheck.check(cls, prefix + count + b"\x00" * 8, 0, NO_LIMITS)
            refused += 1
    assert refused > 50


def _smallest(field: object) -> bytes:
    """The smallest valid encoding of a field (empty strings and arrays, zeros, present entities)."""
    f = field
    assert isinstance(f, precheck._Field)
    if f.kind == precheck._FIXED:
        return b"\x00" * f.size
    if f.kind == precheck._ENTITY:
        assert f.entity is not None
        marker = b"\x01" if f.nullable else b""
        return marker + b"".join(_smallest(g) for g in f.entity.fields) + (b"\x00" if f.entity.flexible else b"")
    if f.compact:
        return b"\x01"
    return b"\x00" * (4 if f.kind == precheck._ARRAY or f.wide else 2)


def test_identifiers_longer_than_their_limits_are_reported_not_refused() -> None:
    cls = load_request_schema(12, 4)  # Heartbeat v4
    body = encode(cls(group_id="g" * 300, generation_id=1, member_id="m", group_instance_id=None))
    end, over = precheck.check(cls, body, 0, {GROUP_ID: 255})
    assert end == len(body)
    assert over == "a group id of 300 bytes (at most 255)"
    assert precheck.check(cls, body, 0, {GROUP_ID: 300}) == (len(body), None)


def test_tagged_fields_are_measured_as_kio_reads_them() -> None:
    """Fetch v15 carries two tagged fields, a string and a nested entity (which the random requests above mostly
    leave out)."""
    cls = load_request_schema(1, 15)
    replica_state = cls.__dataclass_fields__["replica_state"].default
    request = cls(
        cluster_id="the-cluster",
        replica_state=type(replica_state)(replica_id=3, replica_epoch=9),
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=1024,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(),
        forgotten_topics_data=(),
        rack_id="",
    )
    data = encode(request)
    _, used = entity_reader(cls)(data, 0)
    assert precheck.check(cls, data, 0, NO_LIMITS) == (used, None) == (len(data), None)
    # a tagged field whose declared size differs from its value's is refused: kio would read by the value
    tags_at = data.index(b"the-cluster") - 4  # count, tag 0, size, length
    assert data[tags_at] == 2
    for delta, refusal in [(-1, "11 bytes claimed, 10 left"), (1, "does not fill its 13 bytes")]:
        wrong = bytearray(data)
        wrong[tags_at + 2] += delta
        with pytest.raises(precheck.SchemaViolation, match=refusal):
            precheck.check(cls, bytes(wrong), 0, NO_LIMITS)
