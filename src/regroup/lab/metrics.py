"""Per-rebalance and per-run metrics of one group's event log (the simulator's schema, docs/simulator.md),
as plain dicts keyed by the columns of ``tables``. Pure functions of the events; exact definitions in
docs/lab.md ("Metrics").

Rebalance episodes, ``rounds``, ``moved``, ``revoked`` and ``unowned_partition_ms`` are the simulator's own
summary (``regroup.sim.summary``); this module adds what the lab compares strategies with: the assignment
each rebalance produced (balance, fraction kept), re-assignments, the trigger, and payload bytes.

A log that never shows member processes (no ``subscription`` events, e.g. ``regroup serve --events``) has
no processing ownership, so ``revoked``, ``reassigned`` and ``unowned_partition_ms`` are null there, as are
join payloads unless a fixed metadata size is given; its protocol, strategy and group type come from the
``group_state`` details the server writes (``type=consumer`` or ``share``, ``protocol=``, ``rebalance=``).

A rebalance that ends with the group empty (every member left, e.g. the clients closing at the end of a run)
is the ``emptied`` phase, not counted with the churn phase's rebalances. Membership changes count each
``join``, ``leave``, ``crash`` and ``restart`` once and a ``bounce`` (a clean close and a new process at once)
twice, as the ``leave`` and ``restart`` of a rolling restart's step; a server log's ``Joined``/``Left`` rows
once each. An event log's churn pattern is read from those changes (``CHURN_OF``).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from regroup.assignors import metrics as quality
from regroup.assignors.registry import server_side_name
from regroup.lab import payload
from regroup.lab.share_metrics import first_delivery_waits, share_values
from regroup.model.eventlog import detail_fields
from regroup.sim.eventlog import (
    API,
    DETAIL,
    ERROR,
    GENERATION,
    MEMBER,
    STATE,
    TYPE,
    Event,
    Pairs,
    Row,
    T,
    as_rows,
    event_count,
    partitions_of,
)
from regroup.sim.scenario import ShareSpec
from regroup.sim.summary import Rebalance, summarize_rows

#: membership changes each scenario action makes (a bounce: the old process leaves, a new one joins)
CHANGES: Final = {"join": 1, "leave": 1, "crash": 1, "restart": 1, "bounce": 2}
MEMBERSHIP_ACTIONS: Final = frozenset(CHANGES)
#: group states that end a rebalance with no member left
EMPTY_STATES: Final = frozenset({"Empty", "Dead"})
#: the protocols whose rebalances are JoinGroup and SyncGroup rounds
CLASSIC_PROTOCOLS: Final = frozenset({"eager", "cooperative"})
#: KIP-932 share groups: no rebalances and no partition ownership, so none of the rebalance costs apply
SHARE_PROTOCOL: Final = "share"
AssignmentMap = dict[str, dict[str, list[int]]]
SUMMED: Final = (
    "duration_ms",
    "rounds",
    "unowned_partition_ms",
    "moved",
    "revoked",
    "reassigned",
    "join_bytes_leader",
    "join_bytes_all",
    "sync_bytes",
    "heartbeat_bytes",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What the log itself does not say: where it came from and how it was produced."""

    run_id: str
    source: str
    group_id: str | None = None
    measure_from_ms: int = 0
    metadata_bytes: int | None = None  # fixed metadata size per member (payload.join_bytes)
    axes: Mapping[str, Any] = field(default_factory=dict)  # the grid's values, for sweep runs
    share_spec: ShareSpec | None = None  # a sweep's share run: its log's production schedule
    rate_per_partition_s: int | None = None  # a sweep run: its workload's production rate


def parse_labels(text: str) -> dict[str, list[int]]:
    """``[t0-1,t1-0]`` → ``{"t0": [1], "t1": [0]}`` (the simulator's ``topic-partition`` labels)."""
    out: dict[str, list[int]] = {}
    for label in text.strip("[]").split(","):
        if label:
            topic, _, partition = label.rpartition("-")
            out.setdefault(topic, []).append(int(partition))
    return out


