"""Replaying recorded churn: the scenario an event log shows, to run again under other strategies and protocols
(docs/lab.md, "Replaying recorded churn").

Entry points (no Spark needed for the first two; the HTTP dashboard or any other caller may use them):

* ``plan_replay(rows, group_id, since_ms, until_ms) -> ReplayPlan`` — pure: one group's shape and churn, read
  from the rows of an event log (dicts of the log schema, ``regroup.model.eventlog.FIELDS``, in file order: a
  whole ``regroup serve --events`` file, or a ``regroup simulate --events`` file) between ``since_ms`` and
  ``until_ms`` (None: the group's first and last row). The plan has the topics and partition counts, the members
  and their subscriptions, the members already in the group at the window start, and every join, leave, crash
  and restart in the window at its time relative to the window's start;
* ``groups_of(rows)`` — the groups a log holds (``[None]`` for a simulator log);
* ``run_replay(path, out, ...)`` — the whole replay (``lab.replay_run``): the plan, the recorded run's own
  metrics, every alternative strategy/protocol simulated (on Spark, or in this process), the tables and the
  report written to ``out``.

What a log tells, and what a plan makes of it:

* **a simulator log** says everything the scenario said about membership: the ``topic`` rows give the topics,
  the ``subscription`` rows each member's topics and protocol, the ``action`` rows every ``join``, ``leave``,
  ``crash``, ``restart`` and ``bounce`` at its time;
* **a server log** (``regroup serve --events``) has only the coordinator's view: ``member_state`` ``Joined`` and
  ``Left`` rows (client id, member id, time), ``group_state`` rows (the selected assignor, the protocol type,
  a classic group's rebalance style) and ``group_assignment`` rows. A member is named by its client id (a
  second member holding the same client id at the same time is ``<client id>#2``); a client id that joins
  again after it left is a ``restart``. The topics and their partition counts are those the group's
  assignments name (a partition never assigned is not seen); every member subscribes to all of them (the
  server logs no subscriptions). A ``Left`` row with ``reason=session-timeout`` is a ``crash`` (the member's
  process stopped answering); any other ``Left`` is a ``leave`` — and so is every ``Left`` of a log whose rows
  give no reason, where a clean leave and an expired session look the same (a crash's detection time is then
  not in the replay). Times are when the coordinator saw each change (``ReplayPlan.at_coordinator``: the
  scenario moves each action back by what the member did before the coordinator saw it, ``replay_scenario``).

An event that is not a membership change (network faults, partition growth) is not replayed; ``notes`` says so.
Bad input is a ``LabInputError`` naming the source.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from regroup.assignors.registry import server_side_name
from regroup.lab.errors import LabInputError
from regroup.lab.metrics import EMPTY_STATES
from regroup.model.eventlog import detail_fields

if TYPE_CHECKING:
    from regroup.lab.replay_run import ReplayOutcome

#: the scenario actions a replay plays (the membership changes)
MEMBERSHIP: Final = ("join", "leave", "crash", "restart", "bounce")
#: the actions that start a process, and those that stop one
STARTS: Final = frozenset({"join", "restart"})
STOPS: Final = frozenset({"leave", "crash"})
#: a server's ``Left`` reasons that mean the member's process was gone (the coordinator stopped hearing from it)
CRASH_REASONS: Final = frozenset({"session-timeout"})

Row = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ReplayEvent:
    """One membership change: ``at_ms`` from the window's start."""

    at_ms: int
    action: str
    member: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPlan:
    """The scenario a log shows, between ``since_ms`` and ``until_ms`` (the log's clock)."""

    kind: str  # "simulator" or "server"
    group_id: str | None
    since_ms: int
    until_ms: int
    topics: tuple[tuple[str, int], ...]  # (topic, partitions), by name
    members: tuple[tuple[str, tuple[str, ...]], ...]  # (member, its topics), in order of first appearance
    initial: tuple[str, ...]  # members in the group at the window's start
    events: tuple[ReplayEvent, ...]  # in time order
    strategy: str | None  # the recorded strategy (regroup's name), if the log says
    protocol: str | None  # the recorded protocol: eager, cooperative, consumer (mixed: members switched)
    notes: tuple[str, ...] = ()

    @property
    def at_coordinator(self) -> bool:
        """Whether the times are when the coordinator saw each change (a server log) rather than when the
        member's process started or stopped (a simulator log)."""
        return self.kind == "server"

    @property
    def duration_ms(self) -> int:
        return self.until_ms - self.since_ms

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "group_id": self.group_id,
            "since_ms": self.since_ms,
            "until_ms": self.until_ms,
            "topics": dict(self.topics),
            "members": {name: list(topics) for name, topics in self.members},
            "initial": list(self.initial),
            "events": [{"at_ms": e.at_ms, "action": e.action, "member": e.member} for e in self.events],
            "strategy": self.strategy,
            "protocol": self.protocol,
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------- groups
def is_simulator_log(rows: Sequence[Row]) -> bool:
    return bool(rows) and rows[0]["type"] == "sim_start"


