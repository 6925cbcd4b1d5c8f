"""ShareFetch and ShareAcknowledge (KIP-932) as a sans-IO share consumer sends them, version-agnostic: what the
member asks for and what it is told, without the share session's bookkeeping (session epochs, added and
forgotten partitions), which belongs to the connection between one member and one broker. Partitions are named
by topic id, as on the wire; acknowledgements are ranges of offsets with one acknowledge type each."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

from regroup.model.errors import ErrorCode

#: (topic id, partition)
SharePartitionId = tuple[uuid.UUID, int]
#: one partition's acknowledgements: (first offset, last offset, acknowledge type), ascending, not overlapping
AckRanges = tuple[tuple[int, int, int], ...]
#: one partition's acquired records: (first offset, last offset, delivery count), ascending
AcquiredRuns = tuple[tuple[int, int, int], ...]

# --- acknowledge types (ShareFetch / ShareAcknowledge wire codes) ---
GAP: Final = 0
ACCEPT: Final = 1
RELEASE: Final = 2
REJECT: Final = 3
#: KIP-1222: extend the lock (ShareFetch / ShareAcknowledge v2 with IsRenewAck)
RENEW: Final = 4

#: the acknowledge types by name, as logs write them
ACK_TYPE_NAMES: Final = {GAP: "gap", ACCEPT: "accept", RELEASE: "release", REJECT: "reject"}

#: Kafka's ``fetch.max.wait.ms``: how long a ShareFetch with nothing to acquire waits for records
DEFAULT_MAX_WAIT_MS: Final = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchRequest:
    """Acquire up to ``max_records`` records of ``partitions`` (read in that order), waiting up to ``max_wait_ms``
    when there are none; ``acknowledgements`` ride along and are applied first."""

    group_id: str
    member_id: str
    partitions: tuple[SharePartitionId, ...]
    max_records: int
    max_wait_ms: int = DEFAULT_MAX_WAIT_MS
    acknowledgements: tuple[tuple[SharePartitionId, AckRanges], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareFetchResponse:
    """The records acquired for the member, per partition, each lock lasting ``lock_ms`` from when the broker
    acquired it; and the outcome of each partition's acknowledgements (all or nothing per partition)."""

    error: ErrorCode = ErrorCode.NONE
    acquired: tuple[tuple[SharePartitionId, AcquiredRuns], ...] = ()
    lock_ms: int = 0
    acknowledge_errors: tuple[tuple[SharePartitionId, ErrorCode], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeRequest:
    """Acknowledgements sent on their own; ``close_session``: the member's last request of its share session
    (a consumer closing), after which everything it still holds goes back."""

    group_id: str
    member_id: str
    acknowledgements: tuple[tuple[SharePartitionId, AckRanges], ...] = ()
    close_session: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareAcknowledgeResponse:
    error: ErrorCode = ErrorCode.NONE
    acknowledge_errors: tuple[tuple[SharePartitionId, ErrorCode], ...] = ()


def ack_ranges(records: list[tuple[int, int]]) -> AckRanges:
    """``(offset, acknowledge type)`` pairs as ranges: sorted by offset, consecutive offsets of one type merged."""
    out: list[tuple[int, int, int]] = []
    for offset, ack_type in sorted(records):
        if out and out[-1][1] + 1 == offset and out[-1][2] == ack_type:
            first, _, _ = out[-1]
            out[-1] = (first, offset, ack_type)
        else:
            out.append((offset, offset, ack_type))
    return tuple(out)
