"""The coordinator endpoint's observation of the group, driven request by request against the real
coordinator (no network, no members)."""

from __future__ import annotations

from typing import Any

from regroup.assignors.consumer_protocol import ConsumerProtocolSubscription, encode_subscription
from regroup.client import OutgoingRequest
from regroup.client.types import Request
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.errors import ErrorCode
from regroup.protocol.classic import JoinGroupRequest
from regroup.protocol.consumer import LEAVE_EPOCH, ConsumerGroupHeartbeatRequest
from regroup.sim.checks import SafetyChecker
from regroup.sim.endpoint import CoordinatorEndpoint
from regroup.sim.eventlog import EventLog
from tests.group_views import classic_groups, consumer_groups


def classic_join(member_id: str) -> JoinGroupRequest:
    return JoinGroupRequest(
        group_id="g",
        member_id=member_id,
        session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000,
        protocol_type="consumer",
        protocols=(("range", encode_subscription(ConsumerProtocolSubscription(topics=("t",)))),),
    )


def send(endpoint: CoordinatorEndpoint, member: str, request_id: int, request: Request, now: int) -> Any:
    """One request arrives now; its response (every request here is answered at once)."""
    routed = endpoint.handle(member, 1, OutgoingRequest(request_id=request_id, request=request), now)
    assert len(routed) == 1
    return routed[0].response


def test_an_empty_consumer_group_deleted_by_a_classic_join_lets_the_new_classic_group_start_at_zero() -> None:
    """A classic JoinGroup with a member id the group no longer knows, arriving at an empty consumer group,
    is refused with UNKNOWN_MEMBER_ID and changes nothing: the empty consumer group stays (Kafka removes it
    from memory without writing its tombstones, so its log and its memory disagree until a restart). The
    next JoinGroup, without a member id, replaces it by a classic group, which starts at generation 0: a new
    group, not a generation going back, even though the observer saw the dead group's epoch on the way."""
    log = EventLog()
    checker = SafetyChecker(log)
    coordinator = GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    endpoint = CoordinatorEndpoint(coordinator, "g", log, checker, {})
    endpoint.set_topics({"t": 2}, 0)
    join = ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="a-1", rebalance_timeout_ms=10_000, subscribed_topic_names=("t",), topic_partitions=()
    )
    assert send(endpoint, "a", 1, join, 10).error is ErrorCode.NONE
    leave = ConsumerGroupHeartbeatRequest(group_id="g", member_id="a-1", member_epoch=LEAVE_EPOCH)
    send(endpoint, "a", 2, leave, 20)
    assert consumer_groups(endpoint.coordinator)["g"].members == {}
    assert send(endpoint, "b", 1, classic_join("b-old"), 30).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert consumer_groups(endpoint.coordinator)["g"].members == {} and "g" not in classic_groups(endpoint.coordinator)
    required = send(endpoint, "b", 2, classic_join(""), 40)
    assert required.error is ErrorCode.MEMBER_ID_REQUIRED
    parked = OutgoingRequest(request_id=3, request=classic_join(required.member_id))
    assert endpoint.handle("b", 1, parked, 50) == []  # the join phase completes when its timer fires
    assert [r.request_id for r in endpoint.advance(50)] == [3]
    states = [(e["state"], e["generation"]) for e in log.of_type("group_state")]
    assert states[-2:] == [("PreparingRebalance", 0), ("CompletingRebalance", 1)]
    assert ("Empty", 2) in states  # the empty consumer group, at its last epoch
    assert checker.violations == []
