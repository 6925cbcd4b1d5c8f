"""Share sessions as Kafka keeps them: the epoch rules, and a request that both names and forgets a partition."""

from __future__ import annotations

import uuid

import pytest

from regroup.model.errors import ErrorCode
from regroup.server.share_sessions import FINAL_EPOCH, OPEN_EPOCH, SessionError, ShareSessions

T = uuid.UUID(int=7)
P0, P1, P2 = (T, 0), (T, 1), (T, 2)


def test_a_partition_acknowledged_and_forgotten_in_one_request_leaves_the_session() -> None:
    """A consumer that lost a partition sends one request acknowledging its last records there (which names
    the partition) and forgetting it: the session ends without it, as Kafka's adds first and forgets after."""
    sessions = ShareSessions()
    session = sessions.advance("g", "m", OPEN_EPOCH, [P0, P1, P2], [])
    assert list(session.partitions) == [P0, P1, P2]
    session = sessions.advance("g", "m", 1, [P1], [P1, P2])
    assert list(session.partitions) == [P0]
    assert session.epoch == 2


def test_epochs() -> None:
    sessions = ShareSessions(max_sessions=1)
    sessions.advance("g", "m", OPEN_EPOCH, [P0], [])
    with pytest.raises(SessionError) as wrong:
        sessions.advance("g", "m", 5, [], [])
    assert wrong.value.code is ErrorCode.INVALID_SHARE_SESSION_EPOCH
    with pytest.raises(SessionError) as unknown:
        sessions.advance("g", "other", 1, [], [])
    assert unknown.value.code is ErrorCode.SHARE_SESSION_NOT_FOUND
    with pytest.raises(SessionError) as full:
        sessions.advance("g", "other", OPEN_EPOCH, [], [])
    assert full.value.code is ErrorCode.SHARE_SESSION_LIMIT_REACHED
    final = sessions.advance("g", "m", FINAL_EPOCH, [P1], [P0])
    assert list(final.partitions) == [P0]  # a final request changes nothing