def split_groups(rows: Sequence[Row]) -> dict[str | None, list[Row]]:
    """A log's rows per group: a simulator log is one group (None); in a server log a row belongs to the group
    its ``detail`` names, a ``group_assignment`` row without one to the group of the ``group_state`` before it
    (as ``lab.eventfiles`` reads them)."""
    if is_simulator_log(rows):
        return {None: list(rows)}
    from regroup.lab.eventfiles import by_group

    groups: dict[str | None, list[Row]] = {}
    groups.update(by_group(rows))
    return groups


def groups_of(rows: Sequence[Row]) -> list[str | None]:
    """The groups of a log, by id (``[None]`` for a simulator log)."""
    found = split_groups(rows)
    return sorted(found, key=lambda g: g or "")


def choose_group(rows: Sequence[Row], group_id: str | None, source: str) -> str | None:
    """The group to replay: ``group_id``, or a log's only group; a server log with several groups and no
    ``group_id`` is an error listing them, as is a group the log does not have."""
    groups = groups_of(rows)
    if not groups:
        raise LabInputError(f"{source}: no group events (neither a simulator log nor a server log)")
    if groups == [None]:
        if group_id is not None:
            raise LabInputError(f"{source}: a simulator log holds one group; --group is for server logs")
        return None
    if group_id is None:
        if len(groups) > 1:
            raise LabInputError(
                f"{source}: {len(groups)} groups in the log, choose one with --group: {', '.join(map(str, groups))}"
            )
        return groups[0]
    if group_id not in groups:
        raise LabInputError(f"{source}: no group {group_id!r} in the log (groups: {', '.join(map(str, groups))})")
    return group_id


# -------------------------------------------------------------------------------------------- planning
def plan_replay(
    rows: Sequence[Row],
    group_id: str | None = None,
    since_ms: int | None = None,
    until_ms: int | None = None,
    source: str = "<log>",
) -> ReplayPlan:
    """The scenario one group of a log shows between ``since_ms`` and ``until_ms`` (module docstring).

    A change at ``since_ms`` exactly is in the window; the members present before it are ``initial``."""
    group = choose_group(rows, group_id, source)
    own = split_groups(rows).get(group, [])
    where = source if group is None else f"{source}: group {group}"
    if not own:
        raise LabInputError(f"{where}: no events")
    since = own[0]["t"] if since_ms is None else since_ms
    until = own[-1]["t"] if until_ms is None else until_ms
    if until <= since:
        raise LabInputError(f"{where}: empty window: --until-ms {until} is not after --since-ms {since}")
    reader = _SimulatorLog(own) if group is None else _ServerLog(own)
    changes = [c for c in reader.changes if c[0] <= until]
    present: list[str] = []
    events: list[ReplayEvent] = []
    for t, action, member in changes:
        if t < since:
            if action in STARTS and member not in present:
                present.append(member)
            elif action in STOPS and member in present:
                present.remove(member)
        else:
            events.append(ReplayEvent(t - since, action, member))
    if not present and not events:
        raise LabInputError(f"{where}: empty window: no member in the group from {since} to {until} ms")
    involved = set(present) | {e.member for e in events}
    topics = reader.topics(until)
    if not topics:
        raise LabInputError(f"{where}: the log names no topic of the group (no assignment rows)")
    members = tuple((m, reader.subscription(m, topics)) for m in reader.order if m in involved)
    return ReplayPlan(
        kind="simulator" if group is None else "server",
        group_id=group,
        since_ms=since,
        until_ms=until,
        topics=tuple(sorted(topics.items())),
        members=members,
        initial=tuple(present),
        events=tuple(events),
        strategy=reader.strategy(until),
        protocol=reader.protocol(until),
        notes=tuple(reader.notes(since, until)),
    )


def _strategy_of(row: Row) -> str | None:
    """The assignor a ``group_state`` row names (regroup's name), or None (an empty group, none chosen)."""
    fields = detail_fields(row["detail"])
    chosen = fields.get("protocol") or fields.get("assignor")
    if chosen in (None, "None") or row["state"] in EMPTY_STATES:
        return None
    kip848 = fields.get("type") in ("consumer", "share") or "assignor" in fields
    return (server_side_name(chosen) or chosen) if kip848 else chosen


