"""Coordinator settings, with Kafka's broker defaults."""

from __future__ import annotations

from dataclasses import dataclass

MAX_INT32 = 2**31 - 1
MIGRATION_POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")
#: the fewest members of a consumer group whose target the server computes beside its coordinator
#: (``consumer_group_assignor_offload_members``): a smaller group's full computation takes a few milliseconds
SERVER_ASSIGNOR_OFFLOAD_MEMBERS = 2_000
#: the fewest topic names a consumer group's regular expressions must be matched against, none of them matched
#: before, for the server to match them beside its coordinator (``consumer_group_regex_offload_names``): RE2
#: takes about 3 µs a name, so a first resolution over 10,000 topics held the event loop 30-50 ms
SERVER_REGEX_OFFLOAD_NAMES = 1_000
#: the parked JoinGroups (SyncGroups) the server's coordinator answers in the call that completes a classic join
#: phase (that stores the leader's assignment): ``classic_answers_per_call``; a call answering 10,000 of them
#: held the event loop about 20 ms (10 ms)
SERVER_CLASSIC_ANSWERS_PER_CALL = 250
#: the members of a classic group the server's coordinator lists for the leader's JoinGroup answer in one call
#: when a join phase completes, and whose assignment it stores in one call when the leader sends its SyncGroup:
#: ``classic_members_per_call``; at 10,000 members the call completing the join phase held the event loop
#: 9-13 ms, the one storing the assignment 8-13 ms
SERVER_CLASSIC_MEMBERS_PER_CALL = 2_000


@dataclass(frozen=True, slots=True, kw_only=True)
class CoordinatorConfig:
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = MAX_INT32
    new_member_join_timeout_ms: int = 300_000
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    #: a classic join phase completing answers the leader and this many members' parked JoinGroups at most in
    #: the call that completes it, the others a chunk at a time by a timer due 1 ms later each (their sessions
    #: restarted as they are answered; parked, they cannot expire); the leader's SyncGroup likewise answers
    #: itself and this many parked SyncGroups; None: every member in that call
    classic_answers_per_call: int | None = None
    #: a classic join phase completing lists this many members at most for the leader's JoinGroup answer in the
    #: call that completes it, the others a chunk at a time by a timer due 1 ms later each, and the call after
    #: the last chunk answers the first JoinGroups (a rebalance meanwhile leaves them parked for the next
    #: completion); the leader's SyncGroup likewise stores the assignments of this many members in its own call
    #: (the group's record made for them) and the others a chunk at a time, and the call after the last chunk
    #: writes the record and makes the group Stable (a rebalance meanwhile abandons them: the leader's SyncGroup
    #: is answered REBALANCE_IN_PROGRESS, as if it had come after the rebalance began); None: all in one call
    classic_members_per_call: int | None = None
    # --- KIP-848 consumer groups ---
    consumer_group_session_timeout_ms: int = 45_000
    consumer_group_heartbeat_interval_ms: int = 5_000
    consumer_group_max_size: int = MAX_INT32
    #: server-side assignors clients may name; the first is the default
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")
    #: online migration between the protocols: disabled, upgrade, downgrade or bidirectional
    consumer_group_migration_policy: str = "bidirectional"
    #: longest SubscribedTopicRegex accepted
    consumer_group_regex_max_length: int = 1_000
    #: a consumer group of at least this many members computes its target in full beside the coordinator
    #: (``Result.asides``: the shell runs the work and hands its outcome back to ``land``) instead of within
    #: the heartbeat that needs it, as Kafka's ``group.consumer.assignor.offload.enable``; None: always within
    #: (a shell that runs no asides must leave it None)
    consumer_group_assignor_offload_members: int | None = None
    #: a consumer group resolving its regular expressions against at least this many topic names that no
    #: resolution matched before matches them beside the coordinator (``Result.asides``, ``regexes.py``), as
    #: Kafka resolves them on an executor; None: always within the resolution's timer (a shell that runs no
    #: asides must leave it None)
    consumer_group_regex_offload_names: int | None = None
    #: KIP-1263's ``group.consumer.assignment.interval.ms``: a group's next target is computed no sooner than
    #: this after its last (0: at once, as before Kafka 4.3, whose default is 1,000)
    consumer_group_assignment_interval_ms: int = 0
    #: the bounds of a group's own ``consumer.assignment.interval.ms``
    consumer_group_min_assignment_interval_ms: int = 0
    consumer_group_max_assignment_interval_ms: int = 15_000
    # share groups (KIP-932; Kafka's group.share.*)
    share_group_session_timeout_ms: int = 45_000
    share_group_heartbeat_interval_ms: int = 5_000
    share_group_max_size: int = 200
    share_group_record_lock_duration_ms: int = 30_000
    #: the bounds of a group's own ``share.record.lock.duration.ms``
    share_group_min_record_lock_duration_ms: int = 15_000
    share_group_max_record_lock_duration_ms: int = 60_000
    share_group_delivery_count_limit: int = 5
    share_group_partition_max_record_locks: int = 2_000
    #: KIP-1263's ``group.share.assignment.interval.ms`` (0: at once; Kafka 4.3's default is 1,000) and the bounds
    #: of a group's own ``share.assignment.interval.ms``
    share_group_assignment_interval_ms: int = 0
    share_group_min_assignment_interval_ms: int = 0
    share_group_max_assignment_interval_ms: int = 15_000

    def __post_init__(self) -> None:
        if self.consumer_group_migration_policy not in MIGRATION_POLICIES:
            raise ValueError(
                f"consumer_group_migration_policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                f"got {self.consumer_group_migration_policy!r}"
            )
        for name in ("classic_answers_per_call", "classic_members_per_call"):
            chunk = getattr(self, name)
            if chunk is not None and chunk < 1:
                raise ValueError(f"{name} must be at least 1, got {chunk}")
        offload = self.consumer_group_assignor_offload_members
        if offload is not None and offload < 1:
            raise ValueError(f"consumer_group_assignor_offload_members must be at least 1, got {offload}")
        for name in ("consumer_group_assignment_interval_ms", "share_group_assignment_interval_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if not self.consumer_group_assignors:
            raise ValueError("consumer_group_assignors must name at least one assignor")

    def allows_upgrade(self) -> bool:
        return self.consumer_group_migration_policy in ("upgrade", "bidirectional")

    def allows_downgrade(self) -> bool:
        return self.consumer_group_migration_policy in ("downgrade", "bidirectional")
