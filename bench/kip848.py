"""KIP-848 benchmarks, side by side in one run (the machine is shared and noisy: compare ratios).

Usage::

    .venv/bin/python bench/kip848.py                          # everything, default sizes
    .venv/bin/python bench/kip848.py --only core,server       # a subset: core, server, server-join, sim
    .venv/bin/python bench/kip848.py --only core-join-hetero  # members joining with other topics (not in the default)
    .venv/bin/python bench/kip848.py --only core-join-hetero-aside  # the same, the target computed aside
    .venv/bin/python bench/kip848.py --only core-classic-rebalance  # a large classic group rebalancing
    .venv/bin/python bench/kip848.py --profile --json /tmp/bench-kip848.json

Large groups are **loaded from records**, never formed by joins (every join recomputes the target over all
members, so forming a group one join at a time is quadratic). The records are the ones the coordinator
itself writes, consistent with each other: group epoch, subscription metadata, one member-metadata record
per member, one target per member plus the target epoch, and one current assignment per member, every
member Stable at the target epoch. The partitions (10 topics x 1,000) are dealt round-robin. A classic
group is one ``GroupMetadataValue`` (generation, ``range`` protocol, real consumer-protocol subscription
and assignment bytes).

**core**: ``GroupCoordinator.from_records`` then ``update_metadata`` with the same topic ids, for a
``--hb-members`` (10,000) member consumer group and a classic group of the same size. ``--hb-rounds``
rounds alternate between the two: one steady-state heartbeat per member (KIP-848: member id + current
epoch, nothing else; classic: ``Heartbeat`` with the generation), each call timed. Also timed: the load,
the first KIP-848 heartbeat after it (it refreshes the subscription metadata over all members once), and
one member joining a ``--join-members`` (1,000) member consumer group (the whole target is recomputed).

**core-join-hetero** (asked for by name): members joining a loaded group (``--hetero-members``) with other
topics than the group's, one after another: the first makes the group heterogeneous, the later ones recompute
a heterogeneous target (``core_join_heterogeneous``). **core-join-hetero-aside**: the same with the coordinator
handing the full computation out as the server does (``--consumer-assignor-offload-members``): the heartbeat, the
work and its landing timed apart.

**core-classic-rebalance** (asked for by name): a loaded classic group of ``--classic-members`` (10,000)
rebalancing ``--classic-rounds`` (6) times: every member rejoins (JoinGroup v9, in the group's order), then the
leader's SyncGroup; timed: every JoinGroup of the round together and the slowest but the last; the last
member's JoinGroup, which completes the join phase (every member's answer, the leader's with every member's
metadata, every session restarted), its share of the collector's time apart (``gc.callbacks``; everything
loaded is frozen first); and the leader's SyncGroup.

**server**: ``regroup serve`` as a subprocess (``bench/server.py``'s ``ServerProcess``). Before it starts,
the topics are created with the server's own ``TopicStore`` in its data directory and the group records
appended to its coordinator log (``CoordinatorLog``), so the server loads the groups at startup with
matching topic ids. Heartbeats are driven by ``bench/server.py``'s driver: each member keeps one
kio-encoded request in flight (ConsumerGroupHeartbeat v0 with member id and epoch; classic Heartbeat v4 on
a classic group of the same size loaded the same way), members pipelined round-robin over the
connections of each layout (``--server-layouts``).

**server-join**: one member joining a ``--join-members`` consumer group on the server, wall time. The load
generator plays the members, each heartbeating every ``--interval-ms`` (the server's
``--consumer-heartbeat-interval-ms`` is set to the same), phases spread evenly over one interval. A member
whose answer carries a changed assignment (a revocation, or new partitions) sends its next heartbeat at once
with the new owned set, as the Java consumer does after its callbacks; otherwise it waits one interval.
Reported: from writing the joiner's first heartbeat until it receives its first partitions, and until it
holds its whole share (every partition owned exactly once across the group, as the members report it).
Then, on the same server, the classic reference: a ``--join-members`` classic group using
``cooperative-sticky`` (loaded from one ``GroupMetadataValue`` whose subscriptions carry each member's owned
partitions and generation), each member on its own connection, heartbeating every ``--interval-ms`` with the
same spread phases. On REBALANCE_IN_PROGRESS a member rejoins with its owned partitions; the leader assigns
with regroup's ``cooperative-sticky`` from the members' subscriptions (partitions that change owner are
withheld); a member that lost partitions rejoins at once, and the second round gives the joiner its share.
Same clock, from the joiner's first JoinGroup; also reported: the rounds, when each join phase ended, the
leader's assignment time, and how many members sent anything but heartbeats (``--join-protocols`` picks
the runs and their order).

**sim**: one member joining a ``--sim-members`` group on the simulator (virtual time), classic
cooperative-sticky vs KIP-848 (uniform assignor), both heartbeating every ``--interval-ms``. Reported:
simulated milliseconds from the join action until the member runs ``onPartitionsAssigned`` with partitions,
the rebalance rounds (classic: generations; KIP-848: group epochs), and the wall time. ``--sim-unchecked``
skips the simulator's per-event quiescence check (O(members) per event) and runs it once at the end.

``--profile`` prints cProfile summaries of the join's target computation on the core and of a KIP-848
heartbeat round on the core.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gc
import io
import json
import pstats
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from regroup.assignors import registry
from regroup.assignors.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_subscription,
)
from regroup.assignors.spec import GroupSpec, MemberSubscription
from regroup.coordinator.asides import outcome_of
from regroup.coordinator.config import SERVER_ASSIGNOR_OFFLOAD_MEMBERS, CoordinatorConfig
from regroup.coordinator.consumer.group import ConsumerGroup
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.model.cluster import ClusterImage, TopicImage, topic_id_for
from regroup.protocol.classic import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    SyncGroupRequest,
)
from regroup.protocol.consumer import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from regroup.records.builders import (
    new_consumer_group_current_assignment_record,
    new_consumer_group_epoch_record,
    new_consumer_group_member_metadata_record,
    new_consumer_group_subscription_metadata_record,
    new_consumer_group_target_assignment_epoch_record,
    new_consumer_group_target_assignment_record,
    new_group_metadata_record,
)
from regroup.records.consumer import (
    ConsumerGroupMemberMetadataValue,
    PartitionSet,
    SubscribedTopic,
)
from regroup.records.model import GroupMetadataValue, MemberMetadata, Record
from regroup.sim.engine import Simulator
from regroup.sim.scenario import LinkSpec, MemberSpec, Scenario, ScenarioEvent
from server_loader import load_server_bench

sb = load_server_bench()

TOPICS = {f"topic-{i}": 1_000 for i in range(10)}
EPOCH = 5  # group epoch = target epoch = every member's epoch in the loaded groups
LONG_MS = 3_600_000  # session / rebalance timeouts: nobody is fenced while a benchmark runs
CONSUMER_HB, CONSUMER_HB_V = 68, 0
_CONSUMER_HB_V0_ERROR = slice(9, 11)  # correlation id (4), tagged fields (1), throttle time (4), error code

TopicIds = dict[str, tuple[uuid.UUID, int]]  # name -> (topic id, partitions)


# ---------------------------------------------------------------------------------------------------------------
# group state as records


def _consumer_group(coordinator: GroupCoordinator, group_id: str) -> ConsumerGroup:
    group = coordinator.groups.typed(group_id, ConsumerGroup)
    assert group is not None, group_id
    return group


def member_ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{i:05d}" for i in range(n)]


def deal(topics: TopicIds, members: int) -> list[dict[uuid.UUID, list[int]]]:
    """Every partition to exactly one member, round-robin over (topic, partition) in name order."""
    shares: list[dict[uuid.UUID, list[int]]] = [{} for _ in range(members)]
    k = 0
    for name in sorted(topics):
        topic_id, partitions = topics[name]
        for p in range(partitions):
            shares[k % members].setdefault(topic_id, []).append(p)
            k += 1
    return shares


def _partition_set(share: dict[uuid.UUID, list[int]]) -> PartitionSet:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(share.items(), key=lambda kv: kv[0].int) if ps)


def consumer_group_records(
    group: str, ids: Sequence[str], topics: TopicIds, *, client_id: str = "", client_host: str = ""
) -> list[Record]:
    """A consumer group, every member Stable at epoch ``EPOCH`` and owning its target."""
    shares = deal(topics, len(ids))
    subscribed = tuple(
        SubscribedTopic(topic_id=topics[name][0], name=name, partitions=topics[name][1]) for name in sorted(topics)
    )
    names = tuple(sorted(topics))
    records = [
        new_consumer_group_epoch_record(group, EPOCH),
        new_consumer_group_subscription_metadata_record(group, subscribed),
    ]
    for member_id in ids:
        value = ConsumerGroupMemberMetadataValue(
            instance_id=None,
            rack_id=None,
            client_id=client_id,
            client_host=client_host,
            subscribed_topic_names=names,
            subscribed_topic_regex=None,
            server_assignor=None,
            rebalance_timeout_ms=LONG_MS,
        )
        records.append(new_consumer_group_member_metadata_record(group, member_id, value))
    sets = [_partition_set(share) for share in shares]
    for member_id, parts in zip(ids, sets, strict=True):
        records.append(new_consumer_group_target_assignment_record(group, member_id, parts))
    records.append(new_consumer_group_target_assignment_epoch_record(group, EPOCH))
    for member_id, parts in zip(ids, sets, strict=True):
        records.append(
            new_consumer_group_current_assignment_record(
                group,
                member_id,
                member_epoch=EPOCH,
                previous_member_epoch=EPOCH - 1,
                state="stable",
                assigned=parts,
                pending_revocation=(),
            )
        )
    return records


def classic_group_records(
    group: str,
    ids: Sequence[str],
    topics: TopicIds,
    *,
    client_id: str = "",
    client_host: str = "",
    protocol: str = "range",
) -> list[Record]:
    """A Stable classic consumer group at generation ``EPOCH`` (real subscription and assignment bytes).
    With ``protocol="cooperative-sticky"`` each subscription carries the member's owned partitions and
    generation, as a cooperative member's last JoinGroup did."""
    by_id = {topic_id: name for name, (topic_id, _) in topics.items()}
    names = tuple(sorted(topics))
    shares = [{by_id[t]: tuple(ps) for t, ps in sorted(share.items())} for share in deal(topics, len(ids))]
    plain = encode_subscription(ConsumerProtocolSubscription(topics=names))

    def subscription(owned: dict[str, tuple[int, ...]]) -> bytes:
        if protocol != "cooperative-sticky":
            return plain
        return cooperative_subscription(names, owned, EPOCH)

    members = tuple(
        MemberMetadata(
            member_id=member_id,
            group_instance_id=None,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=LONG_MS,
            session_timeout_ms=LONG_MS,
            subscription=subscription(share),
            assignment=encode_assignment(ConsumerProtocolAssignment(partitions=share)),
        )
        for member_id, share in zip(ids, shares, strict=True)
    )
    value = GroupMetadataValue(
        protocol_type="consumer",
        generation=EPOCH,
        protocol_name=protocol,
        leader=ids[0],
        current_state_timestamp_ms=0,
        members=members,
    )
    return [new_group_metadata_record(group, value)]


