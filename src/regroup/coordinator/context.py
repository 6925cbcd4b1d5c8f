"""The per-operation context handed to handlers: settings (the broker's, and the groups' own overrides), timers,
id source, the current time, the result being built (records, completed responses and events) and the
operation's undo journal."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.events import Event
from regroup.coordinator.group_config import GroupConfig
from regroup.coordinator.ids import IdSource
from regroup.coordinator.journal import Journal
from regroup.coordinator.result import Completion, RequestKey, Result
from regroup.coordinator.timers import Timers
from regroup.records.model import Record


def consumer_session_timeout_ms(
    config: CoordinatorConfig, group_configs: Mapping[str, GroupConfig], group_id: str
) -> int:
    """The session timeout of the consumer-protocol members of ``group_id``: the group's, else the broker's."""
    own = group_configs.get(group_id)
    timeout = None if own is None else own.consumer_session_timeout_ms
    return config.consumer_group_session_timeout_ms if timeout is None else timeout


def consumer_heartbeat_interval_ms(
    config: CoordinatorConfig, group_configs: Mapping[str, GroupConfig], group_id: str
) -> int:
    """The heartbeat interval of the consumer-protocol members of ``group_id``: the group's, else the broker's."""
    own = group_configs.get(group_id)
    interval = None if own is None else own.consumer_heartbeat_interval_ms
    return config.consumer_group_heartbeat_interval_ms if interval is None else interval


@dataclass(slots=True, kw_only=True)
class Ctx:
    config: CoordinatorConfig
    timers: Timers
    ids: IdSource
    now_ms: int
    result: Result = field(default_factory=Result)
    journal: Journal = field(default_factory=Journal)
    #: the groups' own settings, by group id (``group_config.py``)
    group_configs: Mapping[str, GroupConfig] = field(default_factory=dict)

    def consumer_session_timeout_ms(self, group_id: str) -> int:
        return consumer_session_timeout_ms(self.config, self.group_configs, group_id)

    def consumer_heartbeat_interval_ms(self, group_id: str) -> int:
        return consumer_heartbeat_interval_ms(self.config, self.group_configs, group_id)

    def consumer_assignment_interval_ms(self, group_id: str) -> int:
        """The least time between two target computations of ``group_id`` (KIP-1263): the group's, else the
        broker's."""
        own = self.group_configs.get(group_id)
        interval = None if own is None else own.consumer_assignment_interval_ms
        return self.config.consumer_group_assignment_interval_ms if interval is None else interval

    def share_session_timeout_ms(self, group_id: str) -> int:
        own = self.group_configs.get(group_id)
        timeout = None if own is None else own.share_session_timeout_ms
        return self.config.share_group_session_timeout_ms if timeout is None else timeout

    def share_heartbeat_interval_ms(self, group_id: str) -> int:
        own = self.group_configs.get(group_id)
        interval = None if own is None else own.share_heartbeat_interval_ms
        return self.config.share_group_heartbeat_interval_ms if interval is None else interval

    def share_assignment_interval_ms(self, group_id: str) -> int:
        """The least time between two target computations of share group ``group_id`` (KIP-1263)."""
        own = self.group_configs.get(group_id)
        interval = None if own is None else own.share_assignment_interval_ms
        return self.config.share_group_assignment_interval_ms if interval is None else interval

    def share_record_lock_duration_ms(self, group_id: str) -> int:
        own = self.group_configs.get(group_id)
        duration = None if own is None else own.share_record_lock_duration_ms
        return self.config.share_group_record_lock_duration_ms if duration is None else duration

    def complete(self, key: RequestKey | None, response: Any) -> None:
        if key is not None:
            self.result.completions.append(Completion(key, response))

    def drop(self, key: RequestKey) -> None:
        """A parked request was superseded and will never be answered."""
        self.result.dropped.append(key)

    def emit(self, record: Record) -> None:
        self.result.records.append(record)

    def event(self, event: Event) -> None:
        """Say what happened (``events.py``)."""
        self.result.events.append(event)