#: the event types ``_Observed`` reads, by a code of their own (one lookup per event picks its branch)
_ASSIGNMENT: Final = 1
_ASSIGNED: Final = 2
_SUBSCRIPTION: Final = 3
_REQUEST: Final = 4
_RESPONSE: Final = 5
_MEMBER_STATE: Final = 6
_GROUP_STATE: Final = 7
_ACTION: Final = 8
_VIOLATION: Final = 9
_READ: Final = {
    "group_assignment": _ASSIGNMENT,
    "assigned": _ASSIGNED,
    "subscription": _SUBSCRIPTION,
    "request_sent": _REQUEST,
    "response_sent": _RESPONSE,
    "member_state": _MEMBER_STATE,
    "group_state": _GROUP_STATE,
    "action": _ACTION,
    "violation": _VIOLATION,
}
#: the requests (and their responses) ``_Observed`` reads
_JOIN: Final = 1
_HEARTBEAT: Final = 2
_APIS: Final = {"JoinGroup": _JOIN, "ConsumerGroupHeartbeat": _HEARTBEAT}


class _Observed:
    """One pass over the events: what the lab needs beyond the simulator's summary."""

    def __init__(self, events: Sequence[Row], metadata_bytes: int | None) -> None:
        # generation -> its ``group_assignment`` rows (made into an assignment when asked: ``assignment``)
        self.given: dict[int, list[Row]] = {}
        self.members: dict[int, set[str]] = {}  # generation -> members (JoinGroup/heartbeat answers, or fold)
        self.joined: set[int] = set()  # generations formed by JoinGroup (the classic protocol)
        self.metadata: dict[int, dict[str, int]] = {}  # generation -> member -> metadata bytes
        self.assigned_at: list[tuple[int, int]] = []  # (time, partitions) of each ``assigned`` event
        # KIP-848 heartbeat fields: (t, bytes, starts a change) — see _heartbeat_bytes
        self.heartbeat_payload: list[tuple[int, int, bool]] = []
        self.actions: list[tuple[int, str]] = []
        self.changes: list[tuple[int, int]] = []  # (time, membership changes) of scenario actions or joined/left
        self.steps: list[tuple[int, str, str]] = []  # (time, kind, member) of each membership action or row
        self.states: list[tuple[int, str]] = []  # (time, state) of each group_state
        self.strategy: str | None = None
        self.protocol: str | None = None
        self.group_type: str | None = None  # consumer (KIP-848) or classic, from a server log's group_state
        self.style: str | None = None  # a server log's classic rebalance style (rebalance=)
        self.has_members = False
        self.violations = 0
        self._topics: dict[str, tuple[str, ...]] = {}
        # one tuple for equal subscriptions: the metadata sizes' keys then compare them by identity
        self._distinct: dict[tuple[str, ...], tuple[str, ...]] = {}
        # metadata size by (JoinGroup detail, topics): members of a generation mostly send the same owned
        # partitions (none, when eager), and the size depends on nothing else
        self._sizes: dict[tuple[str, tuple[str, ...]], int] = {}
        self._last_join: dict[str, str] = {}
        self._present: set[str] = set()
        in_order: list[Row] = events if isinstance(events, list) else list(events)  # (a list is iterated directly)
        for e in in_order:
            code = _READ.get(e[TYPE], 0)
            if code == 0:
                continue
            if code == _REQUEST:
                self._request(e)
            elif code == _RESPONSE:
                self._response(e, metadata_bytes)
            elif code == _MEMBER_STATE:
                if not self.has_members:
                    self._member_state(e)
            elif code == _ASSIGNMENT:
                given = self.given.get(e[GENERATION])
                if given is None:
                    self.given[e[GENERATION]] = [e]
                else:
                    given.append(e)
            elif code == _ASSIGNED:
                self.assigned_at.append((e[T], len(partitions_of(e))))
            elif code == _SUBSCRIPTION:
                self.has_members = True
                topics = tuple(e[DETAIL].split(",")) if e[DETAIL] else ()
                self._topics[e[MEMBER]] = self._distinct.setdefault(topics, topics)
                if e[STATE]:  # a log whose members switch protocols (a rolling upgrade) is "mixed"
                    self.protocol = e[STATE] if self.protocol in (None, e[STATE]) else "mixed"
            elif code == _GROUP_STATE:
                self._group_state(e, metadata_bytes)
            elif code == _ACTION:
                self.actions.append((e[T], f"{e[DETAIL]} {e[MEMBER]}" if e[MEMBER] else e[DETAIL]))
                weight = CHANGES.get(e[DETAIL], 0)
                if weight:
                    self.changes.append((e[T], weight))
                    self.steps.append((e[T], e[DETAIL], e[MEMBER] or ""))
            else:
                self.violations += 1

    def _request(self, e: Row) -> None:
        api = _APIS.get(e[API], 0)
        if api == _JOIN:
            self._last_join[e[MEMBER]] = e[DETAIL] or ""
        elif api == _HEARTBEAT:
            fields = detail_fields(e[DETAIL])
            joining = (e[GENERATION] or 0) <= 0
            if "topics" in fields:  # a join or a subscription change: it starts the next rebalance
                topic_names = [t for t in fields["topics"].split(",") if t]
                self.heartbeat_payload.append((e[T], payload.heartbeat_topics_bytes(topic_names), True))
            if "owned" in fields:  # what the member owns: an acknowledgement (or nothing, when joining)
                acknowledged = payload.heartbeat_owned_bytes(parse_labels(fields["owned"]))
                self.heartbeat_payload.append((e[T], acknowledged, joining))

    def _response(self, e: Row, metadata_bytes: int | None) -> None:
        api = _APIS.get(e[API], 0)
        if api == 0 or e[ERROR] != "NONE":
            return
        if api == _HEARTBEAT:
            self._member_of(e[GENERATION], e[MEMBER])  # KIP-848: member of that epoch
            fields = detail_fields(e[DETAIL])
            if "assignment" in fields:
                size = payload.heartbeat_assignment_bytes(parse_labels(fields["assignment"]))
                self.heartbeat_payload.append((e[T], size, False))
            return
        generation, member = e[GENERATION], e[MEMBER]
        self._member_of(generation, member)
        self.joined.add(generation)
        if metadata_bytes is not None:
            size = metadata_bytes
        else:
            key = (self._last_join.get(member, ""), self._topics.get(member, ()))
            known = self._sizes.get(key)
            if known is None:
                owned = parse_labels(detail_fields(key[0]).get("owned", "[]"))
                known = self._sizes[key] = payload.subscription_bytes(key[1], owned, generation)
            size = known
        sizes = self.metadata.get(generation)
        if sizes is None:
            sizes = self.metadata[generation] = {}
        sizes[member] = size

    def _member_of(self, generation: Any, member: Any) -> None:
        """Record ``member`` in ``generation`` (the values as the row has them, unchecked)."""
        members = self.members.get(generation)
        if members is None:
            members = self.members[generation] = set()
        members.add(member)

    def _member_state(self, e: Row) -> None:
        """Membership as the member states show it (a log with no member processes)."""
        if e[STATE] == "Joined":
            self._present.add(e[MEMBER])
            self.changes.append((e[T], 1))
            self.steps.append((e[T], "join", e[MEMBER] or ""))
        elif e[STATE] == "Left":
            self._present.discard(e[MEMBER])
            self.changes.append((e[T], 1))
            self.steps.append((e[T], "leave", e[MEMBER] or ""))

    def _group_state(self, e: Row, metadata_bytes: int | None) -> None:
        self.states.append((e[T], e[STATE]))
        fields = detail_fields(e[DETAIL])
        # a server's detail (``type=``; a share group's epochs and server-side assignor read as KIP-848's) or the
        # simulator's (``assignor=``)
        kip848 = fields.get("type") in ("consumer", "share") or "assignor" in fields
        self.group_type = "consumer" if kip848 else "classic"
        chosen = fields.get("protocol") or fields.get("assignor")  # classic / KIP-848 groups
        # (an empty group names only the default assignor: the one in use is that of the last group with members)
        if chosen not in (None, "None") and e[STATE] not in EMPTY_STATES:
            self.strategy = (server_side_name(chosen) or chosen) if kip848 else chosen
        if fields.get("rebalance"):
            self.style = fields["rebalance"]
        if e[STATE] == "CompletingRebalance" and not self.has_members:
            self.members[e[GENERATION]] = set(self._present)
            if metadata_bytes is not None:
                self.metadata[e[GENERATION]] = dict.fromkeys(self._present, metadata_bytes)

    def assignment(self, generation: int) -> AssignmentMap:
        """The stored assignment of a generation, members with nothing included (as ``{}``); each topic's
        partitions ascending."""
        given: AssignmentMap = {}
        ascending = True  # (rows list their partitions in order: sorting is mostly not needed)
        for e in self.given.get(generation, []):
            per_topic = given.get(e[MEMBER])
            if per_topic is None:
                per_topic = given[e[MEMBER]] = {}
            pairs: Pairs = partitions_of(e)
            partitions: list[int] | None = None
            last_topic = ""
            for topic, partition in pairs:  # (each topic's partitions come together: one lookup per topic)
                if partitions is None or topic != last_topic:
                    partitions = per_topic.get(topic)
                    if partitions is None:
                        partitions = per_topic[topic] = []
                    last_topic = topic
                if partitions and partition < partitions[-1]:
                    ascending = False
                partitions.append(partition)
        out: AssignmentMap = {m: {} for m in self.members.get(generation, set())}
        for member, per_topic in given.items():
            out[member] = per_topic if ascending else {t: sorted(ps) for t, ps in per_topic.items()}
        return out