def cooperative_subscription(topics: Sequence[str], owned: dict[str, tuple[int, ...]], generation: int) -> bytes:
    """A ``cooperative-sticky`` member's JoinGroup metadata: topics, owned partitions and the generation they
    were assigned in (v3 fields), plus the assignor's user data (the same generation)."""
    return encode_subscription(
        ConsumerProtocolSubscription(
            topics=tuple(topics),
            user_data=encode_cooperative_user_data(generation),
            owned={t: tuple(ps) for t, ps in sorted(owned.items()) if ps},
            generation=generation,
        )
    )


def core_topics() -> TopicIds:
    return {name: (topic_id_for(name), n) for name, n in TOPICS.items()}


def image_of(topics: TopicIds) -> ClusterImage:
    return ClusterImage.of(TopicImage(topic_id=t, name=name, partitions=n) for name, (t, n) in topics.items())


# ---------------------------------------------------------------------------------------------------------------
# core


def _stats_us(latencies_ns: list[int]) -> dict[str, float]:
    latencies_ns = sorted(latencies_ns)
    n = len(latencies_ns)
    return {
        "p50_us": round(latencies_ns[n // 2] / 1e3, 1),
        "p99_us": round(latencies_ns[min(n - 1, int(n * 0.99))] / 1e3, 1),
        "max_us": round(latencies_ns[-1] / 1e3, 1),
    }


def _profile_text(profiler: cProfile.Profile, top: int = 22) -> str:
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(top)
    return text.getvalue()


def core_config() -> CoordinatorConfig:
    return CoordinatorConfig(consumer_group_session_timeout_ms=LONG_MS, consumer_group_heartbeat_interval_ms=5_000)


def load_consumer_group(group: str, ids: Sequence[str], topics: TopicIds, now: int) -> GroupCoordinator:
    c = GroupCoordinator.from_records(consumer_group_records(group, ids, topics), now, core_config())
    c.update_metadata(image_of(topics), now)
    return c


def core_heartbeats(members: int, rounds: int, join_members: int, profile: bool) -> dict[str, Any]:
    topics = core_topics()
    now, key = 1, 0
    t0 = time.perf_counter()
    kip = load_consumer_group("kip848", member_ids("m", members), topics, now)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    classic = GroupCoordinator.from_records(
        classic_group_records("classic", member_ids("c", members), topics), now, core_config()
    )
    classic.update_metadata(image_of(topics), now)
    classic_load_s = time.perf_counter() - t0
    kip_requests = [
        ConsumerGroupHeartbeatRequest(group_id="kip848", member_id=m, member_epoch=EPOCH)
        for m in member_ids("m", members)
    ]
    classic_requests = [
        HeartbeatRequest(group_id="classic", generation_id=EPOCH, member_id=m) for m in member_ids("c", members)
    ]
    # the first heartbeat after the load refreshes the subscription metadata (over all members, once)
    t0 = time.perf_counter()
    key += 1
    first = kip.consumer_group_heartbeat(kip_requests[0], key, now).response_for(key)
    first_ms = (time.perf_counter() - t0) * 1e3
    assert isinstance(first, ConsumerGroupHeartbeatResponse) and first.error.value == 0, first
    assert first.member_epoch == EPOCH and _consumer_group(kip, "kip848").group_epoch == EPOCH
    kip_ns: list[int] = []
    classic_ns: list[int] = []
    kip_s = classic_s = 0.0
    perf = time.perf_counter_ns
    profiler = cProfile.Profile() if profile else None
    for r in range(rounds):
        now += 1_000
        if profiler is not None and r == rounds - 1:
            profiler.enable()
        started = perf()
        for req in kip_requests:
            key += 1
            t = perf()
            resp = kip.consumer_group_heartbeat(req, key, now).response_for(key)
            kip_ns.append(perf() - t)
            if resp.error.value or resp.member_epoch != EPOCH:  # type: ignore[union-attr]
                raise AssertionError(f"KIP-848 heartbeat: {resp}")
        kip_s += (perf() - started) / 1e9
        if profiler is not None:
            profiler.disable()
        started = perf()
        for creq in classic_requests:
            key += 1
            t = perf()
            cresp = classic.heartbeat(creq, key, now).response_for(key)
            classic_ns.append(perf() - t)
            if not isinstance(cresp, HeartbeatResponse) or cresp.error.value:
                raise AssertionError(f"classic heartbeat: {cresp}")
        classic_s += (perf() - started) / 1e9
    assert _consumer_group(kip, "kip848").state().value == "Stable"
    out: dict[str, Any] = {
        "members": members,
        "partitions": sum(TOPICS.values()),
        "rounds": rounds,
        "load_kip848_s": round(load_s, 2),
        "load_classic_s": round(classic_load_s, 2),
        "first_kip848_heartbeat_after_load_ms": round(first_ms, 1),
        "kip848": {"heartbeats_per_s": round(len(kip_ns) / kip_s), **_stats_us(kip_ns)},
        "classic": {"heartbeats_per_s": round(len(classic_ns) / classic_s), **_stats_us(classic_ns)},
    }
    out["throughput_ratio_kip848_over_classic"] = round(
        out["kip848"]["heartbeats_per_s"] / out["classic"]["heartbeats_per_s"], 2
    )
    if profiler is not None:
        out["profile_heartbeats"] = _profile_text(profiler, 14)
    del kip, classic
    gc.collect()
    out["join"] = core_join(join_members, profile)
    return out


def core_join(members: int, profile: bool) -> dict[str, Any]:
    """One member joins a loaded ``members``-member consumer group: its first heartbeat bumps the group
    epoch and computes the target for everyone."""
    topics = core_topics()
    c = load_consumer_group("join", member_ids("m", members), topics, 1)
    warm = ConsumerGroupHeartbeatRequest(group_id="join", member_id="m-00000", member_epoch=EPOCH)
    c.consumer_group_heartbeat(warm, 1, 1)  # the metadata refresh, not part of the join
    join = ConsumerGroupHeartbeatRequest(
        group_id="join",
        member_id="joiner",
        member_epoch=0,
        rebalance_timeout_ms=LONG_MS,
        subscribed_topic_names=tuple(TOPICS),
        topic_partitions=(),
    )
    profiler = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    result = c.consumer_group_heartbeat(join, 2, 2)
    if profiler is not None:
        profiler.disable()
    join_ms = (time.perf_counter() - t0) * 1e3
    resp = result.response_for(2)
    assert isinstance(resp, ConsumerGroupHeartbeatResponse) and resp.error.value == 0, resp
    group = _consumer_group(c, "join")
    out: dict[str, Any] = {
        "members_before": members,
        "join_heartbeat_ms": round(join_ms, 1),
        "records_written": len(result.records),
        "joiner_target_partitions": sum(len(ps) for ps in group.target_of("joiner").values()),
        "group_epoch": group.group_epoch,
    }
    if profiler is not None:
        out["profile"] = _profile_text(profiler)
    return out


def core_classic_rebalance(members: int, rounds: int) -> dict[str, Any]:
    """A loaded ``members``-member classic group rebalancing ``rounds`` times (see the module doc)."""
    topics = core_topics()
    ids = member_ids("c", members)
    c = GroupCoordinator.from_records(classic_group_records("cl", ids, topics), 1, core_config())
    c.update_metadata(image_of(topics), 1)
    subscription = encode_subscription(ConsumerProtocolSubscription(topics=tuple(sorted(topics))))
    empty = encode_assignment(ConsumerProtocolAssignment(partitions={}))
    collecting = [0.0]
    started = [0.0]

    def collector(phase: str, _: dict[str, int]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            collecting[0] += time.perf_counter() - started[0]

    gc.collect()
    gc.freeze()
    gc.callbacks.append(collector)
    completions, collected, syncs, joins, worst = [], [], [], [], []
    key, now = 1, 2
    try:
        for _ in range(rounds):
            round_began, slowest = time.perf_counter(), 0.0
            for index, member_id in enumerate(ids):
                join = JoinGroupRequest(
                    group_id="cl",
                    member_id=member_id,
                    session_timeout_ms=30_000,
                    rebalance_timeout_ms=LONG_MS,
                    protocol_type="consumer",
                    protocols=(("range", subscription),),
                )
                if index == members - 1:
                    collecting[0] = 0.0
                    t0 = time.perf_counter()
                    result = c.join_group(join, key, now)
                    completions.append((time.perf_counter() - t0) * 1e3)
                    collected.append(collecting[0] * 1e3)
                else:
                    t0 = time.perf_counter()
                    result = c.join_group(join, key, now)
                    slowest = max(slowest, time.perf_counter() - t0)
                key += 1
            joins.append((time.perf_counter() - round_began) * 1e3)
            worst.append(slowest * 1e3)
            answers = [x.response for x in result.completions if isinstance(x.response, JoinGroupResponse)]
            assert len(answers) == members, len(answers)
            leader = next(a for a in answers if a.members)
            sync = SyncGroupRequest(
                group_id="cl",
                generation_id=leader.generation_id,
                member_id=leader.leader,
                protocol_type="consumer",
                protocol_name="range",
                assignments=tuple((m.member_id, empty) for m in leader.members),
            )
            t0 = time.perf_counter()
            c.sync_group(sync, key, now)
            syncs.append((time.perf_counter() - t0) * 1e3)
            key += 1
            now += 10
    finally:
        gc.callbacks.remove(collector)
        gc.unfreeze()
    return {
        "members": members,
        "all_joins_ms": [round(x) for x in joins],
        "slowest_other_join_ms": [round(x, 2) for x in worst],
        "join_completion_ms": [round(x, 1) for x in completions],
        "of_which_collector_ms": [round(x, 1) for x in collected],
        "leader_sync_ms": [round(x, 1) for x in syncs],
    }


#: the topics of the members joining in ``core_join_heterogeneous`` (indices into ``TOPICS`` in name order)
HETEROGENEOUS_JOINS = ((0, 5), (5, 10), (0, 10), (0, 7), (2, 9), (0, 5))


def core_join_heterogeneous(members: int, repeats: int, offload: bool = False) -> dict[str, Any]:
    """Members joining a loaded ``members``-member consumer group (everyone on ``TOPICS``) one after another
    with other subscriptions (``HETEROGENEOUS_JOINS``): the first join makes the group heterogeneous, every
    later one recomputes a heterogeneous target. Each join's heartbeat timed, best of ``repeats`` fresh
    groups (a collection before each join, so that the cyclic collector's pauses stay out).

    ``offload``: the coordinator hands the full computation out (``consumer_group_assignor_offload_members`` at
    the server's default) and three pieces are timed per join: the heartbeat (on the server's loop), the work
    itself (``run``: on its worker thread) and its landing (``land``: on the loop)."""
    names = sorted(TOPICS)
    config = core_config()
    if offload:
        config = dataclasses.replace(config, consumer_group_assignor_offload_members=SERVER_ASSIGNOR_OFFLOAD_MEMBERS)
    pieces = ("join", "run", "land") if offload else ("join",)
    best = {piece: [float("inf")] * len(HETEROGENEOUS_JOINS) for piece in pieces}
    records = [0] * len(HETEROGENEOUS_JOINS)
    for _ in range(repeats):
        c = GroupCoordinator.from_records(
            consumer_group_records("hetero", member_ids("m", members), core_topics()), 1, config
        )
        c.update_metadata(image_of(core_topics()), 1)
        warm = ConsumerGroupHeartbeatRequest(group_id="hetero", member_id="m-00000", member_epoch=EPOCH)
        c.consumer_group_heartbeat(warm, 1, 1)  # the metadata refresh, not part of the joins
        for i, (lo, hi) in enumerate(HETEROGENEOUS_JOINS):
            join = ConsumerGroupHeartbeatRequest(
                group_id="hetero",
                member_id=f"joiner-{i}",
                member_epoch=0,
                rebalance_timeout_ms=LONG_MS,
                subscribed_topic_names=tuple(names[lo:hi]),
                topic_partitions=(),
            )
            gc.collect()
            t0 = time.perf_counter()
            result = c.consumer_group_heartbeat(join, 2 + i, 2 + i)
            best["join"][i] = min(best["join"][i], (time.perf_counter() - t0) * 1e3)
            resp = result.response_for(2 + i)
            assert isinstance(resp, ConsumerGroupHeartbeatResponse) and resp.error.value == 0, resp
            written = len(result.records)
            if offload:
                assert len(result.asides) == 1, result.asides
                aside = result.asides[0]
                t0 = time.perf_counter()
                outcome = outcome_of(aside)
                best["run"][i] = min(best["run"][i], (time.perf_counter() - t0) * 1e3)
                assert not isinstance(outcome, BaseException), outcome
                t0 = time.perf_counter()
                landed = c.land(aside, outcome, 2 + i)
                best["land"][i] = min(best["land"][i], (time.perf_counter() - t0) * 1e3)
                assert not landed.asides and landed.records, landed
                written += len(landed.records)
            records[i] = written
    out: dict[str, Any] = {"members_before": members, "offload": offload}
    for piece in pieces:
        out[f"{piece}_ms_best"] = [round(ms, 1) for ms in best[piece]]
    out |= {"records_written": records, "repeats": repeats}
    return out


# ---------------------------------------------------------------------------------------------------------------
# server


def prepare_data_dir(data: Path, groups: Sequence[Callable[[TopicIds], list[Record]]]) -> TopicIds:
    """Create ``TOPICS`` with the server's topic store and append the groups' records to its coordinator log,
    the way the server would have written them (the server is not running)."""
    from regroup.server.topics import TopicStore
    from regroup.storage.coordinator_log import CoordinatorLog
    from regroup.storage.record_log import FsyncPolicy

    data.mkdir(parents=True, exist_ok=True)
    store = TopicStore.open(data / "topics", fsync=FsyncPolicy.NEVER)
    try:
        topics = {name: (store.create_topic(name, n).topic_id, n) for name, n in TOPICS.items()}
    finally:
        store.close()
    clog = CoordinatorLog.open(data / "coordinator", fsync=FsyncPolicy.NEVER)
    try:
        for build_records in groups:
            records = build_records(topics)
            for i in range(0, len(records), 5_000):
                clog.append(records[i : i + 5_000])
        clog.log.sync()
    finally:
        clog.close()
    return topics


class Server:
    """``bench/server.py``'s ``ServerProcess`` with extra ``regroup serve`` arguments."""

    def __init__(self, fsync: str, extra: Sequence[str]) -> None:
        self.proc = sb.ServerProcess(fsync, None)
        base = self.proc.command

        def command() -> list[str]:
            return [*base(), *extra]

        self.proc.command = command

    @property
    def data(self) -> Path:
        return Path(self.proc.dir) / "data"


def consumer_heartbeat_templates(group: str, ids: Sequence[str]) -> list[bytes]:
    return [
        sb.encode_request(
            CONSUMER_HB,
            CONSUMER_HB_V,
            0,
            group_id=group,
            member_id=m,
            member_epoch=EPOCH,
            instance_id=None,
            rack_id=None,
            rebalance_timeout=-1,
            subscribed_topic_names=None,
            server_assignor=None,
            topic_partitions=None,
        )
        for m in ids
    ]


def _hb_row(hb: Any) -> dict[str, Any]:
    return {
        "members": hb.members,
        "connections": hb.connections,
        "req_per_s": round(hb.per_second),
        "p50_ms": round(hb.p50_ms, 2),
        "p99_ms": round(hb.p99_ms, 2),
        "max_ms": round(hb.max_ms, 1),
        "server_cores": round(hb.server_cpu_s / hb.seconds, 2),
        "client_cores": round(hb.client_cpu_s / hb.seconds, 2),
    }


async def _server_heartbeats(port_server: Any, args: argparse.Namespace, members: int) -> dict[str, Any]:
    kip_ids, classic_ids = member_ids("m", members), member_ids("c", members)
    kip_templates = consumer_heartbeat_templates("kip848", kip_ids)
    kip_group = sb.JoinedGroup(group="kip848", generation=EPOCH, member_ids=kip_ids, leader_id=kip_ids[0])
    classic_group = sb.JoinedGroup(group="classic", generation=EPOCH, member_ids=classic_ids, leader_id=classic_ids[0])
    rows: list[dict[str, Any]] = []
    for layout in sb.parse_layouts(args.server_layouts):
        n, conns = layout
        for protocol in ("kip848", "classic"):
            if protocol == "kip848":
                hb = await sb.heartbeat_case(
                    port_server, kip_group, n, conns, args.hb_seconds, args.hb_warmup, args.hb_max_requests,
                    templates=kip_templates, api=(CONSUMER_HB, CONSUMER_HB_V), error_at=_CONSUMER_HB_V0_ERROR,
                )  # fmt: skip
            else:
                hb = await sb.heartbeat_case(
                    port_server, classic_group, n, conns, args.hb_seconds, args.hb_warmup, args.hb_max_requests
                )
            row = {"protocol": protocol, **_hb_row(hb)}
            print("server heartbeat:", json.dumps(row), flush=True)
            rows.append(row)
    return {"layouts": rows}


def server_heartbeats(args: argparse.Namespace) -> dict[str, Any]:
    members = args.hb_members
    server = Server(args.fsync, ["--consumer-session-timeout-ms", str(LONG_MS)])
    host = "/" + sb.HOST
    t0 = time.perf_counter()
    prepare_data_dir(
        server.data,
        [
            lambda t: consumer_group_records(
                "kip848", member_ids("m", members), t, client_id=sb.CLIENT_ID, client_host=host
            ),
            lambda t: classic_group_records(
                "classic", member_ids("c", members), t, client_id=sb.CLIENT_ID, client_host=host
            ),
        ],
    )
    prepare_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        server.proc.start()
        start_s = time.perf_counter() - t0
        out = asyncio.run(_server_heartbeats(server.proc, args, members))
    finally:
        server.proc.stop()
    return {"members": members, "fsync": args.fsync, "write_records_s": round(prepare_s, 1),
            "server_start_s": round(start_s, 1), **out}  # fmt: skip


# --- one member joining, on the server ---------------------------------------------------------------------------


class ConsumerMemberLoad:
    """The members of one consumer group as the load generator plays them (ConsumerGroupHeartbeat v0)."""

    def __init__(self, group: str, ids: list[str], shares: list[dict[uuid.UUID, list[int]]], interval_s: float) -> None:
        self.group = group
        self.interval_s = interval_s
        self.epoch = dict.fromkeys(ids, EPOCH)
        self.owned: dict[str, dict[uuid.UUID, list[int]]] = dict(zip(ids, shares, strict=True))
        self.report_owned: set[str] = set()  # members whose next heartbeat carries their owned set
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.conns: list[Any] = []
        self.index = {m: i for i, m in enumerate(ids)}
        self.errors: list[str] = []
        self.sent = 0
        self.acknowledged: set[str] = set()  # members that sent a heartbeat out of turn (a changed assignment)
        self.on_answer: Callable[[str, Any], None] | None = None
        self.stopped = False

    def send(self, member: str, **fields: Any) -> None:
        if self.stopped:
            return
        handle = self.timers.pop(member, None)
        if handle is not None:
            handle.cancel()
        conn = self.conns[self.index[member] % len(self.conns)]
        topic_partitions = None
        if member in self.report_owned:
            self.report_owned.discard(member)
            topic_partitions = [{"topic_id": t, "partitions": ps} for t, ps in sorted(self.owned[member].items())]
        values: dict[str, Any] = {
            "group_id": self.group, "member_id": member, "member_epoch": self.epoch[member], "instance_id": None,
            "rack_id": None, "rebalance_timeout": -1, "subscribed_topic_names": None, "server_assignor": None,
            "topic_partitions": topic_partitions,
        }  # fmt: skip
        values.update(fields)
        future = sb._request(conn, CONSUMER_HB, CONSUMER_HB_V, **values)
        self.sent += 1
        future.add_done_callback(lambda f: self.answered(member, f))
        loop = asyncio.get_running_loop()
        self.timers[member] = loop.call_later(self.interval_s, self.send, member)

    def answered(self, member: str, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self.errors.append(f"{member}: {future.exception()!r}")
            return
        resp = future.result()
        if resp.error_code != 0:
            self.errors.append(f"{member}: error {int(resp.error_code)} {resp.error_message}")
            return
        self.epoch[member] = int(resp.member_epoch)
        if resp.assignment is not None:
            new = {t.topic_id: sorted(int(p) for p in t.partitions) for t in resp.assignment.topic_partitions}
            new = {t: ps for t, ps in new.items() if ps}
            if new != self.owned.get(member, {}):
                self.owned[member] = new  # revoked or added: acknowledge at once with the new owned set
                self.report_owned.add(member)
                self.acknowledged.add(member)
                if self.on_answer is not None:
                    self.on_answer(member, resp)
                asyncio.get_running_loop().call_soon(self.send, member)
                return
        if self.on_answer is not None:
            self.on_answer(member, resp)

    def stop(self) -> None:
        self.stopped = True
        for handle in self.timers.values():
            handle.cancel()
        self.timers.clear()


async def server_join_run(
    port: int, topics: TopicIds, members: int, interval_ms: int, connections: int
) -> dict[str, Any]:
    ids = member_ids("j", members)
    total = sum(TOPICS.values())
    load = ConsumerMemberLoad("join", ids, deal(topics, members), interval_ms / 1e3)
    load.conns = [await sb.bounded(sb.KafkaConnection.open(port), "connect") for _ in range(connections)]
    loop = asyncio.get_running_loop()
    try:
        for i, m in enumerate(ids):  # phases spread evenly over one interval
            load.timers[m] = loop.call_later(interval_ms / 1e3 * i / members, load.send, m)
        await asyncio.sleep(interval_ms / 1e3 * 1.5)  # every member has heartbeated at least once
        if load.errors:
            raise sb.WireError(f"before the join: {load.errors[:3]}")
        joiner = "joiner"
        load.epoch[joiner] = 0
        load.owned[joiner] = {}
        load.index[joiner] = members
        done: asyncio.Future[None] = loop.create_future()
        marks: dict[str, float] = {}
        epochs_seen: set[int] = set()

        def on_answer(member: str, resp: Any) -> None:
            if member != joiner:
                return
            epochs_seen.add(int(resp.member_epoch))
            if load.owned[joiner] and "first" not in marks:
                marks["first"] = time.perf_counter()
            owned = [(t, p) for ps in load.owned.values() for t, pl in ps.items() for p in pl for _ in [t]]
            if load.owned[joiner] and len(owned) == total and len(set(owned)) == total and not done.done():
                marks["all"] = time.perf_counter()
                done.set_result(None)

        load.on_answer = on_answer
        load.acknowledged.clear()
        started = time.perf_counter()
        sent_before = load.sent
        load.send(joiner, member_epoch=0, rebalance_timeout=60_000, subscribed_topic_names=sorted(TOPICS),
                  topic_partitions=[])  # fmt: skip
        await sb.bounded(done, "the joiner holding its partitions", timeout=max(60.0, 20 * interval_ms / 1e3))
        heartbeats = load.sent - sent_before
    finally:
        load.stop()
        for conn in load.conns:
            conn.close()
    if load.errors:
        raise sb.WireError(f"heartbeat errors: {load.errors[:3]}")
    return {
        "protocol": "KIP-848",
        "members_before": members,
        "interval_ms": interval_ms,
        "to_first_partitions_ms": round((marks["first"] - started) * 1e3, 1),
        "to_all_partitions_ms": round((marks["all"] - started) * 1e3, 1),
        "joiner_partitions": sum(len(ps) for ps in load.owned["joiner"].values()),
        "joiner_epochs": sorted(epochs_seen),
        "rounds": len(epochs_seen - {0}),
        "heartbeats_in_window": heartbeats,
        "members_sending_other_requests": 0,  # ConsumerGroupHeartbeat is the only request
        "members_heartbeating_out_of_turn": len(load.acknowledged),  # the joiner and the givers
    }


COOPERATIVE = "cooperative-sticky"
REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 27, 79


def cooperative_leader(members: Sequence[Any], topics: dict[str, int]) -> list[dict[str, Any]]:
    """What a Java ``cooperative-sticky`` leader does with its JoinGroup response: decode every member's
    subscription (topics, owned partitions, generation, user data), assign with regroup's
    ``cooperative-sticky`` (partitions that change owner are withheld), encode every member's assignment."""
    subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
    spec = GroupSpec(
        topics=topics,
        members={
            member_id: MemberSubscription.of(
                sub.topics, dict(sub.owned), generation=sub.generation, user_data=sub.user_data
            )
            for member_id, sub in subscriptions.items()
        },
    )
    assignment = registry.get(COOPERATIVE).assign(spec)
    revoked = {
        (t, p) for member_id, sub in subscriptions.items() for t, ps in sub.owned.items()
        for p in set(ps) - set(assignment.get(member_id, {}).get(t, ()))
    }  # fmt: skip
    for member_id, sub in subscriptions.items():  # Kafka's validateCooperativeAssignment
        added = {(t, p) for t, ps in assignment.get(member_id, {}).items() for p in set(ps) - set(sub.owned.get(t, ()))}
        if added & revoked:
            raise sb.WireError(f"{member_id} is given partitions revoked in the same rebalance")
    return [
        {
            "member_id": member_id,
            "assignment": encode_assignment(
                ConsumerProtocolAssignment(
                    partitions={t: tuple(ps) for t, ps in sorted(assignment.get(member_id, {}).items())}
                )
            ),
        }
        for member_id in subscriptions
    ]


class ClassicCooperativeLoad:
    """The members of one classic ``cooperative-sticky`` group as the load generator plays them, one
    connection each (a parked JoinGroup holds back every later answer on its connection). As the Java
    consumer does: Heartbeat v4 every interval, counted from the previous heartbeat or from the last
    JoinGroup answer; on REBALANCE_IN_PROGRESS a JoinGroup v9 with the owned partitions and their generation;
    the leader assigns; after SyncGroup v5 the member drops what it lost and, if it lost anything, rejoins at
    once. A heartbeat that falls due while a JoinGroup or SyncGroup is outstanding goes out after it."""

    def __init__(self, group: str, ids: list[str], shares: list[dict[str, tuple[int, ...]]], interval_s: float) -> None:
        self.group = group
        self.interval_s = interval_s
        self.topics = dict(TOPICS)
        self.names = tuple(sorted(TOPICS))
        self.member_id = {m: m for m in ids}
        self.generation = dict.fromkeys(ids, EPOCH)
        self.owned: dict[str, dict[str, tuple[int, ...]]] = dict(zip(ids, shares, strict=True))
        self.owned_generation = dict.fromkeys(ids, EPOCH)
        self.conn: dict[str, Any] = {}
        self.busy: set[str] = set()  # a JoinGroup or SyncGroup outstanding
        self.heartbeat_due: set[str] = set()
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.sent = {"heartbeat": 0, "join": 0, "sync": 0}
        self.other_requests: set[str] = set()  # members that sent a JoinGroup or SyncGroup
        self.revoking: set[str] = set()  # members that gave partitions up
        self.leader_assign_s: list[float] = []
        self.leader_joined_at: list[float] = []  # when each round's join phase ended, as the leader saw it
        self.generations: list[int] = []  # as the leader saw them
        self.errors: list[str] = []
        self.on_synced: Callable[[str], None] | None = None
        self.last_sync_at = 0.0
        self.stopped = False

    def _result(self, member: str, what: str, future: asyncio.Future[Any]) -> Any:
        if future.cancelled() or future.exception() is not None:
            if not self.stopped:
                self.errors.append(f"{member} {what}: {future.exception()!r}")
            return None
        return future.result()

    def schedule_heartbeat(self, member: str, delay: float) -> None:
        handle = self.timers.pop(member, None)
        if handle is not None:
            handle.cancel()
        if not self.stopped:
            self.timers[member] = asyncio.get_running_loop().call_later(max(0.0, delay), self.heartbeat, member)

    def heartbeat(self, member: str) -> None:
        self.timers.pop(member, None)
        if self.stopped:
            return
        if member in self.busy:
            self.heartbeat_due.add(member)
            return
        sent_at = time.perf_counter()
        fields = {"group_id": self.group, "generation_id": self.generation[member],
                  "member_id": self.member_id[member], "group_instance_id": None}  # fmt: skip
        future = sb._request(self.conn[member], sb.HEARTBEAT, sb.HEARTBEAT_V, **fields)
        self.sent["heartbeat"] += 1
        future.add_done_callback(lambda f: self.heartbeat_answered(member, sent_at, f))

    def heartbeat_answered(self, member: str, sent_at: float, future: asyncio.Future[Any]) -> None:
        resp = self._result(member, "Heartbeat", future)
        if resp is None or self.stopped or member in self.busy:
            return
        if resp.error_code == REBALANCE_IN_PROGRESS:
            self.join(member)
        elif resp.error_code != 0:
            self.errors.append(f"{member} Heartbeat: error {int(resp.error_code)}")
        else:
            self.schedule_heartbeat(member, sent_at + self.interval_s - time.perf_counter())

    def join(self, member: str) -> None:
        if self.stopped:
            return
        handle = self.timers.pop(member, None)
        if handle is not None:
            handle.cancel()
        self.busy.add(member)
        self.heartbeat_due.discard(member)
        self.other_requests.add(member)
        metadata = cooperative_subscription(self.names, self.owned[member], self.owned_generation[member])
        fields = {
            "group_id": self.group, "session_timeout": sb.SESSION_MS, "rebalance_timeout": sb.REBALANCE_MS,
            "member_id": self.member_id[member], "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": COOPERATIVE, "metadata": metadata}], "reason": None,
        }  # fmt: skip
        future = sb._request(self.conn[member], sb.JOIN, sb.JOIN_V, **fields)
        self.sent["join"] += 1
        future.add_done_callback(lambda f: self.join_answered(member, f))

    def join_answered(self, member: str, future: asyncio.Future[Any]) -> None:
        resp = self._result(member, "JoinGroup", future)
        if resp is None or self.stopped:
            return
        if resp.error_code in (MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS):
            self.member_id[member] = resp.member_id or self.member_id[member]
            self.join(member)
            return
        if resp.error_code != 0:
            self.errors.append(f"{member} JoinGroup: error {int(resp.error_code)}")
            return
        generation = int(resp.generation_id)
        self.generation[member] = generation
        assignments: list[dict[str, Any]] = []
        if resp.leader == resp.member_id:
            started = time.perf_counter()
            self.leader_joined_at.append(started)
            try:
                assignments = cooperative_leader(resp.members, self.topics)
            except Exception as exc:
                self.errors.append(f"leader: {exc!r}")
                return
            self.leader_assign_s.append(time.perf_counter() - started)
            self.generations.append(generation)
        fields = {"group_id": self.group, "generation_id": generation, "member_id": self.member_id[member],
                  "group_instance_id": None, "protocol_type": "consumer", "protocol_name": COOPERATIVE,
                  "assignments": assignments}  # fmt: skip
        sync = sb._request(self.conn[member], sb.SYNC, sb.SYNC_V, **fields)
        self.sent["sync"] += 1
        sync.add_done_callback(lambda f: self.sync_answered(member, generation, f))
        self.schedule_heartbeat(member, self.interval_s)

    def sync_answered(self, member: str, generation: int, future: asyncio.Future[Any]) -> None:
        resp = self._result(member, "SyncGroup", future)
        if resp is None or self.stopped:
            return
        self.busy.discard(member)
        self.last_sync_at = time.perf_counter()
        if resp.error_code == REBALANCE_IN_PROGRESS:
            self.join(member)
            return
        if resp.error_code != 0:
            self.errors.append(f"{member} SyncGroup: error {int(resp.error_code)}")
            return
        assigned = {t: tuple(sorted(ps)) for t, ps in decode_assignment(resp.assignment).partitions.items() if ps}
        lost = any(set(ps) - set(assigned.get(t, ())) for t, ps in self.owned[member].items())
        self.owned[member] = assigned
        self.owned_generation[member] = generation
        if self.on_synced is not None:
            self.on_synced(member)
        if lost:  # revoked: onPartitionsRevoked, then rejoin at once
            self.revoking.add(member)
            self.join(member)
        elif member in self.heartbeat_due:
            self.heartbeat_due.discard(member)
            self.heartbeat(member)

    def stop(self) -> None:
        self.stopped = True
        for handle in self.timers.values():
            handle.cancel()
        self.timers.clear()


async def server_join_classic_run(port: int, topics: TopicIds, members: int, interval_ms: int) -> dict[str, Any]:
    """One member joining a loaded ``members``-member classic ``cooperative-sticky`` group (``cjoin``)."""
    ids = member_ids("c", members)
    total = sum(TOPICS.values())
    by_id = {topic_id: name for name, (topic_id, _) in topics.items()}
    shares = [{by_id[t]: tuple(ps) for t, ps in share.items()} for share in deal(topics, members)]
    interval_s = interval_ms / 1e3
    load = ClassicCooperativeLoad("cjoin", ids, shares, interval_s)
    joiner = "joiner"
    conns = await sb.open_members(port, members + 1)
    load.conn = dict(zip([*ids, joiner], conns, strict=True))
    loop = asyncio.get_running_loop()
    try:
        for i, m in enumerate(ids):  # phases spread evenly over one interval
            load.schedule_heartbeat(m, interval_s * i / members)
        await asyncio.sleep(interval_s * 1.5)  # every member has heartbeated at least once
        if load.errors:
            raise sb.WireError(f"before the join: {load.errors[:3]}")
        load.member_id[joiner] = ""
        load.generation[joiner] = -1
        load.owned[joiner] = {}
        load.owned_generation[joiner] = -1
        done: asyncio.Future[None] = loop.create_future()
        marks: dict[str, float] = {}
        joiner_generations: list[int] = []

        def on_synced(member: str) -> None:
            if member == joiner:
                joiner_generations.append(load.generation[joiner])
            if not load.owned[joiner] or done.done():
                return
            marks.setdefault("first", time.perf_counter())
            owned = [(t, p) for ps in load.owned.values() for t, pl in ps.items() for p in pl]
            if len(owned) == total and len(set(owned)) == total:
                marks["all"] = time.perf_counter()
                done.set_result(None)

        load.on_synced = on_synced
        sent_before = dict(load.sent)
        started = time.perf_counter()
        load.join(joiner)
        await sb.bounded(done, "the joiner holding its partitions", timeout=max(60.0, 20 * interval_s))
        deadline = time.perf_counter() + 2 * interval_s  # let the other members finish the last round
        while load.busy and time.perf_counter() < deadline and not load.errors:
            await asyncio.sleep(0.02)
        settled = None if load.busy else load.last_sync_at
        sent = {k: load.sent[k] - sent_before[k] for k in load.sent}
    finally:
        load.stop()
        for conn in conns:
            conn.close()
    if load.errors:
        raise sb.WireError(f"classic member errors: {load.errors[:3]}")
    return {
        "protocol": "classic cooperative-sticky",
        "members_before": members,
        "interval_ms": interval_ms,
        "to_first_partitions_ms": round((marks["first"] - started) * 1e3, 1),
        "to_all_partitions_ms": round((marks["all"] - started) * 1e3, 1),
        "to_group_settled_ms": None if settled is None else round((settled - started) * 1e3, 1),
        "joiner_partitions": sum(len(ps) for ps in load.owned[joiner].values()),
        "joiner_generations": joiner_generations,
        "rounds": len(load.generations),
        "join_phase_ends_ms": [round((t - started) * 1e3, 1) for t in load.leader_joined_at],
        "leader_assign_ms": [round(s * 1e3, 1) for s in load.leader_assign_s],
        "requests_in_window": sent,
        "members_sending_other_requests": len(load.other_requests),  # JoinGroup / SyncGroup
        "members_revoking": len(load.revoking),
    }


def server_join(args: argparse.Namespace) -> list[dict[str, Any]]:
    members = args.join_members
    protocols = [p for p in args.join_protocols.split(",") if p]
    server = Server(
        args.fsync,
        ["--consumer-session-timeout-ms", str(LONG_MS), "--consumer-heartbeat-interval-ms", str(args.interval_ms)],
    )
    host = "/" + sb.HOST
    topics = prepare_data_dir(
        server.data,
        [
            lambda t: consumer_group_records(
                "join", member_ids("j", members), t, client_id=sb.CLIENT_ID, client_host=host
            ),
            lambda t: classic_group_records(
                "cjoin", member_ids("c", members), t, client_id=sb.CLIENT_ID, client_host=host, protocol=COOPERATIVE
            ),
        ],
    )
    rows = []
    try:
        server.proc.start()
        for protocol in protocols:
            if protocol == "kip848":
                run = server_join_run(server.proc.port, topics, members, args.interval_ms, args.join_connections)
            elif protocol == "classic":
                run = server_join_classic_run(server.proc.port, topics, members, args.interval_ms)
            else:
                raise SystemExit(f"--join-protocols: unknown {protocol!r} (kip848, classic)")
            row = asyncio.run(run)
            print("server join:", json.dumps(row), flush=True)
            rows.append(row)
    except BaseException:
        print(server.proc.log_tail(), file=sys.stderr)
        raise
    finally:
        server.proc.stop()
    by_protocol = {row["protocol"]: row for row in rows}
    kip, classic = by_protocol.get("KIP-848"), by_protocol.get("classic cooperative-sticky")
    if kip and classic:
        ratio = round(classic["to_all_partitions_ms"] / kip["to_all_partitions_ms"], 2)
        print("server join: classic / KIP-848 time to the whole share:", ratio, flush=True)
    return rows


# ---------------------------------------------------------------------------------------------------------------
# simulator


class UncheckedSimulator(Simulator):
    """The simulator without its per-event quiescence check (O(members) per event); ``final_check()`` runs
    it once at the end. Only for benchmarks: the tests keep every check."""

    checking = False

    def expected_if_quiescent(self) -> Any:
        if not self.checking:
            return None
        return super().expected_if_quiescent()

    def final_check(self) -> None:
        self.checking = True
        self.checker.quiescent(self.now, self.expected_if_quiescent())


def join_scenario(protocol: str, members: int, interval_ms: int, topics: dict[str, int]) -> Scenario:
    names = [f"c{i:04d}" for i in range(members + 1)]
    join_at = 60_000
    specs = tuple(
        MemberSpec(
            name=name,
            topics=tuple(topics),
            strategies=("cooperative-sticky",),
            protocol=protocol,
            assignor="uniform",
            session_timeout_ms=45_000,
            heartbeat_interval_ms=interval_ms,
            rebalance_timeout_ms=60_000,
            request_timeout_ms=30_000,
            auto_commit=False,
        )
        for name in names
    )
    events = [ScenarioEvent(at_ms=i * 10, action="join", member=name) for i, name in enumerate(names[:-1])]
    events.append(ScenarioEvent(at_ms=join_at, action="join", member=names[-1]))
    return Scenario(
        name=f"join-{protocol}-{members}",
        duration_ms=join_at + 30_000,
        measure_from_ms=join_at,
        topics=dict(topics),
        members=specs,
        events=tuple(events),
        network=LinkSpec(latency_ms=1),
        coordinator={
            "group_initial_rebalance_delay_ms": 0,
            "consumer_group_heartbeat_interval_ms": interval_ms,
            "consumer_group_session_timeout_ms": 45_000,
        },
    )


def sim_join(protocol: str, members: int, interval_ms: int, unchecked: bool) -> dict[str, Any]:
    topics = {t: members for t in TOPICS}  # 10 partitions per member before the join, as on the server
    scenario = join_scenario(protocol, members, interval_ms, topics)
    started = time.perf_counter()
    sim = UncheckedSimulator(scenario, 0) if unchecked else Simulator(scenario, 0)
    sim.run()
    if isinstance(sim, UncheckedSimulator):
        sim.final_check()
    sim.finish()
    wall = time.perf_counter() - started
    joiner = scenario.members[-1].name
    join_at = scenario.events[-1].at_ms
    got = next(
        (e["t"] for e in sim.log.events if e["type"] == "assigned" and e["member"] == joiner and e["t"] >= join_at),
        None,
    )
    states = [e for e in sim.log.events if e["type"] == "group_state"]
    generations = {e["generation"] for e in states if e["t"] >= join_at and (got is None or e["t"] <= got)}
    before = max((e["generation"] for e in states if e["t"] < join_at), default=0)
    return {
        "protocol": "classic cooperative" if protocol == "classic" else "KIP-848 consumer",
        "members_before": members,
        "partitions": sum(topics.values()),
        "interval_ms": interval_ms,
        "checks": "end only" if unchecked else "every event",
        "time_to_partitions_ms": None if got is None else got - join_at,
        "rounds": len([g for g in generations if g > before]),
        "violations": len(sim.checker.violations),
        "quiescent_at_end": sim.quiescent(),
        "sim_wall_s": round(wall, 1),
    }


# ---------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="core,server,server-join,sim", help="comma-separated parts to run")
    parser.add_argument("--hb-members", type=int, default=10_000)
    parser.add_argument("--hb-rounds", type=int, default=4, help="core: heartbeat rounds per protocol")
    parser.add_argument("--server-layouts", default="10000:10,10000:100,1000:10", help="MEMBERS:CONNECTIONS,...")
    parser.add_argument("--hb-seconds", type=float, default=8.0)
    parser.add_argument("--hb-warmup", type=float, default=1.0)
    parser.add_argument("--hb-max-requests", type=int, default=5_000_000)
    parser.add_argument("--fsync", default="always", choices=("always", "interval", "never"))
    parser.add_argument("--join-members", type=int, default=1_000)
    parser.add_argument("--join-connections", type=int, default=10, help="server-join: KIP-848 members' connections")
    parser.add_argument(
        "--join-protocols", default="kip848,classic", help="server-join: the runs, in order (kip848, classic)"
    )
    parser.add_argument("--interval-ms", type=int, default=3_000, help="heartbeat interval, both protocols")
    parser.add_argument("--sim-members", default="100", help="comma-separated group sizes for the simulator")
    parser.add_argument("--sim-unchecked", action="store_true")
    parser.add_argument("--hetero-members", default="1000,10000", help="core-join-hetero: comma-separated sizes")
    parser.add_argument("--hetero-repeats", type=int, default=3, help="core-join-hetero: fresh groups per size")
    parser.add_argument("--classic-members", type=int, default=10_000, help="core-classic-rebalance: group size")
    parser.add_argument("--classic-rounds", type=int, default=6, help="core-classic-rebalance: rebalances")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    parts = set(args.only.split(","))
    results: dict[str, Any] = {"python": sys.version.split()[0], "args": vars(args)}
    if "core" in parts:
        core = core_heartbeats(args.hb_members, args.hb_rounds, args.join_members, args.profile)
        profiles = [core.pop("profile_heartbeats", None), core["join"].pop("profile", None)]
        results["core"] = core
        print("core:", json.dumps(core), flush=True)
        for text in profiles:
            if text:
                print(text, flush=True)
    if "core-join-hetero" in parts:
        rows = [core_join_heterogeneous(int(n), args.hetero_repeats) for n in args.hetero_members.split(",")]
        for row in rows:
            print("core heterogeneous joins:", json.dumps(row), flush=True)
        results["core_join_heterogeneous"] = rows
    if "core-join-hetero-aside" in parts:
        rows = [core_join_heterogeneous(int(n), args.hetero_repeats, True) for n in args.hetero_members.split(",")]
        for row in rows:
            print("core heterogeneous joins, computed aside:", json.dumps(row), flush=True)
        results["core_join_heterogeneous_aside"] = rows
    if "core-classic-rebalance" in parts:
        row = core_classic_rebalance(args.classic_members, args.classic_rounds)
        print("core classic rebalance:", json.dumps(row), flush=True)
        results["core_classic_rebalance"] = row
    if "server" in parts:
        results["server"] = server_heartbeats(args)
    if "server-join" in parts:
        results["server_join"] = server_join(args)
    if "sim" in parts:
        rows = []
        for n in (int(x) for x in args.sim_members.split(",")):
            for protocol in ("classic", "consumer"):
                row = sim_join(protocol, n, args.interval_ms, args.sim_unchecked)
                print("simulator join:", json.dumps(row), flush=True)
                rows.append(row)
        results["sim_join"] = rows
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
