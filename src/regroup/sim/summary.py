"""The run summary, computed from the event log alone (so the lab can recompute it from a log file).

A *rebalance* is one episode of the group leaving Stable (or Empty) and coming back: it starts when the
coordinator enters PreparingRebalance and ends once the group is Stable again and every member of that
generation has applied its SyncGroup assignment (or when the group becomes Empty). Per rebalance:

* ``generation``: the generation it ended in; ``rounds``: JoinGroup rounds (generations) it took;
* ``moved``: partitions whose owner in the new assignment differs from their last owner before it
  (a partition released in one rebalance and given out in the next counts once, in the second);
* ``revoked``: partitions revoked or lost by members (``onPartitionsRevoked`` / ``onPartitionsLost``)
  since the previous rebalance ended;
* ``unowned_partition_ms``: partition-milliseconds, since the previous rebalance ended, during which a
  subscribed partition had no processing owner (the stop-the-world cost).

Only rebalances starting at or after the scenario's ``measure_from_ms`` are listed (a warm-up can form the
group first). ``final_assignment`` is what every running member processes at the end.

What the end of the log cut off (``Tail``): a rebalance still in progress (its start), the partition-milliseconds
unowned after the last rebalance ended (a change whose rebalance had not ended, or a partition left unowned),
and how many subscribed partitions had no owner at the end.

Share members (``subscription`` rows with the state ``share``) are in a share group of their own: their rows
go to the share summary (``share_summary``), which is ``share`` in a run that has any, and nothing of theirs
counts above.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from regroup.sim.eventlog import (
    DETAIL,
    GENERATION,
    MEMBER,
    STATE,
    TOPIC,
    TYPE,
    VALUE,
    Event,
    Pairs,
    Row,
    T,
    as_rows,
    partitions_of,
)
from regroup.sim.share_summary import SHARE_TYPES, ShareSummary, summarize_share

OWNERSHIP_GAINED: Final = frozenset({"assigned"})
OWNERSHIP_ENDED: Final = frozenset({"revoked", "lost", "stopped"})
NOT_RUNNING: Final = frozenset({"Left", "Crashed", "Failed"})
#: group states of a rebalance in progress: classic groups, then KIP-848 consumer groups
REBALANCING: Final = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


@dataclass
class Rebalance:
    generation: int
    start_ms: int
    end_ms: int
    rounds: int
    moved: int = 0
    revoked: int = 0
    unowned_partition_ms: int = 0
    unowned_partitions: list[str] = field(default_factory=list)  # not part of the JSON contract

    def to_json(self) -> dict[str, int]:
        doc = asdict(self)
        doc.pop("unowned_partitions")
        return doc


@dataclass
class Tail:
    """What the log's end cut off (not part of the JSON contract)."""

    open_since_ms: int | None = None  # a rebalance in progress at the end started then
    unowned_partition_ms: int = 0  # after the last rebalance ended, to the log's last event
    unowned_at_end: int = 0  # subscribed partitions without an owner at the end

    @property
    def settled(self) -> bool:
        return self.open_since_ms is None and self.unowned_at_end == 0


@dataclass
class Summary:
    rebalances: list[Rebalance]
    violations: list[str]
    final_assignment: dict[str, dict[str, list[int]]]
    tail: Tail = field(default_factory=Tail)
    share: ShareSummary | None = None  # a run with share members

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "rebalances": [r.to_json() for r in self.rebalances],
            "violations": list(self.violations),
            "final_assignment": self.final_assignment,
        }
        if self.share is not None:
            doc["share"] = self.share.to_json()
        return doc


