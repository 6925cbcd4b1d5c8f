"""The simulated members' states change only through their transition tables: every state has an entry, the
stopped states lead nowhere, a running member may always close, crash or fail, and a move the table does not
allow raises instead of going unnoticed. (Every simulation in the test suite runs through ``move``, so the
tables also hold every transition the simulator makes.)"""

from __future__ import annotations

import pytest

from regroup.client import ClassicClientMember, MemberConfig, ShareClientMember, ShareConsumerConfig
from regroup.client.consumer_member import (
    CONSUMER_CLIENT_TRANSITIONS,
    ConsumerClientMember,
    ConsumerClientState,
    ConsumerConfig,
)
from regroup.client.share_member import SHARE_CLIENT_TRANSITIONS, ShareClientState
from regroup.client.types import CLASSIC_CLIENT_TRANSITIONS, STOPPED, ClassicClientState, ClientStateError
from regroup.model.cluster import topic_id_for

ENDS_CLASSIC = {ClassicClientState.LEFT, ClassicClientState.CRASHED, ClassicClientState.FAILED}
ENDS_CONSUMER = {ConsumerClientState.LEFT, ConsumerClientState.CRASHED, ConsumerClientState.FAILED}
ENDS_SHARE = {ShareClientState.LEFT, ShareClientState.CRASHED, ShareClientState.FAILED}


def test_every_state_has_an_entry_and_the_ends_are_final() -> None:
    assert set(CLASSIC_CLIENT_TRANSITIONS) == set(ClassicClientState)
    assert set(CONSUMER_CLIENT_TRANSITIONS) == set(ConsumerClientState)
    assert set(STOPPED) == ENDS_CLASSIC
    for state, nexts in CLASSIC_CLIENT_TRANSITIONS.items():
        assert (nexts == frozenset()) == (state in ENDS_CLASSIC)
        if state not in ENDS_CLASSIC:
            assert nexts >= ENDS_CLASSIC
    for cstate, cnexts in CONSUMER_CLIENT_TRANSITIONS.items():
        assert (cnexts == frozenset()) == (cstate in ENDS_CONSUMER)
        if cstate not in ENDS_CONSUMER:
            assert cnexts >= ENDS_CONSUMER
    assert set(SHARE_CLIENT_TRANSITIONS) == set(ShareClientState)
    for sstate, snexts in SHARE_CLIENT_TRANSITIONS.items():
        assert (snexts == frozenset()) == (sstate in ENDS_SHARE)
        if sstate not in ENDS_SHARE:
            assert snexts >= ENDS_SHARE


def test_the_classic_protocol_order_is_kept() -> None:
    """A member reaches Stable only through a JoinGroup and then a SyncGroup."""
    table = CLASSIC_CLIENT_TRANSITIONS
    assert ClassicClientState.STABLE not in table[ClassicClientState.UNJOINED]
    assert ClassicClientState.STABLE not in table[ClassicClientState.PREPARING_REBALANCE]
    assert ClassicClientState.COMPLETING_REBALANCE not in table[ClassicClientState.UNJOINED]
    assert ConsumerClientState.STABLE not in CONSUMER_CLIENT_TRANSITIONS[ConsumerClientState.JOINING]
    assert ShareClientState.STABLE not in SHARE_CLIENT_TRANSITIONS[ShareClientState.UNJOINED]


def _classic() -> ClassicClientMember:
    config = MemberConfig(group_id="g", client_id="c0", topics=("t",), strategies=("range",))
    return ClassicClientMember(config, {"t": 3}, 0)


def _consumer() -> ConsumerClientMember:
    config = ConsumerConfig(group_id="g", client_id="k0", topics=("t",))
    return ConsumerClientMember(config, {"t": topic_id_for("t")}, 0)


def test_a_move_the_table_forbids_raises_and_changes_nothing() -> None:
    member = _classic()
    with pytest.raises(ClientStateError, match="Unjoined -> Stable"):
        member.move(ClassicClientState.STABLE)
    assert member.state is ClassicClientState.UNJOINED
    member.leave(0)
    assert member.state is ClassicClientState.LEFT
    with pytest.raises(ClientStateError):
        member.move(ClassicClientState.PREPARING_REBALANCE)
    consumer = _consumer()
    with pytest.raises(ClientStateError, match="Unjoined -> Stable"):
        consumer.move(ConsumerClientState.STABLE)
    consumer.crash()
    with pytest.raises(ClientStateError):
        consumer.move(ConsumerClientState.JOINING)
    share = ShareClientMember(ShareConsumerConfig(group_id="g", client_id="s0", topics=("t",), member_id="s0-1"), {}, 0)
    with pytest.raises(ClientStateError, match="Unjoined -> Stable"):
        share.move(ShareClientState.STABLE)
    share.crash()
    with pytest.raises(ClientStateError):
        share.move(ShareClientState.JOINING)