def analyze(events: Sequence[Event], ctx: Context) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the run's row, one row per rebalance) for one group's events (as dicts) in log order."""
    return analyze_rows(as_rows(events), ctx)


def analyze_rows(
    events: Sequence[Row], ctx: Context, settled: bool | None = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``analyze`` for the events as rows (``EventLog.rows``). ``settled``: whether the run was played out until
    the group settled (a sweep knows; for a log it is read from the log's end)."""
    seen = _Observed(events, ctx.metadata_bytes)
    summary = summarize_rows(events, 0, details=False)
    episodes = summary.rebalances
    protocol = ctx.axes.get("protocol", seen.protocol)
    if protocol is None and not seen.has_members:  # a server log: the group's type, a classic group's style
        protocol = "consumer" if seen.group_type == "consumer" else seen.style
    keys = {
        "run_id": ctx.run_id,
        "source": ctx.source,
        "group_id": ctx.group_id,
        "strategy": ctx.axes.get("strategy", seen.strategy),
        "protocol": protocol,
    }
    rows: list[dict[str, Any]] = []
    previous: AssignmentMap | None = None
    previous_end = -1
    heartbeat = _heartbeat_bytes(episodes, seen.heartbeat_payload)
    state_times = [t for t, _ in seen.states]
    for index, ep in enumerate(episodes):
        current = seen.assignment(ep.generation)
        ended = bisect.bisect_right(state_times, ep.end_ms) - 1  # the last group state by its end
        # (empty with no member in its generation: a consumer group converted back to classic is Dead too)
        emptied = ended >= 0 and seen.states[ended][1] in EMPTY_STATES and not current
        rows.append(
            {
                **keys,
                "members": ctx.axes.get("members"),
                "index": index,
                **_rebalance(ep, seen, current, previous, previous_end, ctx, protocol, emptied),
                "heartbeat_bytes": heartbeat[index] if seen.heartbeat_payload else None,
            }
        )
        if current:
            previous = current
        previous_end = ep.end_ms
    # membership changes inside a rebalance that emptied the group are its members leaving, not churn
    windows = [(rows[i - 1]["end_ms"] if i else -1, r["end_ms"]) for i, r in enumerate(rows) if r["phase"] == "emptied"]
    if windows:
        seen.changes = [(t, n) for t, n in seen.changes if not any(lo < t <= hi for lo, hi in windows)]
        seen.steps = [step for step in seen.steps if not any(lo < step[0] <= hi for lo, hi in windows)]
    run = _run(keys, events, seen, rows, previous, ctx)
    tail = summary.tail
    if settled is None:  # a log: nothing in progress at its end (and, with members, every partition owned)
        settled = tail.settled if seen.has_members else tail.open_since_ms is None
    run["settled"] = settled
    owned = seen.has_members and protocol != SHARE_PROTOCOL
    run["cut_off_unowned_partition_ms"] = tail.unowned_partition_ms if owned else None
    if run["unowned_partition_ms"] is not None:
        run["unowned_partition_ms"] += tail.unowned_partition_ms
    waits = None
    if ctx.share_spec is not None and summary.share is not None:
        waits = first_delivery_waits(events, ctx.share_spec, ctx.measure_from_ms)
    if summary.share is not None or ctx.rate_per_partition_s is not None:  # (else every share column is null)
        run.update(share_values(summary.share, waits, ctx.rate_per_partition_s))
    if protocol == SHARE_PROTOCOL:  # a share group has nothing to settle: drained, every record done with
        run["settled"] = run["share_undone"] == 0
    return run, rows