def _episodes(events: list[Row], tail: Tail | None = None) -> list[Rebalance]:
    """The rebalances of the group states in ``events``; one still in progress at the end is not listed (its start
    goes to ``tail``)."""
    episodes: list[Rebalance] = []
    current: Rebalance | None = None
    start_generation = 0
    generation = 0
    for e in events:
        if e[TYPE] != "group_state":
            continue
        state, new_generation = e[STATE], e[GENERATION]
        if current is None and (state in REBALANCING or new_generation > generation):
            current = Rebalance(generation=new_generation, start_ms=e[T], end_ms=e[T], rounds=0)
            start_generation = generation
        generation = new_generation
        if current is not None and state in ("Stable", "Empty", "Dead") and generation > start_generation:
            current.generation = generation
            current.rounds = generation - start_generation
            current.end_ms = e[T]
            episodes.append(current)
            current = None
    if tail is not None and current is not None:
        tail.open_since_ms = current.start_ms
    return episodes


def _settle(episodes: list[Rebalance], events: list[Row]) -> None:
    """Extend each end to the last SyncGroup assignment applied for its generation before the next one."""
    applied: dict[int, list[int]] = {}
    for e in events:
        if e[TYPE] == "callback" and e[STATE] == "assigned":
            times = applied.get(e[GENERATION])
            if times is None:
                applied[e[GENERATION]] = [e[T]]
            else:
                times.append(e[T])
    for i, episode in enumerate(episodes):
        limit = episodes[i + 1].start_ms if i + 1 < len(episodes) else None
        times = [t for t in applied.get(episode.generation, []) if limit is None or t <= limit]
        episode.end_ms = max([episode.end_ms, *times])


def _slots(by_topic: dict[str, list[Any]], topic: str, partition: int, empty: Any) -> list[Any]:
    """The topic's list of ``by_topic``, indexed by partition and grown with ``empty`` to hold ``partition``."""
    slots = by_topic.get(topic)
    if slots is None:
        slots = by_topic[topic] = []
    if partition >= len(slots):
        slots.extend([empty] * (partition + 1 - len(slots)))
    return slots


def _moves(episodes: list[Rebalance], events: list[Row]) -> None:
    # owners by topic and partition (None: no owner), of each episode's generation and the last known
    wanted = {ep.generation for ep in episodes}
    by_generation: dict[int, dict[str, list[str | None]]] = {}
    for e in events:
        generation = e[GENERATION]
        if generation not in wanted:  # (a round the rebalance did not end in)
            continue
        target = by_generation.get(generation)
        if target is None:
            target = by_generation[generation] = {}
        member: str = e[MEMBER]
        pairs: Pairs = partitions_of(e)
        slots: list[str | None] = []
        last_topic = ""
        for topic, partition in pairs:  # (each topic's partitions come together: one lookup per topic)
            if topic != last_topic or partition >= len(slots):
                slots = _slots(target, topic, partition, None)
                last_topic = topic
            slots[partition] = member  # (the last one given wins)
    last_owner: dict[str, list[str | None]] = {}
    for episode in episodes:
        target = by_generation.get(episode.generation)
        if target is None:
            continue
        moved = 0
        for topic, owners in target.items():
            last = _slots(last_owner, topic, len(owners) - 1, None)
            for partition, owner in enumerate(owners):
                if owner is None:
                    continue
                previous: str | None = last[partition]
                if previous is None:
                    last[partition] = owner
                elif previous != owner:
                    moved += 1
                    last[partition] = owner
        episode.moved += moved


