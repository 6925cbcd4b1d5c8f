"""The event log's detail text: a JoinGroup's owned partitions, written topic by topic, read as the sorted
(topic, partition) labels."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    ProtocolDecodeError,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from regroup.protocol.classic import JoinGroupRequest
from regroup.sim.describe import assigned_partitions, assignment_labels, labels, partition_labels, request_detail

_owned = st.dictionaries(
    st.sampled_from(["t10", "t2", "a", "a-1", ""]), st.lists(st.integers(0, 12), max_size=5).map(tuple), max_size=5
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_owned, min_size=1, max_size=4))
def test_partition_labels_are_the_labels_of_the_pairs(mappings: list[dict[str, tuple[int, ...]]]) -> None:
    """Also when the same topics and partitions come again (their text is kept)."""
    for owned in mappings + mappings:
        assert partition_labels(owned) == labels((t, p) for t, ps in owned.items() for p in ps)


def test_join_detail_lists_the_first_protocols_owned_partitions() -> None:
    sub = ConsumerProtocolSubscription(topics=("t", "u"), owned={"u": (1,), "t": (10, 2)}, generation=3)
    request = JoinGroupRequest(
        group_id="g",
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        member_id="m",
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(("cooperative-sticky", encode_subscription(sub)), ("range", b"")),
        reason="r",
    )
    assert request_detail(request) == "protocols=cooperative-sticky,range owned=[t-2,t-10,u-1] reason=r"


@settings(max_examples=200, deadline=None)
@given(st.lists(_owned, min_size=1, max_size=4), st.binary(max_size=12))
def test_assignment_partitions_and_labels_from_bytes(mappings: list[dict[str, tuple[int, ...]]], junk: bytes) -> None:
    """Sorted pairs without repeats and their labels, the same when the same bytes come again; malformed
    bytes read as no partitions."""
    for owned in mappings + mappings:
        data = encode_assignment(ConsumerProtocolAssignment(partitions=owned))
        pairs = sorted({(t, p) for t, ps in owned.items() for p in ps})
        assert assigned_partitions(data) == tuple(pairs)
        assert assignment_labels(data) == labels(pairs)
    try:
        expected = decode_assignment(junk)
    except ProtocolDecodeError:
        assert assigned_partitions(junk) == () and assignment_labels(junk) == ""
    else:
        assert assigned_partitions(junk) == tuple(sorted({(t, p) for t, ps in expected.partitions.items() for p in ps}))


def test_join_detail_of_the_same_subscription_bytes_again_and_of_malformed_ones() -> None:
    sub = encode_subscription(ConsumerProtocolSubscription(topics=("t",), owned={"t": (3, 1)}, generation=1))

    def join(metadata: bytes) -> JoinGroupRequest:
        return JoinGroupRequest(
            group_id="g",
            session_timeout_ms=10_000,
            rebalance_timeout_ms=10_000,
            member_id="m",
            protocol_type="consumer",
            protocols=(("sticky", metadata),),
        )

    for _ in range(2):
        assert request_detail(join(sub)) == "protocols=sticky owned=[t-1,t-3] reason="
        assert request_detail(join(b"\x00\x07")) == "protocols=sticky owned=[] reason="
