"""The event log's detail text: a JoinGroup's owned partitions, written topic by topic, read as the sorted
(topic, partition) labels."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from regroup.assignors.consumer_protocol import Subscription, encode_subscription
from regroup.protocol.classic import JoinGroupRequest
from regroup.sim.describe import labels, partition_labels, request_detail

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
    sub = Subscription(topics=("t", "u"), owned={"u": (1,), "t": (10, 2)}, generation=3)
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
