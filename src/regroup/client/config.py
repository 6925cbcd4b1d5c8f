"""A classic consumer's settings (Kafka's client configuration names, snake_cased) and the rebalance
protocol they imply.

Defaults follow the Java client except where a simulation wants something shorter: they are only
defaults; the simulator and the tests pass their own values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from regroup.assignors import registry
from regroup.assignors.spec import RebalanceProtocol

#: Kafka's ``JOIN_GROUP_TIMEOUT_LAPSE``: a JoinGroup may be parked for the whole rebalance timeout.
JOIN_GROUP_TIMEOUT_LAPSE_MS = 5_000


class ConfigError(ValueError):
    """Settings a consumer cannot start with (unknown strategy, no common rebalance protocol, ...)."""


@dataclass(slots=True, kw_only=True, unsafe_hash=True)
class MemberConfig:
    """One consumer's configuration.

    ``strategies`` is ``partition.assignment.strategy``: assignor names in preference order; each becomes
    one JoinGroup protocol. The rebalance protocol (eager or cooperative) is the highest one every listed
    assignor supports (``ConsumerCoordinator``'s protocol selection, KIP-429).
    """

    group_id: Final[str]
    client_id: Final[str]
    topics: Final[tuple[str, ...]]
    strategies: Final[tuple[str, ...]] = ("range", "cooperative-sticky")
    group_instance_id: Final[str | None] = None
    rack: Final[str | None] = None
    session_timeout_ms: Final[int] = 45_000
    heartbeat_interval_ms: Final[int] = 3_000
    rebalance_timeout_ms: Final[int] = 300_000  # max.poll.interval.ms
    request_timeout_ms: Final[int] = 30_000
    retry_backoff_ms: Final[int] = 100
    auto_commit: Final[bool] = True
    auto_commit_interval_ms: Final[int] = 5_000
    join_group_version: Final[int] = 9
    options: Final[dict[str, object]] = field(default_factory=dict)  # assignor options, passed to GroupSpec

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if not self.strategies:
            raise ConfigError("at least one assignment strategy is required")
        if len(set(self.strategies)) != len(self.strategies):
            raise ConfigError("assignment strategies must not repeat")
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "rebalance_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError("heartbeat_interval_ms must be lower than session_timeout_ms")
        rebalance_protocol(self.strategies)  # raises ConfigError when none is common

    @property
    def join_timeout_ms(self) -> int:
        """How long the client waits for a JoinGroup response (Kafka: rebalance timeout + 5 s)."""
        return max(self.request_timeout_ms, self.rebalance_timeout_ms + JOIN_GROUP_TIMEOUT_LAPSE_MS)


def rebalance_protocol(strategies: tuple[str, ...]) -> RebalanceProtocol:
    """The highest rebalance protocol supported by every strategy (Kafka's ConsumerCoordinator rule)."""
    common: set[RebalanceProtocol] | None = None
    for name in strategies:
        try:
            supported = set(registry.get(name).supported_protocols)
        except (registry.UnknownAssignorError, registry.AssignorLoadError) as exc:
            raise ConfigError(str(exc)) from None
        common = supported if common is None else common & supported
    if not common:
        raise ConfigError(f"strategies {list(strategies)} share no rebalance protocol")
    return max(common)


#: Server-side assignors a KIP-848 member may name (``group.remote.assignor``), as it sends them.
SERVER_ASSIGNOR_NAMES: Final = tuple(registry.SERVER_SIDE.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    """A KIP-848 consumer's configuration (``group.protocol=consumer``).

    The coordinator decides the heartbeat interval and the session timeout of a consumer group; the member
    heartbeats at the interval the coordinator returns (``heartbeat_interval_ms`` only until the first
    answer) and ``session_timeout_ms`` is what it knows of the group's session timeout, used for its
    session lease (see ``consumer_member``). ``member_id``: an id the client chose for itself (KIP-1082);
    empty lets the coordinator choose one on the first join. ``callback_delay_ms``: how long the application
    takes to run the rebalance callbacks of a new assignment (the time until its next poll).
    """

    group_id: str
    client_id: str
    topics: tuple[str, ...]
    member_id: str = ""
    group_instance_id: str | None = None
    rack: str | None = None
    server_assignor: str | None = None
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    auto_commit: bool = True
    auto_commit_interval_ms: int = 5_000
    callback_delay_ms: int = 0

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if not self.topics:
            raise ConfigError("a consumer subscribes to at least one topic")
        if self.server_assignor is not None and self.server_assignor not in SERVER_ASSIGNOR_NAMES:
            known = ", ".join(SERVER_ASSIGNOR_NAMES)
            raise ConfigError(f"unknown server assignor {self.server_assignor!r} (known: {known})")
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "rebalance_timeout_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.callback_delay_ms < 0:
            raise ConfigError("callback_delay_ms must not be negative")
        if self.callback_delay_ms >= self.rebalance_timeout_ms:
            raise ConfigError("callback_delay_ms must be lower than rebalance_timeout_ms")


#: Kafka's bound on a share member's id (the client makes it; the coordinator refuses longer ones)
SHARE_MEMBER_ID_MAX = 36


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareConsumerConfig:
    """A KIP-932 share consumer's configuration (``KafkaShareConsumer``).

    The coordinator decides the heartbeat interval (``heartbeat_interval_ms`` is used only until its first
    answer). ``member_id``: the id the client chose for itself (share members always choose theirs).
    ``fetch_max_wait_ms``: how long a ShareFetch that finds nothing waits at the broker (``fetch.max.wait.ms``).
    ``release_fraction`` / ``reject_fraction``: the chance that processing a record fails so that the application
    releases it (delivered again, to any member, until the delivery count limit archives it) or rejects it (a
    poison record: archived at once); every other record is accepted."""

    group_id: str
    client_id: str
    topics: tuple[str, ...]
    member_id: str
    rack: str | None = None
    heartbeat_interval_ms: int = 5_000
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    fetch_max_wait_ms: int = 500
    release_fraction: float = 0.0
    reject_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigError("group_id must not be empty")
        if not self.topics:
            raise ConfigError("a share consumer subscribes to at least one topic")
        if not self.member_id or len(self.member_id) > SHARE_MEMBER_ID_MAX:
            raise ConfigError(f"member_id must have 1 to {SHARE_MEMBER_ID_MAX} characters")
        for name in ("heartbeat_interval_ms", "request_timeout_ms"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive")
        if self.fetch_max_wait_ms < 0:
            raise ConfigError("fetch_max_wait_ms must not be negative")
        fractions = (self.release_fraction, self.reject_fraction)
        if any(not 0.0 <= f <= 1.0 for f in fractions) or sum(fractions) > 1.0:
            raise ConfigError("release_fraction and reject_fraction must be in [0, 1] and add up to at most 1")
