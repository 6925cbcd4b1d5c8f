"""What ``regroup groups`` reads about consumer groups, over Kafka's own APIs (through ``groups_wire``):

* ``list_groups``: ListGroups on every broker (each lists the groups it coordinates; v5 gives each group's
  type), then per type DescribeGroups (classic), ConsumerGroupDescribe (consumer) or ShareGroupDescribe (share)
  on that broker, and the total lag of classic and consumer groups;
* ``describe_group``: one group's type (ListGroups on its coordinator), state, generation or epoch,
  assignor and members with their assignments (a classic member's assignment decoded from the consumer
  embedded protocol);
* ``group_lag``: per partition the committed offset (OffsetFetch on the coordinator), the log end offset
  (ListOffsets ``latest`` on the partition's leader), their difference and the member that owns the partition;
* ``group_timeline``: a group's rebalances and partition ownership as ``regroup serve`` keeps them, read from its
  HTTP console (``GET /api/groups/<id>/timeline``; Kafka has no API for it).

Classic DescribeGroups carries no generation, so a classic group's ``generation`` is None. A group that no
broker lists is a ``GroupsError``.
"""

from __future__ import annotations

import urllib.parse
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from regroup.assignors.consumer_protocol import decode_assignment
from regroup.assignors.consumer_protocol_types import ProtocolDecodeError
from regroup.cli.groups_wire import Cluster, Connection, WireError, error_name, http_json

__all__ = [
    "Group",
    "GroupsError",
    "Member",
    "PartitionLag",
    "describe_group",
    "group_lag",
    "group_timeline",
    "list_groups",
]

LIST_OFFSETS: Final = 2
OFFSET_FETCH: Final = 9
DESCRIBE_GROUPS: Final = 15
LIST_GROUPS: Final = 16
CONSUMER_GROUP_DESCRIBE: Final = 69
SHARE_GROUP_DESCRIBE: Final = 77
LATEST: Final = -1
CLASSIC: Final = "classic"
CONSUMER: Final = "consumer"
SHARE: Final = "share"


class GroupsError(WireError):
    """The broker answered, but not with the group asked for (unknown group, an error code)."""


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    #: topic -> sorted partitions
    assignment: dict[str, list[int]]


@dataclass(slots=True)
class Group:
    group_id: str
    type: str  # classic | consumer | share
    state: str
    #: a classic group's protocol (its assignor, e.g. ``range``) or a consumer/share group's assignor
    protocol: str
    #: a consumer/share group's epoch; None for a classic group (DescribeGroups does not carry the generation)
    epoch: int | None = None
    members: list[Member] = field(default_factory=list)
    #: the total lag (classic and consumer groups), set by ``list_groups``
    lag: int | None = None


@dataclass(frozen=True, slots=True)
class PartitionLag:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    owner: str | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.end is None:
            return None
        return self.end - self.committed


def list_groups(cluster: Cluster) -> list[Group]:
    """Every group of the cluster, described, with the total lag of classic and consumer groups."""
    groups: list[Group] = []
    for broker in cluster.all_brokers():
        listed = _listed(broker)
        by_type: dict[str, list[str]] = defaultdict(list)
        for group_id, group_type in listed.items():
            by_type[group_type].append(group_id)
        for group_type, ids in by_type.items():
            for group in _describe(broker, group_type, sorted(ids)):
                if group.type != SHARE:
                    rows = _lag_rows(cluster, broker, group)
                    group.lag = sum(lag for row in rows if (lag := row.lag) is not None)
                groups.append(group)
    return sorted(groups, key=lambda g: g.group_id)


def describe_group(cluster: Cluster, group_id: str) -> Group:
    coordinator = cluster.coordinator(group_id)
    return _describe(coordinator, _type_of(coordinator, group_id), [group_id])[0]


def group_lag(cluster: Cluster, group_id: str) -> tuple[Group, list[PartitionLag]]:
    """The group and one row per partition it has a committed offset for or a member owns."""
    coordinator = cluster.coordinator(group_id)
    group = _describe(coordinator, _type_of(coordinator, group_id), [group_id])[0]
    if group.type == SHARE:
        raise GroupsError(f"group {group_id!r} is a share group: it has no committed offsets, so no lag")
    return group, _lag_rows(cluster, coordinator, group)


def group_timeline(
    base: urllib.parse.SplitResult, group_id: str, since_ms: int | None, until_ms: int | None, timeout: float
) -> dict[str, Any]:
    """The timeline document of ``group_id`` (``{"group_id", "rebalances", "ownership"}``) from the HTTP console
    at ``base``; an unknown group, or any other refusal, is a ``GroupsError``."""
    query = {name: str(value) for name, value in (("since_ms", since_ms), ("until_ms", until_ms)) if value is not None}
    path = "/api/groups/" + urllib.parse.quote(group_id, safe="") + "/timeline"
    status, doc = http_json(base, path + ("?" + urllib.parse.urlencode(query) if query else ""), timeout)
    if status == 404 and isinstance(doc, dict) and "not found" in str(doc.get("error", "")):
        raise GroupsError(f"unknown group {group_id!r} (not in the rebalance history)")
    if status != 200 or not isinstance(doc, dict) or not isinstance(doc.get("rebalances"), list):
        message = doc.get("error") if isinstance(doc, dict) else None
        raise GroupsError(f"timeline of group {group_id!r}: HTTP {status}" + (f" ({message})" if message else ""))
    return doc