def _costs(
    episodes: list[Rebalance], events: list[Row], end_ms: int, name_unowned: bool = True, tail: Tail | None = None
) -> None:
    """Revocations and unowned partition-time, each attributed to the window (previous end, end].
    ``events``: the log's events of the types that change the unowned set, in order; ``end_ms``: the time
    of the log's last event; ``name_unowned``: also list each episode's unowned partitions by name; ``tail``:
    gets the unowned partition-time after the last episode's end and the partitions unowned at the end."""
    after = Rebalance(generation=-1, start_ms=end_ms, end_ms=end_ms, rounds=0)  # (last end, log's end]
    episodes = [*episodes, after]
    counts: dict[str, int] = {}
    running: dict[str, tuple[str, ...]] = {}  # member -> subscribed topics (from its JoinGroups)
    distinct: dict[tuple[str, ...], tuple[str, ...]] = {}  # one tuple for equal subscriptions
    alive: set[str] = set()
    owners: dict[str, list[int]] = {}  # topic -> owner count by partition
    windows = [(episodes[i - 1].end_ms if i else -1, ep.end_ms, ep) for i, ep in enumerate(episodes)]
    ends = [hi for _, hi, _ in windows]
    # When the ends never decrease, the first window holding a time is the first one ending at or after it;
    # as the events' times never decrease either, a pointer finds it. Otherwise each lookup scans.
    ordered = ends == sorted(ends)
    w = 0

    # The subscribed partitions (of the running members' topics: partitions below ``subscribed[topic]``)
    # change only with topics, members and subscriptions; they are recomputed then, and so is the number of
    # them nobody owns. Between those, ``unowned`` (that number) follows each ownership change, and so does
    # ``unowned_names`` (the partitions themselves) when naming them. Between changes (heartbeats, requests in
    # flight) the gap stands.
    subscribed: dict[str, int] = {}
    unowned = 0
    unowned_names: set[Any] = set()
    stale = True  # ``subscribed`` needs recomputing

    last_t = 0
    gap: list[Any] | None = None  # the unowned partitions since the last change, when naming them
    gap_size = 0
    changed = True
    named: dict[int, _Named] = {id(ep): _Named() for ep in episodes}
    for e in events:
        t: int = e[T]
        if t > last_t:
            if changed:
                if stale:
                    subscribed, unowned, unowned_names = _recount(alive, running, counts, owners, name_unowned)
                    stale = False
                gap_size = unowned
                gap = list(unowned_names) if name_unowned else None
                changed = False
            if gap_size:
                _spread(windows, last_t, t, gap_size, gap, named)
            last_t = t
        kind: str = e[TYPE]
        if kind == "topic":
            counts[e[TOPIC]] = e[VALUE]
            stale = True
        elif kind == "member_state":
            member = e[MEMBER]
            if e[STATE] in NOT_RUNNING:
                if member in alive:
                    alive.discard(member)
                    stale = True
            elif member not in alive:
                alive.add(member)
                stale = True
        elif kind == "subscription":
            topics_of = tuple(e[DETAIL].split(",")) if e[DETAIL] else ()
            if running.get(e[MEMBER]) != topics_of:
                running[e[MEMBER]] = distinct.setdefault(topics_of, topics_of)
                stale = True
        elif kind in OWNERSHIP_GAINED:
            unowned -= _gained(owners, subscribed, partitions_of(e), unowned_names if name_unowned else None)
        elif kind in OWNERSHIP_ENDED:
            ended = partitions_of(e)
            unowned += _ended(owners, subscribed, ended, unowned_names if name_unowned else None)
            if kind != "stopped":
                held: Rebalance | None = None
                if ordered:
                    while w < len(windows) and windows[w][1] < t:
                        w += 1
                    if w < len(windows) and windows[w][0] < t:
                        held = windows[w][2]
                else:
                    held = next((ep for lo, hi, ep in windows if lo < t <= hi), None)
                if held is not None:
                    held.revoked += len(ended)
        else:
            continue
        changed = True
    if changed:  # the gap left by the last change lasts until the log ends
        if stale:
            subscribed, unowned, unowned_names = _recount(alive, running, counts, owners, name_unowned)
        gap_size = unowned
        gap = list(unowned_names) if name_unowned else None
    if end_ms > last_t and gap_size:
        _spread(windows, last_t, end_ms, gap_size, gap, named)
    if tail is not None:
        tail.unowned_partition_ms = after.unowned_partition_ms
        tail.unowned_at_end = gap_size
    episodes.pop()
    if not name_unowned:
        return
    for ep in episodes:
        names = set(ep.unowned_partitions)
        names.update(f"{t}-{p}" for t, p in named[id(ep)].partitions)
        ep.unowned_partitions = list(names)  # (sorted by the caller)


