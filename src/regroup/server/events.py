"""Rebalance events: the runtime calls ``GroupEvents`` after every core call with its result; it turns the
core's events (``coordinator/events.py``: what happened, in order) into info log lines (state, generation,
members joining and leaving: a line each for the first ``MEMBER_LINES_PER_CALL`` of a call and
``MEMBER_LINES_PER_WINDOW`` of a group a second, then one line per group saying how many more, each of those at
debug) and, with ``--events FILE``, JSON lines in the simulator's
event schema (docs/simulator.md). At startup it writes the groups loaded from the log as they are (their state,
members and stored assignment), as a first look at them. A call that changed nothing (a heartbeat) has no events
and costs nothing here. What it knows of a group it learnt from those events: the core's groups are not read.

* ``group_state`` — one per transition of the group (Empty when it is created; Dead when it is deleted or
  converted to a consumer group), ``state``, ``generation``, ``detail`` = ``group=<id> type=classic
  protocol=<name> [rebalance=eager|cooperative] leader=<member id>``: ``protocol`` is the selected assignor as
  the group holds it at that transition (``None`` until a generation selects one), ``rebalance`` the style the
  members' clients use, as they choose it (the highest rebalance protocol every assignor a member lists
  supports), given when the group has members, every member lists known assignors only and they agree (the
  members as of that transition, with the assignors their last JoinGroup listed: ``MemberJoined.protocols``,
  ``MemberProtocolsChanged``);
* ``member_state`` — ``member`` (the client id), ``member_id``, ``generation``, ``state`` = ``Joined`` or
  ``Left``, ``detail`` = ``group=<id>``, and for ``Left`` ``reason=<why>`` (the core's ``LeaveReason`` with
  ``-`` for spaces: ``leave``, ``session-timeout``, ``revocation-timeout``, ``join-timeout``, ``sync-timeout``,
  ``group-max-size``, ``replaced``, ``group-deleted``, ``converted``);
* ``group_assignment`` — one row per partition of each member's assignment when a generation becomes Stable
  (the leader's SyncGroup stored it), right after that ``group_state`` row, ``detail`` = ``group=<id>``
  (consumer-protocol groups; other protocols' assignments are opaque and produce no rows).

A ``group_state`` row that starts a rebalance (a classic group entering PreparingRebalance; a consumer or share
group's epoch rising) adds ``cause=<what>``: ``join`` or the leaving member's reason (as in ``member_state``)
when a member joined or left in the same call (the first to; not the members a conversion moves to the group's
other type), else for a classic group ``metadata`` (a known member rejoined with other metadata, or the leader
rejoined), for a consumer group ``subscription`` / ``rack`` / ``assignor`` (a member's metadata record changed
that: subscribed topics or regex, rack, server assignor; ``subscription`` when the member's earlier metadata is
not known, after a restart; a regex resolved anew is ``subscription`` too), ``metadata`` (the group's
subscription metadata changed: partitions or topics added or removed); no ``cause`` when the call says none of
these (nor for the groups as loaded at start).

KIP-848 consumer groups (``type=consumer`` in ``detail``) use the same types with the consumer protocol's
numbers, so a run can be analysed like a classic one:

* ``group_state`` — ``state`` = Empty, Assigning, Reconciling, Stable (Dead once deleted or converted back to
  classic), ``generation`` = the group epoch, ``detail`` = ``group=<id> type=consumer protocol=<server
  assignor> assignment_epoch=<n>`` (the assignor by regroup's name: ``uniform``, ``server-range``); logged once
  per write (a request or a timer firing) that changed the state or an epoch;
* ``member_state`` — ``Joined``/``Left`` as above, ``generation`` = the group epoch;
* ``group_assignment`` — one row per partition of every member's *target* assignment each time a new target
  is computed, ``generation`` = its assignment epoch (the counterpart of a classic generation's assignment);
* ``assigned`` / ``revoked`` — the coordinator's side of reconciliation, one row per partition: the partition
  was handed to the member (it may use it from its next heartbeat response on), or is no longer held by it
  (the member confirmed the revocation, left, or was fenced). ``generation`` = the member epoch, ``detail`` =
  ``group=<id>``. Partitions a member still has to revoke count as held: they are never handed to another
  member before they are released, which is exactly what these rows let an analysis check.

The server hosts many groups while a simulation has one, hence the group id in ``detail``; ``t`` is wall-clock
milliseconds. Every line has all keys of the schema, in its order.

Rows go to the events file, if there is one, and to every sink ``add_sink`` added (the rebalance timeline,
``regroup.history``; the console's stream): each sink is handed every row, as a fresh dict, whether or not there
is a file. A generation's or target's ``group_assignment`` rows are made as one run (``assignment_run.py``: their
lines encoded from pieces shared by the rows), and so are a call's ``member_state`` rows (``member_run.py``: each
row made and encoded once); a sink added with a ``runs`` callable is handed those rows as pieces (their lines and
rows: ``Piece``, ``MemberPiece``) instead.

A call's rows are handed out as it returns, ``ROWS_PER_TURN`` at most, but for its ``group_assignment`` rows and
the ``member_state`` rows of more than ``MEMBER_ROWS_AT_ONCE`` members: those are made from the next turn of the
event loop on (a member's partitions are read only as its rows are made, and one member of 10,000 partitions is
milliseconds of reading and sorting; 250 members leaving, milliseconds of rows: not the call's), and those of
a large group (one per partition: 10,000 for a target over 10,000 partitions, about 25 ms of work) are made and
handed out ``ROWS_PER_TURN`` per turn of the event loop (a ``BACKLOG_SHARE`` of those waiting when that is
more; while fewer than ``SLICED_BACKLOG_ROWS`` wait, no more than ``DRAIN_SLICE_S`` of rows a turn), and every
later row waits behind them, so the order and the ``seq`` numbers are those of the calls.
Should more than ``MAX_BACKLOG_ROWS`` wait, they are handed out at once; ``close()`` hands out whatever still
waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from pathlib import Path
from typing import IO, Any

from regroup.assignors.registry import server_side_name
from regroup.client.config import ConfigError, rebalance_protocol
from regroup.client.embedded import assigned_partitions
from regroup.coordinator.coordinator import GroupCoordinator
from regroup.coordinator.events import (
    AssignmentStored,
    Event,
    GroupDeleted,
    GroupStateChanged,
    MemberJoined,
    MemberLeft,
    MemberProtocolsChanged,
    PartitionsAssigned,
    PartitionsRevoked,
    TargetComputed,
    TargetPartitions,
)
from regroup.coordinator.result import Result
from regroup.model.cluster import ClusterImage
from regroup.model.eventlog import FIELDS, event_line
from regroup.records.consumer import (
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupRegularExpressionKey,
)
from regroup.records.model import Record
from regroup.server.assignment_run import AssignmentRun, Memo, Piece
from regroup.server.member_run import MemberPiece, MemberRun, reason_word

log = logging.getLogger("regroup.server.events")

#: a sink for the rows: called with each row (a fresh dict with the keys of ``FIELDS``, its own to keep), in order
Sink = Callable[[dict[str, Any]], None]
#: a sink's other side, for the rows of a run: called with each piece of it, in order with the other rows
RunSink = Callable[[Piece | MemberPiece], None]
#: a row before it is handed out: (t, type, its other values); ``seq`` is given as it goes out
PendingRow = tuple[int, str, dict[str, Any]]
#: rows waiting to be handed out: single rows, a run of ``group_assignment`` rows or of ``member_state`` rows
Waiting = Iterator[PendingRow] | AssignmentRun[Any] | MemberRun
#: the rows handed out in one turn of the event loop while few wait (a run's about 2.5 us each, sinks included)
ROWS_PER_TURN = 500
#: while more wait, a turn hands out this share of them: rows made faster than turns of ``ROWS_PER_TURN`` hand
#: them out lengthen the turns rather than the backlog
BACKLOG_SHARE = 16
#: more rows than this waiting are handed out at once
MAX_BACKLOG_ROWS = 1_000_000
#: while fewer than this wait, a turn's hand-out also stops once it has taken ``DRAIN_SLICE_S`` (read after every
#: piece of ``ROWS_PER_PIECE`` rows and every run it empties): a turn's worth of rows is about a millisecond of the
#: loop, but the history's fold thread takes the interpreter's lock in turn with it, and 950 rows of a share
#: group's partitions took 4.5 ms
SLICED_BACKLOG_ROWS = 50_000
DRAIN_SLICE_S = 0.001
ROWS_PER_PIECE = 100
#: the members joining or leaving in one call whose ``member_state`` rows the call hands out itself (more: from
#: the next turn on)
MEMBER_ROWS_AT_ONCE = 64
#: the members joining or leaving that one call logs a line each for at info (the others: ``_MemberLines``)
MEMBER_LINES_PER_CALL = 20
#: and those of one group in a window of ``MEMBER_LINES_WINDOW_MS`` (its members joining one call at a time)
MEMBER_LINES_PER_WINDOW = 20
MEMBER_LINES_WINDOW_MS = 1_000
#: the windows over that one call says its counts for, at most (the others: the calls after it); the first
#: ``GROUPS_SUMMARISED_PER_CALL`` of them a line each, the rest in one line together (10,000 groups loaded at
#: start, each a member whose line was only counted, were 10,000 lines at info in one call: about 100 ms)
WINDOWS_CLOSED_PER_CALL = 500
GROUPS_SUMMARISED_PER_CALL = 20

#: what a consumer group's member metadata says that a rebalance follows: subscription, rack, server assignor
_MemberMark = tuple[tuple[tuple[str, ...], str | None], str | None, str | None]


def _member_mark(value: ConsumerGroupMemberMetadataValue) -> _MemberMark:
    return (tuple(value.subscribed_topic_names), value.subscribed_topic_regex), value.rack_id, value.server_assignor


def _metadata_cause(
    records: list[Record], group_id: str, marks: dict[str, dict[str, _MemberMark]], joined: set[str]
) -> str | None:
    """Why a consumer group's epoch rose in a call where no member joined or left, from the call's records
    (remembering each member's metadata marks as they go by)."""
    member_cause: str | None = None
    regex = partitions = False
    known = marks.setdefault(group_id, {})
    for record in records:
        key = record.key
        if getattr(key, "group_id", None) != group_id:
            continue
        if isinstance(key, ConsumerGroupMemberMetadataKey):
            value = record.value
            if not isinstance(value, ConsumerGroupMemberMetadataValue):
                known.pop(key.member_id, None)
                continue
            mark = _member_mark(value)
            before = known.get(key.member_id)
            known[key.member_id] = mark
            if key.member_id in joined or member_cause is not None:
                continue
            if before is None or before[0] != mark[0]:
                member_cause = "subscription"
            elif before[1] != mark[1]:
                member_cause = "rack"
            elif before[2] != mark[2]:
                member_cause = "assignor"
        elif isinstance(key, ConsumerGroupRegularExpressionKey):
            regex = True
        elif isinstance(key, ConsumerGroupPartitionMetadataKey):
            partitions = True
    if member_cause is not None:
        return member_cause
    return "subscription" if regex else "metadata" if partitions else None


def rebalance_style(
    protocol_type: str | None, members: Iterable[tuple[str, ...]], known: dict[tuple[str, ...], str | None]
) -> str | None:
    """``eager`` or ``cooperative``: the rebalance protocol a classic group's consumers use, as their clients
    choose it from the assignors they list (``members``: each member's list; the highest one all of them
    support); None when the group's protocol type is not ``consumer``, it has no members, a member lists an
    assignor this server does not know, or the members differ. ``known`` caches the answer per list of names."""
    if protocol_type != "consumer":
        return None
    styles: set[str | None] = set()
    for names in members:
        if names not in known:
            try:
                known[names] = rebalance_protocol(names).name.lower()
            except ConfigError:
                known[names] = None
        styles.add(known[names])
    return styles.pop() if len(styles) == 1 else None  # (none: no members)


class GroupEvents:
    """An observer for ``CoordinatorRuntime.add_observer``; ``close()`` closes the events file. Without a
    ``path`` the rows go only to the sinks ``add_sink`` adds (none: no rows are built at all)."""

    def __init__(self, path: Path | None = None) -> None:
        self._styles: dict[tuple[str, ...], str | None] = {}  # rebalance style by the assignors a member lists
        #: the assignors each classic group's members listed (from the events)
        self._protocols = _ProtocolLists()
        self._names: tuple[ClusterImage | None, dict[uuid.UUID, str]] = (None, {})  # topic names of an image
        self._primed = False
        self._seq = 0
        self._file: IO[str] | None = path.open("a", encoding="utf-8", buffering=1) if path is not None else None
        self._sinks: list[tuple[Sink, RunSink | None]] = []
        #: consumer group id -> member id -> what its last metadata record said (the cause of an epoch bump)
        self._marks: dict[str, dict[str, _MemberMark]] = {}
        #: group id -> the epoch its last ``group_state`` row gave (consumer and share groups)
        self._epochs: dict[str, int] = {}
        #: consumer or share group id -> the topic names and the memo of its last target's run
        self._memos: dict[str, tuple[dict[uuid.UUID, str], dict[str, Memo]]] = {}
        #: rows waiting to be handed out, in order (``_queue``), how many, and whether a turn is asked for
        self._backlog: deque[Waiting] = deque()
        self._backlog_rows = 0
        self._drain_scheduled = False
        self._member_lines = _MemberLines()

    @property
    def _writing(self) -> bool:
        return self._file is not None or bool(self._sinks)

    def add_sink(self, sink: Sink, runs: RunSink | None = None) -> None:
        """Hand every row written from now on to ``sink`` too (called in order, once per row), or, for the rows of
        a run, their pieces to ``runs`` when it is given."""
        self._sinks.append((sink, runs))

    def __call__(self, coordinator: GroupCoordinator, result: Result, now_ms: int) -> None:
        if not self._primed:
            self._primed = True
            self._events(coordinator, coordinator.loaded_events, now_ms, None)  # how the groups stood at load
        self._events(coordinator, result.events, now_ms, result.records)

    def _events(
        self, coordinator: GroupCoordinator, events: list[Event], now_ms: int, records: list[Record] | None
    ) -> None:
        """``records``: the call's records (None: the groups as loaded, whose rows carry no ``cause``)."""
        #: group id -> what the first member joining or leaving in this call did (``join`` or the leave reason)
        moves: dict[str, str] = {}
        joined: set[str] = set()
        converted: set[str] = set()  # members that left a group as it changed type (and join its other side)
        members = self._member_lines
        members.new_call(now_ms)
        moved: list[MemberJoined | MemberLeft] = []  # members joining or leaving whose rows wait (in order)
        writing = self._file is not None or bool(self._sinks)
        for event in events:
            if moved and not isinstance(event, (MemberJoined, MemberLeft)):
                self._queue_members(MemberRun(now_ms, moved), len(moved))
                moved = []
            if isinstance(event, GroupStateChanged):
                if event.group_type == "classic":
                    cause = None
                    if records is not None and event.state == "PreparingRebalance":
                        cause = moves.get(event.group_id, "metadata")
                    self._classic_state(event, now_ms, cause)
                else:
                    cause = None
                    before = self._epochs.get(event.group_id)
                    if event.state == "Dead":
                        self._epochs.pop(event.group_id, None)
                        self._marks.pop(event.group_id, None)
                        self._memos.pop(event.group_id, None)
                    else:
                        self._epochs[event.group_id] = event.generation
                    if records is not None and event.state != "Dead" and event.generation > (before or 0):
                        cause = moves.get(event.group_id)
                        if event.group_type == "consumer" and self._writing:
                            found = _metadata_cause(records, event.group_id, self._marks, joined)
                            cause = cause or found
                    self._epoch_state(event, now_ms, cause)
            elif isinstance(event, MemberJoined):
                if event.group_type == "classic":
                    self._protocols.set(event.group_id, event.member_id, event.protocols)
                if event.member_id in converted:  # (a member of a converted group, on its other side)
                    converted.discard(event.member_id)
                else:
                    moves.setdefault(event.group_id, "join")
                joined.add(event.member_id)
                members.line(now_ms, event.group_id, "joined", event.member_id, event.client_id)
                if writing:
                    moved.append(event)
            elif isinstance(event, MemberLeft):
                if event.group_type == "classic":
                    self._protocols.remove(event.group_id, event.member_id)
                else:
                    self._marks.get(event.group_id, {}).pop(event.member_id, None)
                if event.reason == "converted":
                    converted.add(event.member_id)
                else:
                    moves.setdefault(event.group_id, reason_word(event.reason))
                members.line(now_ms, event.group_id, "left", event.member_id, event.client_id)
                if writing:
                    moved.append(event)
            elif isinstance(event, MemberProtocolsChanged):
                if event.group_type == "classic":
                    self._protocols.set(event.group_id, event.member_id, event.protocols)
            elif isinstance(event, GroupDeleted):
                if event.group_type == "classic":
                    self._protocols.forget(event.group_id)
            elif isinstance(event, AssignmentStored):
                self._assignment_rows(event, now_ms)
            elif isinstance(event, TargetComputed):
                self._target_rows(coordinator, event, now_ms)
            elif isinstance(event, (PartitionsAssigned, PartitionsRevoked)) and writing:
                # (a row per partition, handed out as any others: a turn's worth now, a member of 10,000
                # partitions' rows over later turns rather than 30-40 ms in this call, its partitions named and
                # sorted as its first row is taken, 3-4 ms that are not the call's either)
                names = self._topic_names(coordinator)
                count = sum(len(ps) for _, ps in event.partitions)
                self._queue(_partition_rows(now_ms, event, names), count)
        if moved:
            self._queue_members(MemberRun(now_ms, moved), len(moved))

    def _queue_members(self, run: MemberRun, count: int) -> None:
        """A call's ``member_state`` rows: handed out now when few, from the next turn on when more than
        ``MEMBER_ROWS_AT_ONCE`` (a LeaveGroup's chunk of 250 members: 2–5 ms of rows, not the call's)."""
        self._queue(run, count, later=count > MEMBER_ROWS_AT_ONCE)

    def close(self) -> None:
        self._drain_all()
        self._member_lines.close()
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def backlog_rows(self) -> int:
        """About how many rows, made or to be made, have not been handed out yet (0: none)."""
        return max(self._backlog_rows, 1) if self._backlog else 0

    # ------------------------------------------------------------------------------------------ internals
    def _classic_state(self, event: GroupStateChanged, now: int, cause: str | None) -> None:
        group_id = event.group_id
        log.info(
            "group=%s state=%s generation=%d protocol=%s leader=%s members=%d",
            group_id,
            event.state,
            event.generation,
            event.protocol,
            event.leader,
            event.members,
        )
        if not self._writing:
            return
        lists = self._protocols.distinct(group_id)
        style = rebalance_style(event.protocol_type, lists, self._styles) if event.state != "Dead" and lists else None
        rebalance = f" rebalance={style}" if style else ""
        detail = f"group={group_id} type=classic protocol={event.protocol}{rebalance} leader={event.leader}"
        if cause is not None:
            detail += f" cause={cause}"
        self._emit(now, "group_state", state=event.state, generation=event.generation, detail=detail)

    def _epoch_state(self, event: GroupStateChanged, now: int, cause: str | None) -> None:
        """A group with epochs and a server-side assignor (a KIP-848 consumer group, a share group)."""
        assignor = event.protocol or ""
        log.info(
            "group=%s type=%s state=%s group_epoch=%d assignment_epoch=%d assignor=%s members=%d",
            event.group_id,
            event.group_type,
            event.state,
            event.generation,
            event.assignment_epoch or 0,
            assignor,
            event.members,
        )
        name = server_side_name(assignor) or assignor
        detail = (
            f"group={event.group_id} type={event.group_type} protocol={name} "
            f"assignment_epoch={event.assignment_epoch or 0}"
        )
        if cause is not None:
            detail += f" cause={cause}"
        self._emit(now, "group_state", state=event.state, generation=event.generation, detail=detail)

    def _target_rows(self, coordinator: GroupCoordinator, event: TargetComputed, now: int) -> None:
        if not self._writing:
            return
        names = self._topic_names(coordinator)
        # (about one row a member: counting the partitions would walk every target within the call)
        count = len(event.targets)

        def partitions(target: TargetPartitions) -> list[tuple[str, int]]:
            if len(target) == 1:  # (most often: one topic's partitions)
                for topic_id, ps in target.items():
                    name = _topic_name(names, topic_id)
                    return [(name, p) for p in sorted(ps)]
            return sorted((_topic_name(names, topic_id), p) for topic_id, ps in target.items() for p in ps)

        # (the group's last run's memo, when made with the same names: the targets that did not change since)
        last = self._memos.get(event.group_id)
        memo = last[1] if last is not None and last[0] is names else None
        run = AssignmentRun(now, event.group_id, event.assignment_epoch, event.targets, partitions, memo)
        self._memos[event.group_id] = (names, run.memo)
        self._queue(run, count, later=True)

    def _topic_names(self, coordinator: GroupCoordinator) -> dict[uuid.UUID, str]:
        """Topic id -> name in the coordinator's cluster image (kept per image; an image never changes)."""
        image = coordinator.image
        if self._names[0] is not image:
            self._names = (image, {t.topic_id: t.name for t in image.by_name.values()})
        return self._names[1]

    def _assignment_rows(self, event: AssignmentStored, now: int) -> None:
        if not self._writing or event.protocol_type != "consumer":
            return

        def partitions(assignment: bytes) -> list[tuple[str, int]]:
            return sorted(assigned_partitions(assignment) or ())

        # (the count is not known before the assignments are decoded: one per member, at least a turn's worth
        # for a large group)
        members = event.members  # (the record's own: read as the rows are taken, not here)
        held = ((m.member_id, m.client_id, m.assignment) for m in members)
        run = AssignmentRun(now, event.group_id, event.generation, held, partitions)
        self._queue(run, len(members), later=True)

    def _emit(self, t: int, type_: str, **values: Any) -> None:
        if self._file is None and not self._sinks:
            return
        if self._backlog:
            self._queue(iter(((t, type_, values),)), 1)
        else:
            self._deliver(t, type_, values)

    def _deliver(self, t: int, type_: str, values: dict[str, Any]) -> None:
        event: dict[str, Any] = dict.fromkeys(FIELDS)
        event.update(values)
        event.update(seq=self._seq, t=t, type=type_)
        self._seq += 1
        if self._file is not None:
            self._file.write(event_line(event) + "\n")
        for sink, _ in self._sinks:
            sink(dict(event))

    def _deliver_piece(self, piece: Piece | MemberPiece) -> None:
        self._seq += len(piece.lines)
        if self._file is not None:
            self._file.write("\n".join(piece.lines) + "\n")
        for sink, runs in self._sinks:
            if runs is not None:
                runs(piece)
            else:
                for row in piece.rows():
                    sink(row)

    def _hand_out(self, waiting: Waiting, most: int) -> int:
        """Hand out ``most`` of the ``waiting`` rows at most; how many (fewer: there were no more)."""
        if isinstance(waiting, (AssignmentRun, MemberRun)):
            piece = waiting.take(most, self._seq)
            if piece is None:
                return 0
            if piece.lines:
                self._deliver_piece(piece)
            return len(piece.lines) + piece.walked  # (a run's members without rows walked count as rows)
        handed = 0
        for row in islice(waiting, most):
            self._deliver(*row)
            handed += 1
        return handed

    def _queue(self, rows: Waiting, count: int, *, later: bool = False) -> None:
        """Hand out ``rows`` (about ``count`` of them) after those waiting: now if none wait and they are a
        turn's worth at most, unless ``later``, else in later turns (so the call that made a large group's rows,
        which has worked enough, hands out none of them)."""
        if not self._backlog and count <= ROWS_PER_TURN and not later:
            handed = self._hand_out(rows, ROWS_PER_TURN)
            if handed < ROWS_PER_TURN:
                return  # (all of them)
            count = max(count - handed, 1)
        self._backlog.append(rows)
        self._backlog_rows += count
        if self._backlog_rows > MAX_BACKLOG_ROWS:
            self._drain_all()
        elif not self._drain_scheduled:
            try:
                asyncio.get_running_loop().call_soon(self._drain)
            except RuntimeError:  # (no event loop: a tool or a test driving the observer by hand)
                self._drain_all()
                return
            self._drain_scheduled = True

    def _drain(self) -> None:
        """One turn's worth of the rows waiting (fewer when they take longer than ``DRAIN_SLICE_S`` and not too
        many wait); another turn asked for if some still wait."""
        self._drain_scheduled = False
        budget = max(ROWS_PER_TURN, self._backlog_rows // BACKLOG_SHARE)
        sliced = self._backlog_rows < SLICED_BACKLOG_ROWS
        clock = time.perf_counter
        ends = clock() + DRAIN_SLICE_S
        backlog = self._backlog
        while backlog and budget > 0:
            most = min(budget, ROWS_PER_PIECE) if sliced else budget
            handed = self._hand_out(backlog[0], most)
            budget -= handed
            self._backlog_rows = max(self._backlog_rows - handed, 0)
            if handed < most:
                backlog.popleft()  # (it ran out before the budget did)
            if sliced and clock() >= ends:
                break
        if not backlog:
            self._backlog_rows = 0
        elif not self._drain_scheduled:
            self._drain_scheduled = True
            asyncio.get_running_loop().call_soon(self._drain)

    def _drain_all(self) -> None:
        backlog = self._backlog
        while backlog:
            waiting = backlog.popleft()
            while self._hand_out(waiting, ROWS_PER_TURN) == ROWS_PER_TURN:
                pass
        self._backlog_rows = 0


def named_partitions(
    names: dict[uuid.UUID, str], partitions: Iterable[tuple[uuid.UUID, Iterable[int]]]
) -> list[tuple[str, int]]:
    """(topic name, partition) of each partition, by topic name then partition (``names``: the cluster image's)."""
    found: list[tuple[str, int]] = []
    for topic_id, ps in partitions:
        name = _topic_name(names, topic_id)
        found.extend((name, p) for p in ps)
    found.sort()
    return found


def _partition_rows(
    now_ms: int, event: PartitionsAssigned | PartitionsRevoked, names: dict[uuid.UUID, str]
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """The ``assigned`` or ``revoked`` row of each partition of a member's change, as ``_emit`` would make them; the
    partitions named (with the image's ``names`` of the change's call) and sorted as the first row is taken."""
    kind = "assigned" if isinstance(event, PartitionsAssigned) else "revoked"
    detail = f"group={event.group_id}"
    for topic, partition in named_partitions(names, event.partitions):
        yield (
            now_ms,
            kind,
            {
                "member": event.client_id,
                "member_id": event.member_id,
                "generation": event.member_epoch,
                "topic": topic,
                "partition": partition,
                "detail": detail,
            },
        )


class _ProtocolLists:
    """Per classic group, the assignors each member listed, and how many members list each distinct list (a
    rebalance style is worked out from the few distinct lists, not from 10,000 members' at each transition)."""

    __slots__ = ("_counts", "_members")

    def __init__(self) -> None:
        self._members: dict[str, dict[str, tuple[str, ...]]] = {}  # group id -> member id -> its list
        self._counts: dict[str, dict[tuple[str, ...], int]] = {}  # group id -> list -> members listing it

    def set(self, group_id: str, member_id: str, protocols: tuple[str, ...]) -> None:
        members = self._members.setdefault(group_id, {})
        counts = self._counts.setdefault(group_id, {})
        before = members.get(member_id)
        if before is not None:
            if before == protocols:
                return
            self._drop(counts, before)
        members[member_id] = protocols
        counts[protocols] = counts.get(protocols, 0) + 1

    def remove(self, group_id: str, member_id: str) -> None:
        members = self._members.get(group_id)
        before = None if members is None else members.pop(member_id, None)
        if before is not None:
            self._drop(self._counts[group_id], before)

    def forget(self, group_id: str) -> None:
        self._members.pop(group_id, None)
        self._counts.pop(group_id, None)

    def distinct(self, group_id: str) -> list[tuple[str, ...]]:
        """The distinct lists the group's members list (none: no members known)."""
        return list(self._counts.get(group_id, ()))

    @staticmethod
    def _drop(counts: dict[tuple[str, ...], int], protocols: tuple[str, ...]) -> None:
        left = counts[protocols] - 1
        if left:
            counts[protocols] = left
        else:
            del counts[protocols]


class _MemberLines:
    """The log lines of members joining and leaving: one line each at info for the first
    ``MEMBER_LINES_PER_CALL`` of a call that are also among the first ``MEMBER_LINES_PER_WINDOW`` of their group
    in a window of ``MEMBER_LINES_WINDOW_MS`` (from the group's first line), the others at debug and counted;
    once the window is over (seen at the next call, or at ``close``), a line per kind saying how many more (a
    classic group of 10,000 members leaving in one LeaveGroup, or joining one JoinGroup at a time, is twenty
    lines and a count, not 10,000 lines)."""

    __slots__ = ("_debug", "_order", "_said", "_windows")

    def __init__(self) -> None:
        #: group id -> its window: [when it ends (ms), lines said at info, kind -> lines only counted]
        self._windows: dict[str, list[Any]] = {}
        self._order: deque[tuple[str, list[Any]]] = deque()  # the windows, as they were opened (so as they end)
        self._said = 0  # lines said at info in this call
        self._debug: bool | None = None

    def new_call(self, now_ms: int) -> None:
        """A call begins: the windows over by ``now_ms`` say how many more they counted (``WINDOWS_CLOSED_PER_CALL``
        of them at most, a line per group for the first ``GROUPS_SUMMARISED_PER_CALL`` that counted any)."""
        self._said = 0
        order = self._order
        closed = summarised = 0
        together: dict[str, int] = {}
        groups_together = 0
        while order and order[0][1][0] <= now_ms and closed < WINDOWS_CLOSED_PER_CALL:
            group_id, window = order.popleft()
            closed += 1
            if self._windows.get(group_id) is window:
                del self._windows[group_id]
            if not window[2]:
                continue
            if summarised < GROUPS_SUMMARISED_PER_CALL:
                summarised += 1
                _summarise(group_id, window)
                continue
            groups_together += 1
            for verb, count in window[2].items():
                together[verb] = together.get(verb, 0) + count
        if together:
            counts = ", ".join(f"{count} more members {verb}" for verb, count in together.items())
            log.info("%d more groups: %s (each logged at debug)", groups_together, counts)

    def line(self, now_ms: int, group_id: str, verb: str, member_id: str, client_id: str) -> None:
        window = self._windows.get(group_id)
        if window is None:
            window = self._windows[group_id] = [now_ms + MEMBER_LINES_WINDOW_MS, 0, {}]
            self._order.append((group_id, window))
        if self._said < MEMBER_LINES_PER_CALL and window[1] < MEMBER_LINES_PER_WINDOW:
            self._said += 1
            window[1] += 1
            log.info("group=%s member %s member_id=%s client_id=%s", group_id, verb, member_id, client_id)
            return
        more: dict[str, int] = window[2]
        more[verb] = more.get(verb, 0) + 1
        if self._debug is None:
            self._debug = log.isEnabledFor(logging.DEBUG)
        if self._debug:
            log.debug("group=%s member %s member_id=%s client_id=%s", group_id, verb, member_id, client_id)

    def close(self) -> None:
        """Every window says how many more it counted."""
        while self._order:
            _summarise(*self._order.popleft())
        self._windows.clear()


def _summarise(group_id: str, window: list[Any]) -> None:
    for verb, count in window[2].items():
        log.info("group=%s %d more members %s (each logged at debug)", group_id, count, verb)


def _topic_name(names: dict[uuid.UUID, str], topic_id: uuid.UUID) -> str:
    """The topic's name, or its id as text when the image has no topic of that id (made only then)."""
    name = names.get(topic_id)
    return str(topic_id) if name is None else name