def _listed(broker: Connection) -> dict[str, str]:
    """group id -> type of the groups ``broker`` coordinates."""
    version, answer = broker.call(LIST_GROUPS, 0, 5, states_filter=[], types_filter=[])
    _check(int(answer.error_code), f"ListGroups on {broker.address}")
    return {g.group_id: (g.group_type.lower() if version >= 5 else CLASSIC) for g in answer.groups}


def _type_of(coordinator: Connection, group_id: str) -> str:
    group_type = _listed(coordinator).get(group_id)
    if group_type is None:
        raise GroupsError(f"unknown group {group_id!r}")
    return group_type


def _describe(broker: Connection, group_type: str, ids: list[str]) -> list[Group]:
    if group_type == CONSUMER:
        _, answer = broker.call(CONSUMER_GROUP_DESCRIBE, 0, 1, group_ids=ids, include_authorized_operations=False)
        return [_modern(g, CONSUMER) for g in answer.groups]
    if group_type == SHARE:
        _, answer = broker.call(SHARE_GROUP_DESCRIBE, 1, 1, group_ids=ids, include_authorized_operations=False)
        return [_modern(g, SHARE) for g in answer.groups]
    _, answer = broker.call(DESCRIBE_GROUPS, 0, 6, groups=ids, include_authorized_operations=False)
    return [_classic(g, group_type) for g in answer.groups]


def _modern(described: Any, group_type: str) -> Group:
    _check(int(described.error_code), f"group {described.group_id!r}", getattr(described, "error_message", None))
    members = [
        Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host,
            instance_id=getattr(m, "instance_id", None),
            assignment=_sorted((t.topic_name, t.partitions) for t in m.assignment.topic_partitions),
        )
        for m in described.members
    ]
    return Group(
        described.group_id,
        group_type,
        described.group_state,
        described.assignor_name,
        int(described.group_epoch),
        members,
    )


def _classic(described: Any, group_type: str) -> Group:
    _check(int(described.error_code), f"group {described.group_id!r}", getattr(described, "error_message", None))
    if described.group_state == "Dead":
        raise GroupsError(f"unknown group {described.group_id!r}")
    members = [
        Member(
            member_id=m.member_id,
            client_id=m.client_id,
            host=m.client_host,
            instance_id=m.group_instance_id,
            assignment=_classic_assignment(described.protocol_type, m.member_assignment),
        )
        for m in described.members
    ]
    return Group(described.group_id, group_type, described.group_state, described.protocol_data, None, members)


def _classic_assignment(protocol_type: str, blob: bytes | None) -> dict[str, list[int]]:
    """A classic member's assignment; empty when the group is not a consumer group or has none yet."""
    if protocol_type != "consumer" or not blob:
        return {}
    try:
        decoded = decode_assignment(blob)
    except ProtocolDecodeError:
        return {}
    return _sorted(decoded.partitions.items())


def _sorted(pairs: Iterable[tuple[str, Iterable[int]]]) -> dict[str, list[int]]:
    out: dict[str, set[int]] = defaultdict(set)
    for topic, partitions in pairs:
        out[topic].update(int(p) for p in partitions)
    return {topic: sorted(out[topic]) for topic in sorted(out)}


def _lag_rows(cluster: Cluster, coordinator: Connection, group: Group) -> list[PartitionLag]:
    committed = _committed(coordinator, group.group_id)
    owners = {(t, p): m.member_id for m in group.members for t, ps in m.assignment.items() for p in ps}
    keys = sorted(set(committed) | set(owners))
    ends = _end_offsets(cluster, keys)
    return [PartitionLag(t, p, committed.get((t, p)), ends.get((t, p)), owners.get((t, p))) for t, p in keys]


def _committed(coordinator: Connection, group_id: str) -> dict[tuple[str, int], int]:
    version, answer = coordinator.call(
        OFFSET_FETCH,
        2,
        9,
        group_id=group_id,
        topics=None,
        groups=[{"group_id": group_id, "member_id": None, "member_epoch": -1, "topics": None}],
        require_stable=False,
    )
    if version >= 8:
        answer = answer.groups[0]
    _check(int(answer.error_code), f"OffsetFetch of group {group_id!r}")
    return {
        (t.name, int(p.partition_index)): int(p.committed_offset)
        for t in answer.topics
        for p in t.partitions
        if int(p.error_code) == 0 and int(p.committed_offset) >= 0
    }


def _end_offsets(cluster: Cluster, keys: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> log end offset, asked of each partition's leader; unknown ones left out."""
    leaders = cluster.leaders(t for t, _ in keys)
    by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for key in keys:
        leader = leaders.get(key)
        if leader is not None and leader >= 0:
            by_leader[leader][key[0]].append(key[1])
    ends: dict[tuple[str, int], int] = {}
    for leader, topics in sorted(by_leader.items()):
        _, answer = cluster.node(leader).call(
            LIST_OFFSETS,
            1,
            10,
            replica_id=-1,
            isolation_level=0,
            timeout=int(cluster.timeout * 1000),
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": LATEST, "max_num_offsets": 1}
                        for p in partitions
                    ],
                }
                for topic, partitions in sorted(topics.items())
            ],
        )
        for t in answer.topics:
            for p in t.partitions:
                if int(p.error_code) == 0 and int(p.offset) >= 0:
                    ends[(t.name, int(p.partition_index))] = int(p.offset)
    return ends


def _check(code: int, what: str, message: str | None = None) -> None:
    if code == 69:  # GROUP_ID_NOT_FOUND
        raise GroupsError(f"unknown {what}" if what.startswith("group ") else f"{what}: {error_name(code)}")
    if code != 0:
        raise GroupsError(f"{what}: {error_name(code)}" + (f" ({message})" if message else ""))