def _recount(
    alive: set[str],
    running: dict[str, tuple[str, ...]],
    counts: dict[str, int],
    owners: dict[str, list[int]],
    named: bool,
) -> tuple[dict[str, int], int, set[Any]]:
    """After a change of topics, members or subscriptions: the subscribed partitions (topic -> count), how many
    of them nobody owns, and, when ``named``, which (else an empty set)."""
    subscribed = _subscribed(alive, running, counts)
    names = _unowned_names(subscribed, owners) if named else set()
    return subscribed, _count_unowned(subscribed, owners), names


def _subscribed(alive: set[str], running: dict[str, tuple[str, ...]], counts: dict[str, int]) -> dict[str, int]:
    """Topic -> partition count, of the topics the running members subscribe to (members subscribing to the
    same topics mostly share one tuple: each is read once in a row)."""
    out: dict[str, int] = {}
    last: tuple[str, ...] = ()
    for m in alive:
        topics = running.get(m, ())
        if topics is last:
            continue
        last = topics
        for t in topics:
            out[t] = counts.get(t, 0)
    return out


def _gained(owners: dict[str, list[int]], subscribed: dict[str, int], pairs: Pairs, names: set[Any] | None) -> int:
    """One more owner for each partition of ``pairs``: how many subscribed partitions were unowned (and
    are no longer in ``names``, when naming them)."""
    found = 0
    slots: list[int] = []
    limit = 0  # the subscribed partitions of ``topic``
    last_topic = ""
    for topic, partition in pairs:  # (each topic's partitions come together: one lookup per topic)
        if topic != last_topic or partition >= len(slots):
            slots = _slots(owners, topic, partition, 0)
            limit = subscribed.get(topic, 0)
            last_topic = topic
        held_by = slots[partition]
        slots[partition] = held_by + 1
        if held_by == 0 and partition < limit:
            found += 1
            if names is not None:
                names.discard((topic, partition))
    return found


def _ended(owners: dict[str, list[int]], subscribed: dict[str, int], pairs: Pairs, names: set[Any] | None) -> int:
    """One owner fewer for each partition of ``pairs``: how many subscribed partitions that leaves unowned
    (and adds to ``names``, when naming them)."""
    left = 0
    slots: list[int] = []
    limit = 0
    last_topic = ""
    for topic, partition in pairs:
        if topic != last_topic or partition >= len(slots):
            slots = _slots(owners, topic, partition, 0)
            limit = subscribed.get(topic, 0)
            last_topic = topic
        held_by = slots[partition]
        slots[partition] = max(held_by - 1, 0)
        if held_by <= 1 and partition < limit:
            if held_by == 1:
                left += 1
            if names is not None:
                names.add((topic, partition))
    return left


def _count_unowned(subscribed: dict[str, int], owners: dict[str, list[int]]) -> int:
    """How many subscribed partitions nobody owns."""
    total = 0
    for topic, count in subscribed.items():
        known = owners.get(topic, [])[:count]
        total += known.count(0) + count - len(known)
    return total


def _unowned_names(subscribed: dict[str, int], owners: dict[str, list[int]]) -> set[Any]:
    """The subscribed partitions nobody owns, as (topic, partition) pairs."""
    out: set[Any] = set()
    for topic, count in subscribed.items():
        slots = owners.get(topic, [])
        out.update((topic, p) for p in range(count) if p >= len(slots) or slots[p] == 0)
    return out


class _Named:
    """The partitions an episode found unowned (named in its ``unowned_partitions`` at the end), and the
    last gap added (a gap stands unchanged, the same list, across many intervals)."""

    def __init__(self) -> None:
        self.partitions: set[Any] = set()
        self.last_gap: list[Any] | None = None