def _heartbeat_bytes(episodes: Sequence[Rebalance], sent: Sequence[tuple[int, int, bool]]) -> list[int]:
    """KIP-848 heartbeat payload per episode, attributed by time: a subscription (a join or a change) to the
    first rebalance that starts at or after it was sent, an assignment or an acknowledgement to the last one
    that started at or before it (the one in progress, or the one it completes). What fits no episode is not
    counted."""
    starts = [ep.start_ms for ep in episodes]
    totals = [0] * len(episodes)
    for t, size, starts_change in sent:
        index = bisect.bisect_left(starts, t) if starts_change else bisect.bisect_right(starts, t) - 1
        if 0 <= index < len(episodes):
            totals[index] += size
    return totals


def _rebalance(
    ep: Rebalance,
    seen: _Observed,
    current: AssignmentMap,
    previous: AssignmentMap | None,
    previous_end: int,
    ctx: Context,
    protocol: str | None,
    emptied: bool,
) -> dict[str, Any]:
    rounds = range(ep.generation - ep.rounds + 1, ep.generation + 1)
    join_leader = join_all = None
    if all(g in seen.metadata for g in rounds):
        per_round = [payload.join_bytes(list(seen.metadata[g].values())) for g in rounds]
        join_leader, join_all = sum(r[0] for r in per_round), sum(r[1] for r in per_round)
    sync = payload.sync_bytes([payload.assignment_bytes(pt) for pt in current.values()])
    triggers = [what for t, what in seen.actions if previous_end < t <= ep.start_ms]
    kept_base = previous if previous and any(previous.values()) else None
    loads = quality.plain_loads(current)
    return {
        "phase": "formation" if ep.start_ms < ctx.measure_from_ms else "emptied" if emptied else "churn",
        "trigger": "; ".join(triggers) or None,
        "generation": ep.generation,
        "start_ms": ep.start_ms,
        "end_ms": ep.end_ms,
        "group_size": len(current),
        "partitions_assigned": sum(loads),
        "duration_ms": ep.end_ms - ep.start_ms,
        "rounds": ep.rounds,
        "unowned_partition_ms": ep.unowned_partition_ms if seen.has_members else None,
        "moved": ep.moved,
        "revoked": ep.revoked if seen.has_members else None,
        "reassigned": sum(n for t, n in seen.assigned_at if previous_end < t <= ep.end_ms)
        if seen.has_members
        else None,
        "fraction_kept": quality.sorted_fraction_kept(kept_base, current)
        if kept_base is not None and not emptied
        else None,
        "balance_spread": quality.spread_of(loads),
        "balance_score": quality.score_of(loads),
        "join_bytes_leader": join_leader,
        "join_bytes_all": join_all,
        # (no SyncGroup: a generation no JoinGroup formed, or a KIP-848 group)
        "sync_bytes": None
        if (seen.has_members and ep.generation not in seen.joined) or protocol == "consumer"
        else sync,
    }


