"""``ShareClientMember`` (KIP-932) on its own: the requests it sends for hand-written answers, with time moved by
hand. The simulator's tests (tests/unit/sim/test_share_members.py) run it against the coordinator."""

from __future__ import annotations

from regroup.client import ShareClientMember, ShareClientState, ShareConsumerConfig
from regroup.client.app import AppModel
from regroup.client.types import OutgoingRequest
from regroup.model.cluster import topic_id_for
from regroup.model.errors import ErrorCode
from regroup.protocol.share import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from regroup.protocol.share_fetch import (
    ACCEPT,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)

T = topic_id_for("t")
APP = AppModel(max_poll_records=3, processing=("fixed", 10.0), heartbeat_phase="aligned")


def member() -> ShareClientMember:
    config = ShareConsumerConfig(group_id="g", client_id="c0", topics=("t",), member_id="c0-1")
    return ShareClientMember(config, {"t": T}, 0, APP)


def joined(m: ShareClientMember) -> None:
    (join,) = m.poll(0)
    assert isinstance(join.request, ShareGroupHeartbeatRequest)
    assert (join.request.member_epoch, join.request.subscribed_topic_names) == (0, ("t",))
    answer = ShareGroupHeartbeatResponse(
        member_id="c0-1", member_epoch=1, heartbeat_interval_ms=1000, assignment=((T, (0, 1)),)
    )
    m.on_response(join.request_id, answer, 5)


def only(requests: list[OutgoingRequest]) -> OutgoingRequest:
    (out,) = requests
    return out


def test_it_joins_fetches_processes_and_acknowledges_on_the_next_fetch() -> None:
    m = member()
    joined(m)
    assert m.state is ShareClientState.STABLE and m.assigned == frozenset({("t", 0), ("t", 1)})
    fetch = only(m.poll(5))
    assert isinstance(fetch.request, ShareFetchRequest)
    assert (fetch.request.partitions, fetch.request.max_records) == (((T, 0), (T, 1)), 3)
    assert fetch.request.acknowledgements == ()
    m.on_response(fetch.request_id, ShareFetchResponse(acquired=(((T, 1), ((4, 6, 1),)),), lock_ms=30_000), 10)
    assert m.next_deadline() == 40  # 3 records x 10 ms
    assert m.poll(39) == []
    again = only(m.poll(40))
    assert isinstance(again.request, ShareFetchRequest)
    assert again.request.partitions == ((T, 1), (T, 0))  # a different partition first
    assert again.request.acknowledgements == (((T, 1), ((4, 6, ACCEPT),)),)
    # an empty answer after the wait: the next fetch goes at once; the heartbeat is due a second after the last
    m.on_response(again.request_id, ShareFetchResponse(), 545)
    assert isinstance(only(m.poll(545)).request, ShareFetchRequest)
    heartbeat = only(m.poll(1000))
    assert isinstance(heartbeat.request, ShareGroupHeartbeatRequest)
    assert (heartbeat.request.member_epoch, heartbeat.request.subscribed_topic_names) == (1, None)


def test_a_fenced_member_rejoins_with_epoch_0_and_acknowledges_on_its_own_meanwhile() -> None:
    m = member()
    joined(m)
    fetch = only(m.poll(5))
    m.on_response(fetch.request_id, ShareFetchResponse(acquired=(((T, 0), ((0, 0, 1),)),), lock_ms=30_000), 995)
    heartbeat = only(m.poll(1000))  # (the record is processed until 1005)
    m.on_response(heartbeat.request_id, ShareGroupHeartbeatResponse(error=ErrorCode.FENCED_MEMBER_EPOCH), 1001)
    assert m.state is ShareClientState.UNJOINED and not m.assignment
    rejoin = only(m.poll(1001)).request
    assert isinstance(rejoin, ShareGroupHeartbeatRequest) and rejoin.member_epoch == 0
    assert rejoin.member_id == "c0-1" and rejoin.subscribed_topic_names == ("t",)
    acks = only(m.poll(1005)).request  # no fetch can carry them: not in the group
    assert isinstance(acks, ShareAcknowledgeRequest) and not acks.close_session
    assert acks.acknowledgements == (((T, 0), ((0, 0, ACCEPT),)),)


def test_leaving_finishes_the_batch_then_closes_the_session_and_leaves_together() -> None:
    m = member()
    joined(m)
    fetch = only(m.poll(5))
    m.on_response(fetch.request_id, ShareFetchResponse(acquired=(((T, 0), ((0, 1, 1),)),), lock_ms=30_000), 10)
    m.leave(15)
    assert m.state is ShareClientState.LEFT and m.closing
    assert m.poll(15) == [] and m.next_deadline() == 30
    close, leave = m.poll(30)
    assert isinstance(close.request, ShareAcknowledgeRequest) and close.request.close_session
    assert close.request.acknowledgements == (((T, 0), ((0, 1, ACCEPT),)),)
    assert isinstance(leave.request, ShareGroupHeartbeatRequest) and leave.request.member_epoch == -1
    m.on_response(close.request_id, ShareAcknowledgeResponse(), 40)
    m.on_response(leave.request_id, ShareGroupHeartbeatResponse(member_id="c0-1", member_epoch=-1), 40)
    assert not m.closing and m.poll(40) == []


def test_a_crashed_member_sends_nothing() -> None:
    m = member()
    joined(m)
    m.crash()
    assert m.state is ShareClientState.CRASHED
    assert m.poll(5) == [] and m.poll(10_000) == [] and m.next_deadline() is None