def _spread(
    windows: list[tuple[int, int, Rebalance]],
    t0: int,
    t1: int,
    size: int,
    gap: list[Any] | None,
    named: dict[int, _Named],
) -> None:
    """Add ``size`` partitions x the part of (t0, t1] inside each window, and the ``gap``'s partitions (if
    given: ``size`` of them) to each such episode's unowned partitions (``named``)."""
    for lo, hi, ep in windows:
        overlap = min(t1, hi) - max(t0, lo)
        if overlap > 0:
            ep.unowned_partition_ms += overlap * size
            if gap is None:
                continue
            seen = named[id(ep)]
            if seen.last_gap is not gap:
                seen.last_gap = gap
                seen.partitions.update(gap)


def final_assignment(events: Iterable[Row]) -> dict[str, dict[str, list[int]]]:
    owned: dict[str, set[Any]] = {}
    alive: set[str] = set()
    for e in events:
        kind: str = e[TYPE]
        if kind == "member_state":
            (alive.discard if e[STATE] in NOT_RUNNING else alive.add)(e[MEMBER])
        elif kind in OWNERSHIP_GAINED:
            owned.setdefault(e[MEMBER], set()).update(partitions_of(e))
        elif kind in OWNERSHIP_ENDED:
            owned.setdefault(e[MEMBER], set()).difference_update(partitions_of(e))
    out: dict[str, dict[str, list[int]]] = {}
    for member in sorted(alive):
        per_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(owned.get(member, set())):
            per_topic.setdefault(topic, []).append(partition)
        out[member] = per_topic
    return out


#: the event types each pass reads (``_costs`` and ``final_assignment`` need theirs in log order)
_COST_TYPES: Final = frozenset({"topic", "member_state", "subscription"}) | OWNERSHIP_GAINED | OWNERSHIP_ENDED


def summarize(events: Sequence[Event], measure_from_ms: int = 0) -> Summary:
    """The summary of a log's events as dicts (``EventLog.events``, or parsed lines)."""
    return summarize_rows(as_rows(events), measure_from_ms)


def summarize_rows(events: Sequence[Row], measure_from_ms: int = 0, details: bool = True) -> Summary:
    """The summary of a log's rows (``EventLog.rows``). Without ``details`` the rebalances' figures only:
    no ``unowned_partitions`` names and an empty ``final_assignment`` (what the lab's metrics need)."""
    # one pass picks out what the passes below read (most of a log is requests and responses)
    group_states: list[Row] = []
    callbacks: list[Row] = []
    assignments: list[Row] = []
    costs: list[Row] = []
    violations: list[Row] = []
    shared: list[Row] = []
    into: dict[str, list[Row]] = dict.fromkeys(_COST_TYPES, costs)
    into.update(group_assignment=assignments, callback=callbacks, group_state=group_states, violation=violations)
    into.update(dict.fromkeys(SHARE_TYPES, shared))
    share_members: set[str] = set()
    rows: list[Row] = events if isinstance(events, list) else list(events)  # (a list is iterated directly)
    for e in rows:
        picked = into.get(e[TYPE])  # (one lookup per event, whatever its type)
        if picked is None:
            continue
        if picked is costs and (share_members or e[STATE] == "share"):  # (a share member's own rows)
            if e[STATE] == "share" and e[TYPE] == "subscription":
                share_members.add(e[MEMBER])
            if e[MEMBER] in share_members:
                picked = shared
        picked.append(e)
    tail = Tail()
    episodes = _episodes(group_states, tail)
    _settle(episodes, callbacks)
    _moves(episodes, assignments)
    _costs(episodes, costs, events[-1][T] if events else 0, name_unowned=details, tail=tail)
    for ep in episodes:
        ep.unowned_partitions.sort()
    return Summary(
        rebalances=[ep for ep in episodes if ep.start_ms >= measure_from_ms],
        violations=[e[DETAIL] if e[T] is None else f"{e[T]} ms: {e[DETAIL]}" for e in violations],
        final_assignment=final_assignment(costs) if details else {},
        tail=tail,
        share=summarize_share(shared, events[-1][T]) if share_members else None,
    )
