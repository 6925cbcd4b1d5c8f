"""The settings an administrator gives one group (KIP-848's dynamic group configuration: a GROUP resource of
IncrementalAlterConfigs), as far as the coordinator acts on them: a consumer group's session timeout and
heartbeat interval, overriding the broker's for that group. The shell stores and validates them and hands
them to the coordinator; the coordinator reads them at each heartbeat, as Kafka's does, so a change takes
effect at a member's next heartbeat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class GroupConfig:
    #: ``consumer.session.timeout.ms``: None keeps the broker's ``group.consumer.session.timeout.ms``
    consumer_session_timeout_ms: Final[int | None] = None
    #: ``consumer.heartbeat.interval.ms``: None keeps the broker's ``group.consumer.heartbeat.interval.ms``
    consumer_heartbeat_interval_ms: Final[int | None] = None
    #: ``consumer.assignment.interval.ms``: None keeps the broker's ``group.consumer.assignment.interval.ms``
    consumer_assignment_interval_ms: Final[int | None] = None
    #: ``share.session.timeout.ms``: None keeps the broker's ``group.share.session.timeout.ms``
    share_session_timeout_ms: Final[int | None] = None
    #: ``share.heartbeat.interval.ms``: None keeps the broker's ``group.share.heartbeat.interval.ms``
    share_heartbeat_interval_ms: Final[int | None] = None
    #: ``share.assignment.interval.ms``: None keeps the broker's ``group.share.assignment.interval.ms``
    share_assignment_interval_ms: Final[int | None] = None
    #: ``share.record.lock.duration.ms``: None keeps the broker's ``group.share.record.lock.duration.ms``
    share_record_lock_duration_ms: Final[int | None] = None

    def is_empty(self) -> bool:
        return (
            self.consumer_session_timeout_ms is None
            and self.consumer_heartbeat_interval_ms is None
            and self.consumer_assignment_interval_ms is None
            and self.share_session_timeout_ms is None
            and self.share_heartbeat_interval_ms is None
            and self.share_assignment_interval_ms is None
            and self.share_record_lock_duration_ms is None
        )