class _SimulatorLog:
    """A simulator log's membership: its actions, subscriptions and topics."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows
        self.changes: list[tuple[int, str, str]] = []
        self.order: list[str] = []
        self._subscriptions: dict[str, tuple[str, ...]] = {}
        self._styles: list[tuple[int, str]] = []
        self._other: list[tuple[int, str]] = []
        for row in rows:
            kind = row["type"]
            if kind == "action":
                action, member = row["detail"] or "", row["member"]
                if action in MEMBERSHIP and member:
                    self.changes.append((row["t"], action, member))
                    if member not in self.order:
                        self.order.append(member)
                else:
                    self._other.append((row["t"], action))
            elif kind == "subscription" and row["member"]:
                topics = tuple(t for t in (row["detail"] or "").split(",") if t)
                self._subscriptions[row["member"]] = topics
                if row["state"]:
                    self._styles.append((row["t"], row["state"]))

    def topics(self, until: int) -> dict[str, int]:
        """Each topic's partition count as first logged (growth is not replayed: ``notes``)."""
        out: dict[str, int] = {}
        for row in self.rows:
            if row["type"] == "topic" and row["topic"] and row["value"] is not None and row["topic"] not in out:
                out[row["topic"]] = row["value"]
        return out

    def subscription(self, member: str, topics: Mapping[str, int]) -> tuple[str, ...]:
        return self._subscriptions.get(member, tuple(sorted(topics)))

    def strategy(self, until: int) -> str | None:
        found = None
        for row in self.rows:
            if row["t"] > until:
                break
            if row["type"] == "group_state":
                found = _strategy_of(row) or found
        return found

    def protocol(self, until: int) -> str | None:
        styles = {style for t, style in self._styles if t <= until}
        return styles.pop() if len(styles) == 1 else ("mixed" if styles else None)

    def notes(self, since: int, until: int) -> list[str]:
        return [f"{t - since} ms: {what!r} is not a membership change: not replayed" for t, what in self._other
                if since <= t <= until]  # fmt: skip


class _ServerLog:
    """A server log's view of one group: ``Joined``/``Left`` rows, group states and assignments."""

    def __init__(self, rows: Sequence[Row]) -> None:
        self.rows = rows
        self.changes: list[tuple[int, str, str]] = []
        self.order: list[str] = []
        holders: dict[str, str] = {}  # member id -> its name
        held: dict[str, str] = {}  # name -> the member id holding it now
        used: set[str] = set()  # names that have been held
        self.repeated = False
        self.reasons = False  # the Left rows say why (``reason=``)
        for row in rows:
            if row["type"] != "member_state" or row["state"] not in ("Joined", "Left"):
                continue
            member_id = row["member_id"] or row["member"] or ""
            client = row["member"] or member_id
            if row["state"] == "Joined":
                if member_id in holders:
                    continue  # (the same member again: nothing changed)
                name, k = client, 1
                while name in held:  # another member holds this client id now
                    k += 1
                    name = f"{client}#{k}"
                    self.repeated = True
                holders[member_id] = name
                held[name] = member_id
                self.changes.append((row["t"], "restart" if name in used else "join", name))
                used.add(name)
                if name not in self.order:
                    self.order.append(name)
            else:
                gone = holders.pop(member_id, None)
                if gone is not None:
                    held.pop(gone, None)
                    reason = detail_fields(row["detail"]).get("reason")
                    self.changes.append((row["t"], "crash" if reason in CRASH_REASONS else "leave", gone))
                    self.reasons = self.reasons or reason is not None

    def topics(self, until: int) -> dict[str, int]:
        """Each topic the group's assignments name, with one more partition than the highest assigned."""
        out: dict[str, int] = {}
        for row in self.rows:
            if row["type"] == "group_assignment" and row["topic"] and row["partition"] is not None:
                out[row["topic"]] = max(out.get(row["topic"], 0), row["partition"] + 1)
        return out

    def subscription(self, member: str, topics: Mapping[str, int]) -> tuple[str, ...]:
        return tuple(sorted(topics))

    def _last_state(self, until: int) -> list[Row]:
        return [r for r in self.rows if r["type"] == "group_state" and r["t"] <= until]

    def strategy(self, until: int) -> str | None:
        found = None
        for row in self._last_state(until):
            found = _strategy_of(row) or found
        return found

    def protocol(self, until: int) -> str | None:
        found = None
        for row in self._last_state(until):
            fields = detail_fields(row["detail"])
            if fields.get("type") == "consumer":
                found = "consumer"
            elif fields.get("rebalance"):
                found = fields["rebalance"]
        return found

    def notes(self, since: int, until: int) -> list[str]:
        out = ["a server log has no subscriptions: every member subscribes to every topic the group's assignments name"]
        if not self.reasons:
            out.insert(
                0,
                "the log's Left rows do not say why a member left: each is replayed as a clean leave (a crash's "
                "session timeout is not replayed)",
            )
        if self.repeated:
            out.append("several members held the same client id at once: the later ones are named <client id>#<n>")
        return out


# ------------------------------------------------------------------------------------------ the whole
def read_rows(path: str) -> list[dict[str, Any]]:
    """Every row of an event file, checked against the log schema (``LabInputError`` naming the line)."""
    from regroup.lab.eventfiles import read_events

    return read_events(path)


def run_replay(path: str, out: Path, **options: Any) -> ReplayOutcome:
    """``regroup lab replay``: see ``lab.replay_run.run_replay`` for the options."""
    from regroup.lab import replay_run

    return replay_run.run_replay(path, out, **options)