def _run(
    keys: dict[str, Any],
    events: Sequence[Row],
    seen: _Observed,
    rows: list[dict[str, Any]],
    last: AssignmentMap | None,
    ctx: Context,
) -> dict[str, Any]:
    measured = [r for r in rows if r["phase"] == "churn"]
    out: dict[str, Any] = {**keys, **{k: v for k, v in ctx.axes.items() if k not in keys}}
    if "members" not in ctx.axes:  # an event log: the largest generation it shows
        out["members"] = max((r["group_size"] for r in rows), default=None)
    if "churn" not in ctx.axes:  # an event log: the pattern its changes make
        out["churn"], out["churn_events"] = churn_of(seen.steps, ctx.measure_from_ms)
    out.update(
        events=event_count(events),
        violations=seen.violations,
        end_ms=events[-1][T] if events else None,
        changes=sum(n for t, n in seen.changes if t >= ctx.measure_from_ms),
        formation_rebalances=sum(1 for r in rows if r["phase"] == "formation"),
        rebalances=len(measured),
    )
    protocol = keys["protocol"]
    for key in SUMMED:
        values = [r[key] for r in measured]
        if values:
            out[key] = None if any(v is None for v in values) else sum(values)
        else:  # no rebalance: nothing spent, where the metric applies at all
            out[key] = 0 if _applies(key, protocol, seen, ctx) else None
    kept = [r["fraction_kept"] for r in measured if r["fraction_kept"] is not None]
    out["fraction_kept"] = sum(kept) / len(kept) if kept else None
    loads = quality.plain_loads(last) if last is not None else None
    out["balance_spread"] = quality.spread_of(loads) if loads is not None else None
    out["balance_score"] = quality.score_of(loads) if loads is not None else None
    return out


