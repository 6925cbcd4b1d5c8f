"""``GroupHarness``: client machines talking to a real ``GroupCoordinator`` with no network in between
(a pair of state machines wired back to back, for a whole group). Requests are handled the moment they are
sent and responses delivered at once; time only moves when the test asks, deadline by deadline."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from regroup.client import ClassicClientMember, MemberConfig, OutgoingRequest
from regroup.coordinator.classic.group import ClassicGroup
from regroup.coordinator.config import CoordinatorConfig
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.result import Result
from regroup.protocol.classic import HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest
from regroup.protocol.offsets import OffsetCommitRequest
from tests.group_views import classic_groups

GROUP = "g"


@dataclass
class Sent:
    at_ms: int
    member: str
    out: OutgoingRequest
    response: object | None = None


@dataclass
class GroupHarness:
    topics: dict[str, int]
    coordinator: GroupCoordinator = field(
        default_factory=lambda: GroupCoordinator(CoordinatorConfig(group_initial_rebalance_delay_ms=0))
    )
    members: dict[str, ClassicClientMember] = field(default_factory=dict)
    now: int = 0
    sent: list[Sent] = field(default_factory=list)
    dropped: set[str] = field(default_factory=set)  # members whose traffic is silently lost
    _keys: dict[int, Sent] = field(default_factory=dict)
    _next_key: int = 1
    _responses: deque[tuple[Sent, object]] = field(default_factory=deque)

    def add(self, name: str, strategies: tuple[str, ...], **overrides: object) -> ClassicClientMember:
        settings: dict[str, object] = {
            "group_id": GROUP,
            "client_id": name,
            "topics": tuple(sorted(self.topics)),
            "strategies": strategies,
            "session_timeout_ms": 10_000,
            "heartbeat_interval_ms": 3_000,
            "rebalance_timeout_ms": 20_000,
            "request_timeout_ms": 5_000,
        }
        settings.update(overrides)
        member = ClassicClientMember(MemberConfig(**settings), self.topics, self.now)  # type: ignore[arg-type]
        self.members[name] = member
        return member

    def _handle(self, name: str, out: OutgoingRequest) -> None:
        record = Sent(self.now, name, out)
        self.sent.append(record)
        if name in self.dropped:
            return
        key = self._next_key
        self._next_key += 1
        self._keys[key] = record
        req, c, now = out.request, self.coordinator, self.now
        if isinstance(req, JoinGroupRequest):
            result = c.join_group(req, key, now)
        elif isinstance(req, SyncGroupRequest):
            result = c.sync_group(req, key, now)
        elif isinstance(req, HeartbeatRequest):
            result = c.heartbeat(req, key, now)
        elif isinstance(req, LeaveGroupRequest):
            result = c.leave_group(req, key, now)
        else:
            assert isinstance(req, OffsetCommitRequest)
            result = c.offset_commit(req, key, now)
        self._complete(result)

    def _complete(self, result: Result) -> None:
        for completion in result.completions:
            assert isinstance(completion.key, int)
            record = self._keys.pop(completion.key)
            record.response = completion.response
            self._responses.append((record, completion.response))

    def pump(self) -> None:
        """Run everything due now until nothing moves."""
        for _ in range(10_000):
            moved = False
            for name in sorted(self.members):
                for out in self.members[name].poll(self.now):
                    moved = True
                    self._handle(name, out)
            while self._responses:
                moved = True
                record, response = self._responses.popleft()
                if record.member not in self.dropped:
                    self.members[record.member].on_response(record.out.request_id, response, self.now)
            if not moved:
                return
        raise AssertionError("the group never settles")

    def run_until(self, t_ms: int) -> None:
        """Move time to ``t_ms`` through every member and coordinator deadline on the way."""
        while True:
            self._complete(self.coordinator.advance(self.now))
            self.pump()
            deadlines = [d for m in self.members.values() if (d := m.next_deadline()) is not None]
            coordinator_deadline = self.coordinator.next_deadline()
            if coordinator_deadline is not None:
                deadlines.append(coordinator_deadline)
            upcoming = min(deadlines, default=None)
            if upcoming is None or upcoming > t_ms:
                break
            self.now = max(self.now, upcoming)
        self.now = t_ms
        self._complete(self.coordinator.advance(self.now))
        self.pump()

    def run_for(self, ms: int) -> None:
        self.run_until(self.now + ms)

    def requests(self, member: str, api: str) -> list[Sent]:
        return [s for s in self.sent if s.member == member and s.out.api == api]

    def group(self) -> ClassicGroup:
        return classic_groups(self.coordinator)[GROUP]
