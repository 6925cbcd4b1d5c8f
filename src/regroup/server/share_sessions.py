"""Share sessions (KIP-932): what a share consumer fetches from this broker, kept between its ShareFetch
requests so that each request names only the partitions it adds or forgets. A session belongs to one member
of one share group and has an epoch: 0 opens a new one (replacing the member's old one), each later request
sends the epoch the previous one left, and -1 closes it. A session is tied to the connection that
last used it: when that connection closes, the session closes too. Soft state: lost on restart, after which
the consumer gets SHARE_SESSION_NOT_FOUND and opens a new session."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Final

from regroup.model.errors import ErrorCode

OPEN_EPOCH: Final = 0
FINAL_EPOCH: Final = -1
#: Kafka's ``group.share.max.share.sessions`` default
DEFAULT_MAX_SESSIONS: Final = 2_000

TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class ShareSession:
    group_id: str
    member_id: str
    #: the connection that last used it: when that connection closes, the session goes
    connection_id: int = -1
    #: the epoch the next request must send
    epoch: int = 1
    #: the partitions fetched, in the order they were added
    partitions: dict[TopicPartition, None] = field(default_factory=dict)


class SessionError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class ShareSessions:
    """Every open share session on this broker, by (group id, member id); at most ``max_sessions``."""

    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS) -> None:
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[tuple[str, str], ShareSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.get((group_id, member_id))

    def advance(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        added: list[TopicPartition],
        forgotten: list[TopicPartition],
        connection_id: int = -1,
    ) -> ShareSession:
        """The session a request with ``epoch`` uses, after adding and forgetting partitions; raises
        ``SessionError`` with Kafka's code when the epoch does not fit. A final request (-1) gets the session
        as it was; the caller closes it with ``close`` once the request is done."""
        key = (group_id, member_id)
        if epoch == OPEN_EPOCH:
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions:
                raise SessionError(
                    ErrorCode.SHARE_SESSION_LIMIT_REACHED, "The limit of share sessions on this broker was reached."
                )
            session = ShareSession(group_id, member_id)
            self._sessions[key] = session
        else:
            found = self._sessions.get(key)
            if found is None:
                raise SessionError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"Share session for {member_id} not found.")
            if epoch != FINAL_EPOCH:
                if epoch != found.epoch:
                    raise SessionError(
                        ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                        f"The share session epoch {epoch} is not the expected {found.epoch}.",
                    )
                found.epoch = epoch + 1 if epoch < 2**31 - 1 else 1
            session = found
        session.connection_id = connection_id
        if epoch != FINAL_EPOCH:
            # added first, then forgotten, as Kafka's share session does: a request that acknowledges records
            # of a partition and forgets it in the same breath leaves the partition out of the session
            for tp in added:
                session.partitions[tp] = None
            for tp in forgotten:
                session.partitions.pop(tp, None)
        return session

    def close(self, group_id: str, member_id: str) -> None:
        self._sessions.pop((group_id, member_id), None)

    def connection_closed(self, connection_id: int) -> list[tuple[str, str]]:
        """Close the sessions last used on the connection; their (group id, member id)s, whose records the
        caller releases (Kafka does the same when a share consumer's connection drops)."""
        gone = [key for key, session in self._sessions.items() if session.connection_id == connection_id]
        for key in gone:
            del self._sessions[key]
        return gone