def _applies(key: str, protocol: str | None, seen: _Observed, ctx: Context) -> bool:
    """Whether a summed column has a value in a run of this kind (else it is null, also with no rebalance)."""
    if protocol == SHARE_PROTOCOL:
        return False
    if key in ("unowned_partition_ms", "revoked", "reassigned"):
        return seen.has_members
    if key in ("join_bytes_leader", "join_bytes_all"):
        return protocol in CLASSIC_PROTOCOLS and (seen.has_members or ctx.metadata_bytes is not None)
    if key == "sync_bytes":
        return protocol in CLASSIC_PROTOCOLS
    if key == "heartbeat_bytes":
        return protocol == "consumer" and seen.has_members
    return True


#: churn patterns of event logs, by the kinds of membership change they show
CHURN_OF: Final = {
    frozenset({"join"}): "join",
    frozenset({"leave"}): "leave",
    frozenset({"crash"}): "crash",
    frozenset({"bounce"}): "rolling",
    frozenset({"leave", "restart"}): "rolling",
    frozenset({"bounce", "leave", "restart"}): "rolling",
    frozenset({"leave", "join"}): "rolling",  # a server log's rolling restart: Left then Joined, same client
}


def churn_of(steps: Sequence[tuple[int, str, str]], measure_from_ms: int) -> tuple[str, int]:
    """(pattern, events) of an event log's membership changes at or after ``measure_from_ms``: ``none``,
    ``join``, ``leave``, ``crash``, ``rolling`` (bounces, or each member that left coming back: a restart, or
    a server log's ``Joined`` of a client that ``Left``) or ``mixed``; events count the members joining,
    leaving, crashing or restarted (a leave and its restart are one step)."""
    kinds: set[str] = set()
    events = 0
    gone: set[str] = set()  # members that left or crashed and have not come back
    returned = True  # every join or restart came back after a leave of the same member
    for t, kind, member in steps:
        if t < measure_from_ms:
            continue
        kinds.add(kind)
        if kind in ("leave", "crash"):
            gone.add(member)
            events += 1
        elif kind in ("join", "restart"):
            if member in gone:
                gone.discard(member)  # the second half of a step
            else:
                returned = returned and kind == "restart"
                events += 1
        else:  # bounce
            events += 1
    if not kinds:
        return "none", 0
    pattern = CHURN_OF.get(frozenset(kinds), "mixed")
    if pattern == "rolling" and "bounce" not in kinds and (gone or not returned):
        pattern = "mixed"  # members left without coming back, or joined without having left
    return pattern, events
